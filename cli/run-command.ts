/**
 * Exit policy of the `hermes` command: a user sees one clear line, never a
 * stack trace. Exit 2 for bad input (usage, config, schedule input), 1 for
 * everything else. `HERMES_DEBUG=1` adds the stack for developers.
 */
import type { HermesConfig } from '../scheduler/config/config.ts';
import { CommanderError } from 'commander';
import { isHermesError } from '../scheduler/errors/hermes-error.ts';
import { printErr } from './terminal-text.ts';
import { nameTable } from '../scheduler/names/name-table.ts';

/** Short-lived commands log warnings only, unless debug logging was asked for. */
export function cliLogLevel(config: HermesConfig): string {
  return config.log_level === 'debug' || config.log_level === 'trace' ? config.log_level : 'warn';
}

/** Exit code of bad input: usage, config, schedule input. */
export const EXIT_BAD_INPUT = 2;
/** Exit code of everything else (an unreachable Redis, a refused write, `doctor` findings). */
export const EXIT_FAILURE = 1;

/**
 * The flag of each service input field whose flag a message should name at a
 * terminal. Services (shared with `/api`) name a field in backticks, as the
 * JSON body spells it (`` `notify` must be auto, always, done, never``); the
 * CLI writes its flag instead (`--notify must be …`).
 */
const FIELD_FLAGS = nameTable({
  schedule: '--schedule',
  prompt: '--prompt',
  name: '--name',
  deliver: '--deliver',
  repeat: '--repeat',
  tz: '--tz',
  script: '--script',
  misfire: '--misfire',
  catchup_window: '--catchup-window',
  overlap: '--overlap',
  notify: '--notify',
  jitter: '--jitter',
  force: '--force',
  from: '--from',
  to: '--to',
  limit: '--limit',
  cursor: '--cursor',
  state: '--state',
  n: '-n',
});

/** A service message as a terminal user reads it: every `` `field` `` with a flag becomes that flag. */
export function withFlags(message: string): string {
  return message.replace(/`([a-z_]+)`/g, (whole, field: string) => FIELD_FLAGS[field] ?? whole);
}

/** Exit code of a command that stopped on `err`: bad input (usage, config, schedule input) 2, anything else 1. */
export function exitCodeOf(err: unknown): number {
  if (err instanceof CommanderError) return COMMANDER_NOT_ERRORS.has(err.code) ? 0 : EXIT_BAD_INPUT;
  return isHermesError(err) && (err.code === 'SCHEDULE_INPUT' || err.code === 'CONFIG_INVALID') ? EXIT_BAD_INPUT : EXIT_FAILURE;
}

/** commander's exits that are no error: help and version shown. */
const COMMANDER_NOT_ERRORS = new Set(['commander.helpDisplayed', 'commander.help', 'commander.version']);

/**
 * Print `err` for a user as one line (the stack only with `HERMES_DEBUG`) and
 * return the exit code (`exitCodeOf`). Every command reports its errors here;
 * input errors name flags, not fields (`withFlags`).
 * @param write - where the line goes (default stderr; tests pass their own)
 */
export function reportError(err: unknown, write: (line: string) => void = printErr): number {
  if (isHermesError(err)) {
    write(`hermes: ${err.code === 'SCHEDULE_INPUT' ? withFlags(err.message) : err.message}`);
    return exitCodeOf(err);
  }
  const e = err as Error;
  write(`hermes: unexpected error: ${e?.message ?? String(err)}`);
  if (process.env.HERMES_DEBUG) write(`${e?.stack}`);
  return EXIT_FAILURE;
}

/** Where a command's error line goes and where its exit code is recorded. Tests pass their own. */
export interface ErrorSink {
  err(line: string): void;
  setExitCode(code: number): void;
}

/** The process's: stderr and `process.exitCode`. */
export const processErrorSink: ErrorSink = {
  err: printErr,
  setExitCode: (code) => {
    process.exitCode = code;
  },
};

/** Wrap a command action: errors are reported and set the exit code (`sink`, default the process's). */
export function action<A extends unknown[]>(
  fn: (...args: A) => Promise<void>,
  sink: ErrorSink = processErrorSink,
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (err) {
      sink.setExitCode(reportError(err, (line) => sink.err(line)));
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
        printErr(`hermes: already stopping (${sig}); waiting for the drain to finish`);
      }
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
}

/** Time closing may take after the drain budget (connections, queues, the gateway's server). */
export const STOP_GRACE_MS = 10_000;

/**
 * How long a long-running command (`up`, `worker`, `gateway`) waits for its stop: the longer
 * drain budget (`agent.cron_drain_timeout`, `agent.restart_drain_timeout`) plus `STOP_GRACE_MS`.
 * Past it (Redis unreachable: replies that never come) the process exits without waiting more.
 */
export function stopDeadlineMs(config: HermesConfig): number {
  return Math.max(config.agent.cron_drain_timeout, config.agent.restart_drain_timeout) * 1000 + STOP_GRACE_MS;
}

/** Wait for `work` at most `ms`: true when it settled in time (its failure counts as settled). */
export async function settleWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work.then(
        () => true,
        () => true,
      ),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
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
