/**
 * Deferring an occurrence: its job goes back to the queue, to run again after a delay (deferred,
 * never dropped, never run in parallel). Which occurrence defers and why is each kind's gate
 * (`tick-gate.ts`, `cron-gate.ts`); the drain hand-back is decided here, once for both.
 */
import type { Job } from 'bullmq';
import { deferJob } from '../../scheduler/store/defer-job.ts';
import type { WorkerDeps } from '../worker-deps.ts';
import type { Occurrence, OccurrenceDefer } from './plan.ts';

/**
 * Drain hand-back (docs/RELIABILITY.md, "A cron run cut by a drain is handed back"; as for `/v1`
 * runs): an occurrence a draining worker received before it was claimed, or whose turn the drain
 * deadline cut, goes back to the queue due at once, its attempt count untouched; the paused worker
 * does not take it again, another worker does. A paused worker still gets the job of a fetch in
 * flight when it paused: an occurrence not claimed yet is handed back instead of starting a turn the
 * drain deadline would cut; a cut turn is not committed, so it runs once, on the other worker.
 */
export const DRAIN_HAND_BACK = { action: 'defer', reason: 'drain', delayMs: 0 } as const satisfies OccurrenceDefer<'drain'>;

/**
 * Put the occurrence's job back for later: logged, counted by reason in
 * `hermes_ticks_deferred_total` for loop and heartbeat ticks, moved by `deferJob`.
 * @throws DelayedError always
 */
export async function deferOccurrence(deps: WorkerDeps, job: Job, token: string | undefined, o: Occurrence, d: OccurrenceDefer): Promise<never> {
  if (d.reason === 'drain') o.log.info(`${o.label} handed back: this worker is draining`);
  else o.log.debug({ reason: d.reason, dueAt: o.dueAt, delayMs: d.delayMs }, `${o.label} deferred`);
  if (o.countsDeferrals) deps.metrics?.ticksDeferred.inc({ reason: d.reason });
  return await deferJob(job, token, d.delayMs);
}
