/**
 * One `hermes up` per `HERMES_HOME`. A second one would start a second worker on the same store and
 * then fail to bind the gateway's port (EADDRINUSE); instead it is refused at once, saying which
 * process runs and how to reach it (`hermes chat`).
 *
 * The lock is `$HERMES_HOME/up.pid`, created exclusively (`wx`, mode 0600) with the pid of the
 * `hermes up` that holds it and removed when it stops. A lock whose process is gone — killed with
 * SIGKILL, a crashed machine — or whose pid now belongs to a process that is not `hermes` is stale
 * and taken over.
 */
import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AlreadyRunningError } from '../scheduler/errors/already-running-error.ts';
import { DEFAULT_SESSION } from './cli-context.ts';

/** The lock file of a home. */
export function upLockPath(home: string): string {
  return join(home, 'up.pid');
}

/** A held lock; `release()` removes it (only while it is still this process's). */
export interface UpLock {
  readonly path: string;
  release(): void;
}

/**
 * Take this home's `hermes up` lock.
 * @throws AlreadyRunningError when a live `hermes up` holds it (the message says how to attach)
 */
export function takeUpLock(home: string, pid = process.pid): UpLock {
  // Made 0700 when new; an existing home keeps its mode (the embedded Redis's checks narrow what they need).
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const path = upLockPath(home);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(path, `${pid}\n`, { flag: 'wx', mode: 0o600 });
      return {
        path,
        release() {
          if (holderOf(path) === pid) unlinkSync(path);
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = holderOf(path);
    if (holder !== undefined && holder !== pid && isHermes(holder)) {
      throw new AlreadyRunningError(
        `hermes up is already running for ${home} (pid ${holder}). Attach to it with \`hermes chat\` (session "${DEFAULT_SESSION}"; ` +
          `--session for another); stop it with Ctrl+C in its terminal or \`kill ${holder}\`.`,
        { pid: holder },
      );
    }
    // Stale: its process is gone (or the pid is another program's now). Take it over.
    try {
      unlinkSync(path);
    } catch {
      // removed meanwhile by its owner: try again
    }
  }
  throw new AlreadyRunningError(
    `hermes up is starting for ${home} in another process at this moment; run \`hermes chat\` to attach once it is up.`,
    { pid: 0 },
  );
}

/** The pid written in a lock file, or `undefined` when there is none or it is unreadable. */
function holderOf(path: string): number | undefined {
  try {
    const pid = Number(readFileSync(path, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** True when `pid` is a live process that is a `hermes` command (where /proc tells; else any live process). */
function isHermes(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return /hermes|cli[/\\]main\.(ts|js)|dist[/\\]main\.js/.test(cmdline);
  } catch {
    return true; // no /proc (macOS): a live pid is taken as the holder
  }
}
