/**
 * Helpers of the tests that run real processes (`hermes worker` children, the commands of their
 * turns): kill a child when the test ends, ask whether a process is still there, read the lines a
 * command appended, and a shell loop that waits for a file.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { CleanUp } from './cleanup.ts';

/** SIGKILL `child` when the test ends, if it is still running. */
export function killAfter(cleanups: CleanUp[], child: ChildProcess): void {
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
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
