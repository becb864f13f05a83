/**
 * Text from outside (job names, prompts, replies, tool output) shown on a terminal: control
 * characters are shown escaped, so a reply cannot set the window title, move the cursor, hide
 * text or ring the bell (`\x1b]0;…\x07`, `\x1b[8m`, …). Newlines and tabs are kept; every other
 * C0 and C1 control character, DEL, and the Unicode line/paragraph separators and bidi overrides
 * become `\xNN` / `\u{NNNN}`. The one place the CLI does this; JSON output needs none (JSON escapes them).
 */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** `text` with its control characters shown escaped (newlines and tabs kept). */
export function terminalSafe(text: string): string {
  return text.replace(UNSAFE, (ch) => {
    const code = ch.codePointAt(0)!;
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
  });
}
