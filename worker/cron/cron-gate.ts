/**
 * The gate of a cron occurrence as pure decisions, beside the misfire decision
 * (`decideOccurrence`, `scheduler/cron/misfire.ts`): what `--overlap` does when
 * the job's previous run is still going (`decideOverlap`). The cron plan
 * (`cron-processor.ts`) gathers the facts; the occurrence pipeline
 * (`occurrence/pipeline.ts`) carries the decisions out, with the ones cron runs
 * share with loop ticks: nothing early (`occurrence/due-time.ts`), the drain
 * hand-back (`occurrence/defer-decision.ts`) and how a turn that threw ends
 * (`occurrence/turn-ending.ts`). Policies: docs/CRON.md, "What happens at run
 * time"; docs/RELIABILITY.md, "A cron run cut by a drain is handed back".
 */
import type { OverlapPolicy } from '../../scheduler/cron/cron-job.ts';
import type { OccurrenceDefer } from '../occurrence/defer-decision.ts';
import { decideTurnEnding, type TurnEnding } from '../occurrence/turn-ending.ts';

export { decideEarly, MAX_IN_PROCESS_WAIT_MS } from '../occurrence/due-time.ts';
export { DRAIN_HAND_BACK as CRON_DRAIN_HAND_BACK } from '../occurrence/defer-decision.ts';

/** Why a cron tick was put back to run later. */
export type CronDeferReason = 'drain' | 'early' | 'overlap-queue' | 'backfill-order';

/** A cron tick put back to run again after `delayMs`. */
export type CronDefer = OccurrenceDefer<CronDeferReason>;

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
 * How a cron run whose turn threw ends: `decideTurnEnding` (`occurrence/turn-ending.ts`) with the
 * job's BullMQ attempts.
 * @param attempt - this attempt, 1-based; `attempts` - the job's BullMQ attempts
 */
export function decideRunEnding(
  turn: { abortedByDrain: boolean; lockLost: boolean },
  error: { retryable: boolean },
  attempt: number,
  attempts: number,
): TurnEnding {
  return decideTurnEnding(turn, { retryable: error.retryable, attempt, attempts });
}
