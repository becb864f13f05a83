/**
 * Quiet replies (docs/CONTEXT.md, "Quiet ticks"): the one recogniser of the `[SILENT]` marker, asked on
 * every path a reply can be delivered from — loop and heartbeat ticks, cron runs, goal continuations
 * and chat replies. A quiet reply stays in the transcript and the event stream and is not delivered,
 * unless the schedule's `--notify always` asks for every reply.
 *
 * The rule: a reply is quiet when its first or its last line (blank lines and code-fence lines left
 * out) is the marker alone — `[SILENT]` or `SILENT`, in any case, with whitespace or punctuation
 * around it (`[SILENT].`), Markdown emphasis (`**[SILENT]**`, `_[silent]_`), a code span
 * (`` `[SILENT]` ``) or a code fence. Real models answer in all of these shapes, and a phone's
 * Markdown rendering shows each of them as a bare "[SILENT]". Anything else on that line makes it
 * a sentence, not the marker: "the marker [SILENT] means quiet" is delivered.
 */

/** The marker the wakeup text asks for when nothing worth telling the user changed. */
export const SILENT_REPLY = '[SILENT]';

/** A code-fence line: three backticks or tildes and an optional info string (```` ```text ````). */
const FENCE_LINE = /^(?:`{3,}|~{3,})[^`~]*$/;
/** What may wrap the marker on its line: whitespace, emphasis, code, quotes, a list or quote mark before, punctuation after. */
const WRAPPING = /^[\s*_~`"'“”‘’>#-]+|[\s*_~`"'“”‘’.!?,;:…]+$/g;
/** The marker once its wrapping is gone (emphasis inside the brackets removed too). */
const MARKER = /^(?:\[\s*silent\s*\]|silent)$/i;

/** True when `line` is the marker alone, wrapped as the module's rule allows. */
function isMarkerLine(line: string): boolean {
  return MARKER.test(line.replace(WRAPPING, '').replace(/[*_~`]/g, ''));
}

/** True when `reply` is quiet: its first or last line is the `[SILENT]` marker (the rule above). */
export function isSilentReply(reply: string): boolean {
  const lines = reply
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '' && !FENCE_LINE.test(l));
  if (lines.length === 0) return false;
  return isMarkerLine(lines[0]!) || isMarkerLine(lines[lines.length - 1]!);
}
