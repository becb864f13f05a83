/**
 * The one attempt policy for optimistic writes (read a versioned record,
 * change it, write it over the version read): a write that found another
 * version re-reads and tries again, up to `OPTIMISTIC_ATTEMPTS` times, with no
 * pause (a conflict means another writer just succeeded, so the next read is
 * already fresh). Used by the schedule, goal and cron job services and by the
 * worker's commits of ticks, cron runs and goal turns.
 */

/** Attempts of one optimistic write before it gives up. */
export const OPTIMISTIC_ATTEMPTS = 10;

/** What an attempt returns when its write found another version. */
export const CONFLICT: unique symbol = Symbol('optimistic write conflict');

/**
 * Run `attempt` until it returns something other than `CONFLICT`.
 * @param attempt - reads, decides and writes once; returns `CONFLICT` when the version check failed
 * @param exhausted - the error to throw after `OPTIMISTIC_ATTEMPTS` conflicts
 * @returns the first non-conflict result
 * @throws the error from `exhausted`; whatever `attempt` throws
 */
export async function retryOnConflict<T>(attempt: () => Promise<T | typeof CONFLICT>, exhausted: () => Error): Promise<T> {
  for (let i = 0; i < OPTIMISTIC_ATTEMPTS; i++) {
    const result = await attempt();
    if (result !== CONFLICT) return result;
  }
  throw exhausted();
}
