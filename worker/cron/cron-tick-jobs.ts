/** Cron runs as a kind of job of the `ticks` queue (`runtime/job-processor.ts`). */
import { QUEUES } from '../../scheduler/store/keys.ts';
import { isCronTick, type CronTickData } from '../../scheduler/cron/cron-store.ts';
import { cronRepeatStrategy } from '../../scheduler/cron/repeat-strategy.ts';
import type { JobProcessor } from '../runtime/job-processor.ts';
import { claimCronAhead, dropCronAhead } from './cron-claim-ahead.ts';
import {
  cancelReplacedRun,
  cronTickDueAt,
  heldUntilDue,
  processCronTick,
  withCronTickData,
  type CronTickResult,
} from './cron-processor.ts';

/**
 * Run in the `agent` pool (a `--script` also takes a `command` slot while it runs: `cron-processor.ts`),
 * held until due: a scheduled occurrence comes `cron.prefetch_lead_ms` early (`repeat-strategy.ts`);
 * croner's `repeatStrategy` computes the next run of their job schedulers.
 */
export const cronTickJobs: JobProcessor<CronTickData, CronTickResult> = {
  queue: QUEUES.ticks,
  accepts: isCronTick,
  holdable: true,
  // Held for `cron.prefetch_lead_ms` (10 s): its lock is set to last past its due time instead of renewed every
  // `worker.lock_renew_ms` meanwhile; a worker lost during the lead has its held occurrences taken over after
  // their due time, inside the misfire grace (`WorkerProcess.holdLock`).
  lockedUntilDue: true,
  admit(job, deps, lockHeld) {
    // A job scheduler's jobs store the generation alone: the rest of their data is read here, once (`cronTickData`).
    const dueAt = cronTickDueAt(withCronTickData(job));
    if (!heldUntilDue(dueAt)) return { pool: 'agent', dueAt: undefined };
    // Held until due: its record read and its claim made meanwhile, off the burst's critical path (`cron-claim-ahead.ts`).
    if (dueAt > Date.now()) claimCronAhead(deps, job, dueAt, lockHeld);
    return { pool: 'agent', dueAt };
  },
  async release(job, _deps, handedBack) {
    await dropCronAhead(job, handedBack);
  },
  settings: { repeatStrategy: cronRepeatStrategy },
  process: processCronTick,
  waitingForSlot: cancelReplacedRun,
};
