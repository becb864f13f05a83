/**
 * What a loop's tick does when it comes due while the loop's previous tick still runs (`--overlap`;
 * docs/DESIGN.md §4, "Overlap", with Temporal's names as for cron jobs, docs/CRON.md "Overlap"):
 * - `queue` (the default; Temporal's BUFFER_ONE): it waits for the running tick and then runs once —
 *   ticks due meanwhile coalesce into it;
 * - `skip` (SKIP): it is skipped; the next tick comes at the loop's next slot;
 * - `cancel_other` (CANCEL_OTHER): the running tick is cancelled (its commands killed, it is recorded
 *   cancelled — no failure counted) and the new one runs — "a newer check makes the running one pointless".
 *
 * `allow` and `buffer_all` are cron jobs' only: a session runs one turn at a time, so a loop's ticks
 * can never run side by side, and a loop's tick reads the state as it is when it runs, so ticks
 * queued behind a long one would all read the same state (`queue` runs one of them).
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';

export const LOOP_OVERLAP_POLICIES = ['queue', 'skip', 'cancel_other'] as const;

/** A loop's overlap policy (absent on a record = `queue`). */
export type LoopOverlap = (typeof LOOP_OVERLAP_POLICIES)[number];

/**
 * Read a loop's `--overlap` value.
 * @throws ScheduleInputError for any other value, saying why `allow` and `buffer_all` are cron jobs' only
 */
export function parseLoopOverlap(value: string): LoopOverlap {
  const v = value.trim().toLowerCase().replace(/-/g, '_');
  if ((LOOP_OVERLAP_POLICIES as readonly string[]).includes(v)) return v as LoopOverlap;
  if (v === 'allow' || v === 'buffer_all') {
    throw new ScheduleInputError(
      `--overlap ${v} is for cron jobs: a loop's ticks never run side by side in one session, and each reads the state as it is when it runs. Loops take queue (the default), skip or cancel_other.`,
      { field: 'overlap' },
    );
  }
  throw new ScheduleInputError(`--overlap must be queue, skip or cancel_other for a loop, got "${value}".`, { field: 'overlap' });
}
