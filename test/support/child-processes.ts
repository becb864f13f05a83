/**
 * Helpers of the tests that run real processes (`hermes worker` children, the commands of their
 * turns): kill a child when the test ends, ask whether a process is still there, read the lines a
 * command appended, and a shell loop that waits for a file.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { CleanUp } from './cleanup.ts';

const running = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

/** The children of this test process still running, SIGKILLed when it ends (see `track`). */
const tracked = new Set<ChildProcess>();
let killedOnExit = false;

function killTracked(): void {
  for (const child of tracked) if (running(child)) child.kill('SIGKILL');
}

/**
 * Remember `child` until it exits, so that it is SIGKILLed when this test process ends however it ends:
 * normally, on the SIGTERM or SIGINT vitest's pool sends its workers, or when the vitest run that started
 * this process is gone (stopped by a signal, it exits without stopping its pool processes). A clean-up list can miss a child: one spawned by a test that already timed out (its clean-ups
 * ran before the spawn), or a `beforeAll` whose `afterAll` never came.
 */
export function track<C extends ChildProcess>(child: C): C {
  if (!killedOnExit) {
    killedOnExit = true;
    process.on('exit', killTracked);
    // vitest's pool process whose parent is gone (the run was stopped) loses its IPC channel and may live on.
    process.once('disconnect', killTracked);
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      process.once(signal, () => {
        killTracked();
        process.kill(process.pid, signal); // the handler was `once`: the default action ends the process now
      });
    }
  }
  tracked.add(child);
  child.once('exit', () => tracked.delete(child));
  return child;
}

/**
 * SIGKILL `child` when the test ends, if it is still running, and wait until it has exited (a clean-up
 * pushed before this one, e.g. removing its home, runs after it is gone). Tracked as `track` does.
 */
export function killAfter(cleanups: CleanUp[], child: ChildProcess): void {
  track(child);
  cleanups.push(async () => {
    if (!running(child)) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  });
}

/** Whether a process with this pid still exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The lines of `file` (empty ones left out; none when it does not exist). */
export function lines(file: string): string[] {
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : [];
}

/**
 * A shell loop that waits until `file` exists, or until its folder is gone (the test's clean-up
 * removes it): the command of a SIGKILLed worker is orphaned, and nothing else would end it in time.
 */
export const waitForFile = (file: string): string => `while [ ! -f ${file} ] && [ -d ${dirname(file)} ]; do sleep 0.05; done`;
