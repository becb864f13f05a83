/**
 * Deferring an occurrence: its job goes back to the queue, to run again after a delay (deferred,
 * never dropped, never run in parallel). Which occurrence defers and why is each kind's gate
 * (`worker/loop/tick-gate.ts`, `worker/cron/cron-gate.ts`), the wait for the due time (`due-time.ts`) and the drain
 * hand-back (`defer-decision.ts`), which the pipeline applies before the claim and after a cut turn.
 */
import type { Job } from 'bullmq';
import { deferJob } from '../../scheduler/store/defer-job.ts';
import type { WorkerDeps } from '../worker-deps.ts';
import type { OccurrenceDefer } from './defer-decision.ts';
import type { Occurrence } from './plan.ts';

/**
 * Put the occurrence's job back for later: logged, counted by reason in
 * `hermes_ticks_deferred_total` for loop and heartbeat ticks, moved by `deferJob`.
 * @throws DelayedError always
 */
export async function deferOccurrence(
  deps: WorkerDeps,
  job: Job,
  token: string | undefined,
  o: Occurrence,
  d: OccurrenceDefer,
): Promise<never> {
  if (d.reason === 'drain') o.log.info(`${o.label} handed back: this worker is draining`);
  else o.log.debug({ reason: d.reason, dueAt: o.dueAt, delayMs: d.delayMs }, `${o.label} deferred`);
  if (o.countsDeferrals) deps.metrics?.ticksDeferred.inc({ reason: d.reason });
  return await deferJob(job, token, d.delayMs);
}
