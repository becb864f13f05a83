/**
 * Child processes of command turns and command tools, each in a process group
 * of its own, so a timeout or an abort reaches everything the command started.
 *
 * Policy (docs/RELIABILITY.md, "A dead worker's work restarts within seconds"):
 * - the worker signals the whole group at the command's deadline or on abort
 *   (SIGTERM, then SIGKILL after a grace), and waits for the group leader;
 * - a worker that dies (SIGKILL, OOM, lost host) can signal nothing, and its
 *   command would run on with no deadline while another worker re-runs the
 *   turn. So the command runs under coreutils `timeout`, which ends the group
 *   by itself `BACKSTOP_GRACE_MS` after the worker's own deadline (SIGTERM,
 *   then SIGKILL 2 s later). `timeout` without `--foreground` signals its whole
 *   process group, grandchildren included. Where the system has no coreutils
 *   `timeout` (it is checked once per process), the command runs bare and the
 *   worker's own deadline is the only one.
 */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';

/** How long after the worker's own deadline the backstop ends the group, ms. */
export const BACKSTOP_GRACE_MS = 5000;

let coreutilsTimeout: boolean | undefined;

/** Whether coreutils `timeout` is on PATH (checked once per process). */
function hasCoreutilsTimeout(): boolean {
  if (coreutilsTimeout === undefined) {
    const r = spawnSync('timeout', ['--version'], { encoding: 'utf8', timeout: 5000 });
    coreutilsTimeout = r.status === 0 && /coreutils/i.test(r.stdout ?? '');
  }
  return coreutilsTimeout;
}

/**
 * The argv that runs `file argv` with the backstop (see above) at `deadlineMs`
 * plus the grace, or `file argv` unchanged where there is no coreutils `timeout`.
 */
export function withBackstop(file: string, argv: string[], deadlineMs: number): [string, string[]] {
  if (!hasCoreutilsTimeout()) return [file, argv];
  const seconds = ((deadlineMs + BACKSTOP_GRACE_MS) / 1000).toFixed(3);
  return ['timeout', ['-k', '2', seconds, file, ...argv]];
}

/**
 * Spawn `file argv` as the leader of a new process group, under the backstop.
 * @param deadlineMs - the caller's own deadline for the command, ms (the backstop comes after it)
 */
export function spawnInGroup(file: string, argv: string[], deadlineMs: number, options: Omit<SpawnOptions, 'detached'>): ChildProcess {
  const [cmd, args] = withBackstop(file, argv, deadlineMs);
  return spawn(cmd, args, { ...options, detached: true });
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
