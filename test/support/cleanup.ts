/**
 * What a test starts, stopped after it. In a test file:
 *
 * ```ts
 * const cleanups = cleanupAfterEach();
 * // in a test or a setup helper
 * cleanups.push(() => worker.drain(), () => env.cleanup());
 * ```
 *
 * After each test the clean-ups run newest first (a worker stops before the Redis client it uses
 * is closed). Every one runs even when one before it throws; the test then fails with the first
 * error (and the others, as an AggregateError), so one broken close never leaks the rest.
 */
import { afterEach } from 'vitest';

/** One clean-up step: a close, a drain, a folder removal. */
export type CleanUp = () => unknown;

/** Run `cleanups` newest first, each even if another threw (including steps pushed while running). */
export async function runCleanups(cleanups: CleanUp[]): Promise<void> {
  const errors: unknown[] = [];
  for (let step = cleanups.pop(); step; step = cleanups.pop()) {
    try {
      await step();
    } catch (err) {
      errors.push(err);
    }
  }
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) throw new AggregateError(errors, `${errors.length} clean-ups failed`);
}

/** The clean-up list of this test file, run after each test (see the file header). */
export function cleanupAfterEach(): CleanUp[] {
  const cleanups: CleanUp[] = [];
  afterEach(() => runCleanups(cleanups));
  return cleanups;
}
