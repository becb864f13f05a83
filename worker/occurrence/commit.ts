/**
 * Steps 5 to 7 of an occurrence (`runOccurrence`, `pipeline.ts`): commit it, then deliver and apply
 * its outcome.
 *
 * Exactly once: each kind's commit is one atomic script keyed by the occurrence (a retried or
 * duplicated job finds it committed and ends in `done`, finishing only what the first one may have
 * left undone), written over the version of the record it was built on, so a pause or an edit that
 * arrived during the turn wins: on a write since, the attempt is made again over a fresh read
 * (`retryOnConflict`; a cron commit's first attempt is built on the record its claim was decided on).
 * Delivery after commit: nothing is sent or re-armed for an occurrence that is not committed, so a
 * hand-back, a lost lock or a crash never delivers twice.
 */
import { retryOnConflict } from '../../scheduler/store/optimistic-retry.ts';
import type { HeldLock } from '../runtime/session-lock.ts';
import { SPAN, tracing } from '../../scheduler/telemetry/tracing.ts';
import type { OccurrencePlan, RanTurn } from './plan.ts';

/**
 * Commit the occurrence's turn (or its record without a turn), then deliver and apply the outcome
 * together (one round trip).
 * @param lock - the session lock held for the occurrence; a commit that released it in the same step says so
 * @returns the job's result
 */
export async function commitAndDeliver<Gated, Claimed, Ran extends RanTurn, Committed, Result>(
  plan: OccurrencePlan<Gated, Claimed, Ran, Committed, Result>,
  claimed: Claimed,
  ran: Ran,
  lock: HeldLock | null,
): Promise<Result> {
  let attempt = 0;
  const answer = await tracing().span(SPAN.commit, {}, () =>
    retryOnConflict(
      () => plan.commit(claimed, ran, attempt++),
      () => plan.commitExhausted(),
    ),
  );
  if (answer.action === 'done') return answer.result;
  // The commit freed the session lock (the caller's release is then a no-op).
  if (answer.lockReleased) lock?.releasedElsewhere();
  await Promise.all([
    tracing().span(SPAN.deliver, {}, () => plan.deliver(claimed, ran, answer.committed)),
    plan.applyOutcome(claimed, answer.committed),
  ]);
  return plan.result(claimed, ran, answer.committed);
}
