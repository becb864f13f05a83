/**
 * One occurrence of a schedule, end to end — a loop or heartbeat tick (`worker/loop/tick-processor.ts`) or a
 * cron run (`worker/cron/cron-processor.ts`). Each kind is an `OccurrencePlan` (`plan.ts`): its own gate,
 * claim, turn, commit, delivery and outcome; the policies they share are carried out here, once,
 * in this order (`runOccurrence` reads as this list):
 *
 *   1. wait for the due time: hold a job that came by the prefetch lead (`Occurrence.holdUntil`;
 *      `scheduler/loop/prefetch-lead.ts`, docs/BENCHMARKS.md); nothing early (`due-time.ts`);
 *   2. drain hand-back before anything is claimed (`DRAIN_HAND_BACK`, `defer-decision.ts`);
 *   3. gate and claim, in rounds (`gate-and-claim.ts`): the plan decides (pure deciders in
 *      `worker/loop/tick-gate.ts`, `worker/cron/cron-gate.ts`, `scheduler/cron/misfire.ts`) and claims (one Lua script);
 *      deferrals (`defer.ts`) and the session lock are handled there; a held tick may come with its
 *      claim made ahead of the due time (`../claim-ahead.ts`), which its plan then takes;
 *   4. run the turn as a tracked turn (`run-turn.ts`): lateness, `/stop`, the turn metrics, and how a
 *      turn that threw ends (`turn-ending.ts`: drain hand-back, lock loss, retry, failed); its turn slot
 *      goes to the next job waiting once the turn ended, before the commit (`JobTicket.turnEnded`);
 *   5. commit exactly once (`commit.ts`), then
 *   6. deliver and 7. apply the outcome, after the commit only.
 * The tracked turn spans steps 4 to 7: the drain waits for a committing occurrence as for a turn.
 * The session lock the gate or the claim took is released at the end, whatever happened.
 */
import type { Job } from 'bullmq';
import { sleepUntil } from '../runtime/sleep-until.ts';
import type { WorkerDeps } from '../worker-deps.ts';
import { commitAndDeliver } from './commit.ts';
import { deferOccurrence } from './defer.ts';
import { DRAIN_HAND_BACK } from './defer-decision.ts';
import { gateAndClaim } from './gate-and-claim.ts';
import type { OccurrencePlan, RanTurn } from './plan.ts';
import { runTurn } from './run-turn.ts';
import { ATTR, SPAN, tracing } from '../../scheduler/telemetry/tracing.ts';

/**
 * Process the job of one occurrence with its kind's plan.
 * @param token - the worker's lock token of `job` (needed to move it back to delayed)
 * @param signal - the job's abort signal, if any; aborts the wait and the turn
 * @returns the plan's result once committed and delivered, or the result of an occurrence that ends early
 * @throws DelayedError when the occurrence was deferred or handed back; the turn's error when the
 *   job's lock was lost or a retryable failure is left to BullMQ
 */
export async function runOccurrence<Gated, Claimed, Ran extends RanTurn, Committed, Result>(
  plan: OccurrencePlan<Gated, Claimed, Ran, Committed, Result>,
  deps: WorkerDeps,
  job: Job,
  token: string | undefined,
  signal: AbortSignal | undefined,
): Promise<Result> {
  const o = plan.occurrence;
  const attributes = {
    [ATTR.kind]: o.kind,
    [ATTR.occurrenceId]: o.occurrenceId,
    [ATTR.scheduleId]: o.ids.scheduleId,
    [ATTR.sessionId]: o.ids.sessionId,
  };
  return await tracing().span(SPAN.occurrence, attributes, () => steps(plan, deps, job, token, signal));
}

/** The steps, in the occurrence's span (docs/OPERATIONS.md, "Traces"): the claim's, the turn's, the commit's and the delivery's spans inside it. */
async function steps<Gated, Claimed, Ran extends RanTurn, Committed, Result>(
  plan: OccurrencePlan<Gated, Claimed, Ran, Committed, Result>,
  deps: WorkerDeps,
  job: Job,
  token: string | undefined,
  signal: AbortSignal | undefined,
): Promise<Result> {
  const o = plan.occurrence;
  // This job's ticket, taken before anything is awaited: a later copy of the job (fetched again here after its
  // lock was lost meanwhile) has its own.
  const ticket = deps.turns.admission.ticket(job.id!);
  if (o.holdUntil !== undefined) await sleepUntil(o.holdUntil, signal);
  if (deps.turns.draining && o.canDefer) return await deferOccurrence(deps, job, token, o, DRAIN_HAND_BACK);
  const c = await tracing().span(SPAN.claim, {}, () => gateAndClaim(plan, deps, job, token, signal));
  if ('done' in c) return c.done;
  const { lock } = c;
  try {
    if (c.action === 'record') return await commitAndDeliver(plan, c.claimed, c.ran, lock);
    return await deps.turns.run(
      o.holder,
      'deadline',
      async (turnSignal, turn) => {
        const ran = await tracing()
          .span(SPAN.turn, {}, () => runTurn(plan, deps, c.claimed, c.startedAt, turnSignal, turn))
          .finally(() => ticket?.turnEnded());
        if (ran === 'hand-back') return await deferOccurrence(deps, job, token, o, DRAIN_HAND_BACK);
        return await commitAndDeliver(plan, c.claimed, ran, lock);
      },
      signal,
    );
  } finally {
    await lock?.release();
  }
}
