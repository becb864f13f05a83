/**
 * Exit policy of the `hermes` command: a user sees one clear line, never a
 * stack trace. Exit 2 for bad input (usage, config, schedule input), 1 for
 * everything else. `HERMES_DEBUG=1` adds the stack for developers.
 */
import type { HermesConfig } from '../scheduler/config.ts';
import { isHermesError } from '../scheduler/errors/hermes-error.ts';

/** Short-lived commands log warnings only, unless debug logging was asked for. */
export function cliLogLevel(config: HermesConfig): string {
  return config.log_level === 'debug' || config.log_level === 'trace' ? config.log_level : 'warn';
}

/** Exit code of bad input: usage, config, schedule input. */
export const EXIT_BAD_INPUT = 2;
/** Exit code of everything else (an unreachable Redis, a refused write, `doctor` findings). */
export const EXIT_FAILURE = 1;

/**
 * Print `err` for a user as one line (the stack only with `HERMES_DEBUG`) and
 * return the exit code. Every command reports its errors here.
 * @param write - where the line goes (default stderr; tests pass their own)
 */
export function reportError(err: unknown, write: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): number {
  if (isHermesError(err)) {
    write(`hermes: ${err.message}`);
    return err.code === 'SCHEDULE_INPUT' || err.code === 'CONFIG_INVALID' ? EXIT_BAD_INPUT : EXIT_FAILURE;
  }
  const e = err as Error;
  write(`hermes: unexpected error: ${e?.message ?? String(err)}`);
  if (process.env.HERMES_DEBUG) write(`${e?.stack}`);
  return EXIT_FAILURE;
}

/** Wrap a command action: errors are reported and set the exit code. */
export function action<A extends unknown[]>(fn: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (err) {
      process.exitCode = reportError(err);
    }
  };
}

/**
 * Resolve on the first SIGINT or SIGTERM. Later signals are acknowledged and
 * otherwise ignored, so a second Ctrl+C cannot cut a drain short and leave the
 * embedded Redis running.
 * @param options.stopping - the stop has already begun: every signal is only acknowledged
 */
export function waitForSignal(options: { stopping?: boolean } = {}): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let first = options.stopping !== true;
    const on = (sig: NodeJS.Signals) => {
      if (first) {
        first = false;
        resolve(sig);
      } else {
        process.stderr.write(`hermes: already stopping (${sig}); waiting for the drain to finish\n`);
      }
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
}

/**
 * A closed pipe (`hermes status | head -1`) ends the command quietly: the
 * reader has gone, so there is nobody left to tell. Without this, Node reports
 * the EPIPE of the next write as an uncaught error with a stack trace.
 */
export function endQuietlyOnClosedPipe(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
      throw err;
    });
  }
}

/**
 * Last resort for an error no command caught (an uncaught exception or an
 * unhandled rejection): one line on stderr, no stack unless `HERMES_DEBUG`,
 * exit 1. Children such as the embedded Redis are stopped by their own
 * `exit` hooks.
 */
export function reportFatal(err: unknown): void {
  try {
    reportError(err);
  } finally {
    process.exit(1);
  }
}
