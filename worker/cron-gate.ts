/**
 * The gate of a cron occurrence as pure decisions, beside the misfire decision
 * (`decideOccurrence`, `scheduler/cron/misfire.ts`): how a job that arrived
 * before its due time waits (`decideEarly`), what `--overlap` does when the
 * job's previous run is still going (`decideOverlap`), and how a run whose turn
 * threw ends (`decideRunEnding`). The processor (`cron-processor.ts`) gathers
 * the facts and carries the decisions out. Policies: docs/CRON.md, "What
 * happens at run time"; docs/RELIABILITY.md, "A cron run cut by a drain is
 * handed back" and "A dead worker's work restarts within seconds".
 */
import type { OverlapPolicy } from '../scheduler/cron/cron-job.ts';

/** Longest wait inside a processor before an early job is put back as delayed, ms. */
export const MAX_IN_PROCESS_WAIT_MS = 30_000;

/** Why a cron tick was put back to run later. */
export type CronDeferReason = 'drain' | 'early' | 'overlap-queue';

/** A cron tick put back to run again after `delayMs`. */
export interface CronDefer {
  action: 'defer';
  reason: CronDeferReason;
  delayMs: number;
}

/**
 * Drain hand-back: an occurrence a draining worker received before it was claimed, or whose run the
 * drain deadline cut, goes back to the queue due at once (its attempt count untouched); the paused
 * worker does not take it again, another worker does.
 */
export const CRON_DRAIN_HAND_BACK: CronDefer = { action: 'defer', reason: 'drain', delayMs: 0 };

/**
 * Nothing early (docs/CRON.md): a job picked up before `untilMs` waits for it in this process
 * (in steps of at most {@link MAX_IN_PROCESS_WAIT_MS}, the record read again after each), unless
 * the wait is longer than that or the worker is draining: then it is put back as delayed until due.
 * @param canDefer - the job can be moved (the worker's lock token is known)
 * @returns `sleep` for `ms` then decide again, or `defer` until due
 */
export function decideEarly(untilMs: number, now: number, f: { draining: boolean; canDefer: boolean }): { action: 'sleep'; ms: number } | CronDefer {
  const waitMs = untilMs - now;
  if ((waitMs > MAX_IN_PROCESS_WAIT_MS || f.draining) && f.canDefer) return { action: 'defer', reason: 'early', delayMs: waitMs };
  return { action: 'sleep', ms: Math.min(waitMs, MAX_IN_PROCESS_WAIT_MS) };
}

/**
 * Overlap (docs/CRON.md, `--overlap`): one run per job across the fleet, through the turn lock of
 * the job's session `cron:<id>`. `allow` runs without the lock; with the lock busy, `queue` waits
 * `deferMs` and asks again, and `skip` (or `queue` when the job cannot be moved) records a skipped run.
 * @param lockBusy - another run of the job holds the lock (ignored for `allow`)
 */
export function decideOverlap(
  overlap: OverlapPolicy,
  lockBusy: boolean,
  policy: { deferMs: number; canDefer: boolean },
): { action: 'run' } | { action: 'skip'; reason: 'overlap' } | CronDefer {
  if (overlap === 'allow' || !lockBusy) return { action: 'run' };
  if (overlap === 'queue' && policy.canDefer) return { action: 'defer', reason: 'overlap-queue', delayMs: policy.deferMs };
  return { action: 'skip', reason: 'overlap' };
}

/**
 * How a run whose turn threw ends, in this order:
 *  - drain hand-back ({@link CRON_DRAIN_HAND_BACK}): not recorded, runs once on another worker as its next attempt;
 *  - lock loss: another worker has the job now; nothing is recorded here;
 *  - a failure that never reached the model (`TurnError.retryable`, a network error) with BullMQ attempts
 *    left is retried with backoff;
 *  - anything else is recorded as an `error` run (the failure streak goes up; the next occurrence is the retry).
 * @param attempt - this attempt, 1-based; `attempts` - the job's BullMQ attempts
 */
export function decideRunEnding(
  turn: { abortedByDrain: boolean; lockLost: boolean },
  error: { retryable: boolean },
  attempt: number,
  attempts: number,
): 'hand-back' | 'abandon' | 'retry' | 'failed' {
  if (turn.abortedByDrain) return 'hand-back';
  if (turn.lockLost) return 'abandon';
  if (error.retryable && attempt < attempts) return 'retry';
  return 'failed';
}
