/**
 * Step 3 of an occurrence: gate and claim, in rounds (`runOccurrence`, `pipeline.ts`).
 * Each round reads and decides (`OccurrencePlan.gate`), then claims (`OccurrencePlan.claim`); a
 * claim that finds the state changed since the read answers `again`, and a new round decides over
 * a fresh read. A gate that reads "not yet" waits here (nothing early, `due-time.ts`).
 *
 * Session lock (one turn per session across the fleet): a gate or a claim that takes the session's
 * turn lock hands it over in its answer; the lock goes with a `fire` or `record` answer to the
 * caller, and is released here on any other (a defer, a skip, a drop), before the job is moved.
 */
import type { Job } from 'bullmq';
import { sleepUntil } from '../runtime/sleep-until.ts';
import type { HeldLock } from '../runtime/session-lock.ts';
import type { WorkerDeps } from '../worker-deps.ts';
import { deferOccurrence } from './defer.ts';
import { decideEarly } from './due-time.ts';
import type { OccurrenceDefer } from './defer-decision.ts';
import type { OccurrencePlan, RanTurn } from './plan.ts';

/** A claimed occurrence with the lock that goes with it: to run (`fire`) or to record without a turn (`record`). */
export type ClaimOutcome<Claimed, Ran> =
  | { action: 'fire'; claimed: Claimed; startedAt: number; lock: HeldLock | null }
  | { action: 'record'; claimed: Claimed; ran: Ran; lock: HeldLock | null };

/**
 * Gate and claim the occurrence.
 * @returns the claimed occurrence, or `{ done }` with the job's result when it ends here
 * @throws DelayedError when the occurrence was deferred
 */
export async function gateAndClaim<Gated, Claimed, Ran extends RanTurn, Committed, Result>(
  plan: OccurrencePlan<Gated, Claimed, Ran, Committed, Result>,
  deps: WorkerDeps,
  job: Job,
  token: string | undefined,
  signal: AbortSignal | undefined,
): Promise<ClaimOutcome<Claimed, Ran> | { done: Result }> {
  const answer = await rounds(plan, deps, signal);
  if ('defer' in answer) return await deferOccurrence(deps, job, token, plan.occurrence, answer.defer);
  return answer;
}

/** The rounds; a lock not handed over is released before the answer is returned. */
async function rounds<Gated, Claimed, Ran extends RanTurn, Committed, Result>(
  plan: OccurrencePlan<Gated, Claimed, Ran, Committed, Result>,
  deps: WorkerDeps,
  signal: AbortSignal | undefined,
): Promise<ClaimOutcome<Claimed, Ran> | { done: Result } | { defer: OccurrenceDefer }> {
  const o = plan.occurrence;
  let held: HeldLock | null = null;
  try {
    let waited = false;
    for (let round = 0; ;) {
      const gated = await plan.gate(waited);
      if (gated.action === 'wait') {
        const early = decideEarly(gated.untilMs, Date.now(), { draining: deps.turns.draining, canDefer: o.canDefer });
        if (early.action === 'defer') return { defer: early };
        await sleepUntil(Date.now() + early.ms, signal);
        waited = true;
        continue;
      }
      if (gated.action === 'done') return { done: gated.result };
      if (gated.action === 'defer') return { defer: gated };
      if (gated.lock) held ??= gated.lock;
      const claim = await plan.claim(gated.gated, round);
      if (claim.lock) held ??= claim.lock;
      if (claim.action === 'again') {
        round++;
        continue;
      }
      if (claim.action === 'done') return { done: claim.result };
      if (claim.action === 'defer') return { defer: claim };
      const lock = held;
      held = null; // the caller releases it now
      return { ...claim, lock };
    }
  } finally {
    await held?.release();
  }
}
