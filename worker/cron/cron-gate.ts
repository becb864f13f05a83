/**
 * The gate of a cron occurrence as pure decisions, beside the misfire decision
 * (`decideOccurrence`, `scheduler/cron/misfire.ts`): what `--overlap` does when
 * the job's previous run is still going (`decideOverlap`; the buffer of `buffer_all`:
 * `scheduler/cron/overlap-buffer.ts`). The cron plan
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

/**
 * Why a cron tick was put back to run later: the drain, too early, its job busy (`--overlap queue`,
 * `buffer_all` waiting its turn in the buffer, `cancel_other` waiting for the cancelled run to stop), or a
 * backfill's earlier occurrence still to run.
 */
export type CronDeferReason = 'drain' | 'early' | 'overlap-queue' | 'overlap-buffer' | 'overlap-cancel' | 'backfill-order';

/** A cron tick put back to run again after `delayMs`. */
export type CronDefer = OccurrenceDefer<CronDeferReason>;

/** What `--overlap` makes of an occurrence: run it, record it as skipped, or put it back (`overlap-cancel`: after cancelling the running one). */
export type OverlapDecision = { action: 'run' } | { action: 'skip'; reason: 'overlap' | 'buffer-full' } | CronDefer;

/**
 * Overlap (docs/CRON.md, "Overlap", with Temporal's names): one run per job across the fleet, through
 * the turn lock of the job's session `cron:<id>`. `allow` (ALLOW_ALL) runs without the lock. With the
 * job busy:
 *  - `skip` (SKIP) records a skipped run;
 *  - `queue` waits `deferMs` and asks again (the first waiting occurrence to find the lock free runs,
 *    older ones coalesce into it);
 *  - `buffer_all` (BUFFER_ALL, bounded) waits its place in the job's buffer (`overlap-buffer.ts`): a
 *    place at or beyond `maxBuffered` is recorded as skipped (`buffer-full`);
 *  - `cancel_other` (CANCEL_OTHER) cancels the running run, then waits for it to stop.
 * An occurrence that cannot be moved back (`canDefer` false) is recorded as skipped instead of waiting.
 * @param busy - another run of the job holds the lock, or (`buffer_all`) an earlier occurrence waits
 *   before this one (ignored for `allow`)
 * @param bufferPlace - `buffer_all`: how many live occurrences wait before this one
 */
export function decideOverlap(
  overlap: OverlapPolicy,
  busy: boolean,
  policy: { deferMs: number; canDefer: boolean; maxBuffered: number },
  bufferPlace = 0,
): OverlapDecision {
  if (overlap === 'allow' || !busy) return { action: 'run' };
  if (overlap === 'buffer_all' && bufferPlace >= policy.maxBuffered) return { action: 'skip', reason: 'buffer-full' };
  if (!policy.canDefer || overlap === 'skip') return { action: 'skip', reason: 'overlap' };
  const reason = ({ queue: 'overlap-queue', buffer_all: 'overlap-buffer', cancel_other: 'overlap-cancel' } as const)[overlap];
  return { action: 'defer', reason, delayMs: policy.deferMs };
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
