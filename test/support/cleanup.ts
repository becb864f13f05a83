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
 *
 * Tests that run concurrently (`it.concurrent`) take their own list from the `it` exported here
 * instead: `it.concurrent('…', async ({ cleanups, expect }) => …)`; one list for the whole file
 * would be emptied by whichever test ends first.
 */
import { afterEach, test } from 'vitest';

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

/** vitest's `it` with a `cleanups` fixture: this test's own clean-up list, run when it ends. */
export const it = test.extend<{ cleanups: CleanUp[] }>({
  // vitest reads a fixture's dependencies from its first parameter, which must be a destructuring pattern.
  // eslint-disable-next-line no-empty-pattern
  cleanups: async ({}, use) => {
    const cleanups: CleanUp[] = [];
    await use(cleanups);
    await runCleanups(cleanups);
  },
});
