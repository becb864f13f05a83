/**
 * Loop and heartbeat ticks as a kind of job of the `ticks` queue (`runtime/job-processor.ts`): which
 * of the queue's jobs they are, how a fetched tick is admitted, and what a tick that ends without its
 * turn leaves behind.
 */
import type { Job } from 'bullmq';
import { QUEUES } from '../../scheduler/store/keys.ts';
import { COMMAND_TICK_JOB_NAME, tickJobData, type TickJobData } from '../../scheduler/loop/tick-job.ts';
import { isCronTick } from '../../scheduler/cron/cron-store.ts';
import type { JobProcessor } from '../runtime/job-processor.ts';
import { TURN_POOLS } from '../runtime/turn-tracker.ts';
import { dropAhead, readAhead } from './claim-ahead.ts';
import { cancelOverlappedTick, processScheduleTick, type TickResult } from './tick-processor.ts';

export const scheduleTickJobs: JobProcessor<TickJobData, TickResult> = {
  queue: QUEUES.ticks,
  accepts: isScheduleTick,
  pools: TURN_POOLS,
  holdable: true,
  // A loop or heartbeat tick is due at its occurrence's due time (it comes `worker.prefetch_lead_ms` early and is
  // held until then); a command loop's jobs are named for the `command` pool (`tickJobName`).
  admit(job, deps, lockHeld) {
    // A job scheduler's jobs carry no session id (its scheduler id names it): complete the data once, here.
    job.data = tickJobData(job);
    const { dueAt } = deps.loops.occurrenceOf(job);
    // Held until due: its gate is read meanwhile, off the burst's critical path (`readAhead`).
    if (dueAt > Date.now()) readAhead(deps, job, lockHeld);
    return { pool: job.name === COMMAND_TICK_JOB_NAME ? 'command' : 'agent', dueAt };
  },
  async release(job, deps, handedBack) {
    if (handedBack) deps.metrics?.ticksDeferred.inc({ reason: 'drain' });
    // A claim made ahead releases its turn lock when the tick is handed back (`claim-ahead.ts`).
    await dropAhead(job, handedBack);
  },
  process: processScheduleTick,
  waitingForSlot: cancelOverlappedTick,
};

/** Whether a `ticks` job is a loop or heartbeat tick (those of earlier versions name no type; a cron job scheduler's jobs neither). */
function isScheduleTick(job: Job): boolean {
  const { type } = job.data as { type?: string };
  return (type === undefined || type === 'schedule-tick') && !isCronTick(job);
}
