/**
 * Child processes of command turns and command tools, each in a process group
 * of its own, so a timeout or an abort reaches everything the command started.
 *
 * Policy (docs/RELIABILITY.md, "A dead worker's work restarts within seconds"):
 * - the worker signals the whole group at the command's deadline or on abort
 *   (SIGTERM, then SIGKILL after a grace), and waits for the group leader;
 * - when the command has exited, whatever it left running in its group (a
 *   `thing &` whose output went elsewhere) is ended too (`endGroup`): a turn's
 *   processes end with the turn;
 * - a worker that dies (SIGKILL, OOM, lost host) can signal nothing, and its
 *   command would run on with no deadline while another worker re-runs the
 *   turn. So every group carries a backstop: a small POSIX shell watchdog,
 *   started in the group (not as the command's child) before the command is
 *   exec'd, sleeps until the worker's deadline plus `BACKSTOP_GRACE_MS`, then
 *   signals the whole group (SIGTERM, then SIGKILL 2 s later). It lives as long as the group may, so it
 *   also ends what the command left behind after its worker died; it ignores
 *   SIGTERM itself and holds none of the command's stdin, stdout or stderr. A
 *   process that leaves the group on purpose (`setsid`) is out of its reach.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { existsSync } from 'node:fs';

/** How long after the worker's own deadline the backstop ends the group, ms. */
export const BACKSTOP_GRACE_MS = 5000;

/**
 * `sh -c WATCHDOG hermes-backstop <sleep> <seconds> <file> <args…>`: start the watchdog, then exec
 * the command, which keeps this process's pid, so the command leads the group and its exit status
 * is the child's. The watchdog is started from a subshell that exits at once, so it is not a child
 * of the command (a program that waits for any child of its own never waits for it), yet stays in
 * the group. It signals the group only after its `sleep` ran to the end: a `sleep` that cannot run
 * ends nothing. `sleep` is named by its absolute path, as the command's `PATH` is the operator's.
 */
const WATCHDOG =
  '( (trap "" TERM; "$1" "$2" && { kill -TERM 0; "$1" 2; kill -KILL 0; }) </dev/null >/dev/null 2>&1 & ); shift 2; exec "$@"';

/** The `sleep` binary the watchdog runs (looked up once, in the usual places). */
const SLEEP = ['/bin/sleep', '/usr/bin/sleep'].find((p) => existsSync(p));

/**
 * The argv that runs `file argv` with the backstop (see above) at `deadlineMs`
 * plus the grace; `file argv` unchanged on a system without a `sleep` binary.
 */
export function withBackstop(file: string, argv: string[], deadlineMs: number): [string, string[]] {
  if (!SLEEP) return [file, argv];
  const seconds = Math.ceil((deadlineMs + BACKSTOP_GRACE_MS) / 1000);
  return ['/bin/sh', ['-c', WATCHDOG, 'hermes-backstop', SLEEP, String(seconds), file, ...argv]];
}

/**
 * Spawn `file argv` as the leader of a new process group, with the backstop.
 * @param deadlineMs - the caller's own deadline for the command, ms (the backstop comes after it)
 */
export function spawnInGroup(file: string, argv: string[], deadlineMs: number, options: Omit<SpawnOptions, 'detached'>): ChildProcess {
  const [cmd, args] = withBackstop(file, argv, deadlineMs);
  return spawn(cmd, args, { ...options, detached: true });
}

/**
 * The abort reason of a turn fenced off before its job lock can lapse (`lock-fence.ts`): its
 * commands get SIGKILL at once, with no grace, so none outlives the lock.
 */
export const FENCED = new Error('the job lock could not be renewed in time: the turn was fenced off');

/**
 * Stop the group `child` leads for an abort with `reason`: SIGTERM, then SIGKILL after `graceMs`;
 * SIGKILL at once for a fenced turn (`FENCED`).
 */
export function stopGroup(child: ChildProcess, reason: unknown, graceMs: number): void {
  if (reason === FENCED) {
    signalGroup(child, 'SIGKILL');
    return;
  }
  signalGroup(child, 'SIGTERM');
  setTimeout(() => signalGroup(child, 'SIGKILL'), graceMs).unref();
}

/** Send `signal` to the whole process group `child` leads; to `child` alone when the group is gone. */
export function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (child.pid) process.kill(-child.pid, signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      /* already gone */
    }
  }
}

/**
 * End what is left of the group of a command that has exited: its watchdog and
 * anything it left running (SIGKILL; nothing left is not an error).
 */
export function endGroup(child: ChildProcess): void {
  try {
    if (child.pid) process.kill(-child.pid, 'SIGKILL');
  } catch {
    /* the group is empty */
  }
}
