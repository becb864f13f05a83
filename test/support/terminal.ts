/**
 * Running a command in a real pseudo-terminal, as a user's terminal would:
 * util-linux `script` allocates the pty and makes the command its session's
 * foreground process group; bytes written to `type()` go through the pty's
 * line discipline, so `\x03` (Ctrl+C) becomes SIGINT for the whole foreground
 * process group, exactly as typed at a keyboard.
 *
 * `script` runs the command through `$SHELL -c`; the command is `exec`ed so no
 * shell stays in the foreground group. (A non-interactive dash — `/bin/sh` on
 * Debian — dies of that SIGINT itself and `script` then reports 130 whatever
 * the command did.)
 */
import { spawn, type ChildProcess } from 'node:child_process';

/** A command running in a pty. */
export interface TerminalRun {
  child: ChildProcess;
  /** Everything the terminal showed so far (stdout and stderr of the command, merged by the pty). */
  output(): string;
  /** Type bytes at the keyboard, e.g. `'\x03'` for Ctrl+C. */
  type(text: string): void;
  /** Resolves with the exit code once the command (and `script`) ended. */
  exited: Promise<number | null>;
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** Start `argv` in a fresh pty with `env`. */
export function runInTerminal(argv: string[], env: NodeJS.ProcessEnv): TerminalRun {
  const child = spawn('script', ['-qfec', `exec ${argv.map(shellQuote).join(' ')}`, '/dev/null'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => out, type: (text) => child.stdin.write(text), exited };
}
