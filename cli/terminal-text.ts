/**
 * The CLI's one way to a terminal. Text from outside (job names, prompts, replies, tool output,
 * error messages that echo input) may carry control characters: a reply could set the window
 * title, write the clipboard (OSC 52), move the cursor, hide text, ring the bell or reorder what a
 * line shows (`\x1b]0;…\x07`, `\x1b]52;c;…\x07`, `\x1b[8m`, U+202E, …). So every byte the `hermes`
 * command writes to stdout or stderr goes through `writeOut`/`writeErr` (or the line helpers),
 * which show those characters escaped: newlines and tabs are kept; every other C0 and C1 control
 * character, DEL, the Unicode line/paragraph separators and the bidi embeddings, overrides and
 * isolates become `\xNN` / `\u{NNNN}`. JSON output is made with `terminalJson`, which writes the
 * same characters as JSON escapes (`\u009b`), so it stays valid and parses to the same values.
 * ESLint keeps `process.stdout`/`process.stderr` writes and `console` out of the rest of `cli/`
 * (eslint.config.js).
 */
import type { Command } from 'commander';

// eslint-disable-next-line no-control-regex
const UNSAFE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** `text` with its control characters shown escaped (newlines and tabs kept). */
export function terminalSafe(text: string): string {
  return text.replace(UNSAFE, (ch) => {
    const code = ch.codePointAt(0)!;
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
  });
}

/**
 * `JSON.stringify(value, null, indent)` with no control character left raw: JSON escapes C0 itself;
 * DEL, C1, the separators and the bidi characters become `\uNNNN` escapes (still valid JSON, the
 * same values once parsed).
 * @param indent - spaces per level; 0 for one line
 */
export function terminalJson(value: unknown, indent = 2): string {
  return JSON.stringify(value, null, indent).replace(UNSAFE, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Write `text` to stdout, control characters escaped. */
export function writeOut(text: string): void {
  process.stdout.write(terminalSafe(text));
}

/** Write `text` to stderr, control characters escaped. */
export function writeErr(text: string): void {
  process.stderr.write(terminalSafe(text));
}

/** `writeOut` of one line (the newline added). */
export function printOut(line: string): void {
  writeOut(`${line}\n`);
}

/** `writeErr` of one line (the newline added). */
export function printErr(line: string): void {
  writeErr(`${line}\n`);
}

/**
 * Route commander's own output (help, usage errors, which echo the arguments typed) of `command`
 * and the subcommands added after this call through `writeOut`/`writeErr`.
 */
export function commanderOutput(command: Command): Command {
  return command.configureOutput({ writeOut, writeErr });
}
