/** Cron runs as a kind of job of the `ticks` queue (`runtime/job-processor.ts`). */
import type { Job } from 'bullmq';
import { QUEUES } from '../../scheduler/store/keys.ts';
import type { CronTickData } from '../../scheduler/cron/cron-store.ts';
import { cronRepeatStrategy } from '../../scheduler/cron/repeat-strategy.ts';
import type { JobProcessor } from '../runtime/job-processor.ts';
import { cancelReplacedRun, cronTickDueAt, heldUntilDue, processCronTick, type CronTickResult } from './cron-processor.ts';

/**
 * Run in the `agent` pool (a `--script` also takes a `command` slot while it runs: `cron-processor.ts`),
 * held until due: a scheduled occurrence comes `cron.prefetch_lead_ms` early (`repeat-strategy.ts`);
 * croner's `repeatStrategy` computes the next run of their job schedulers.
 */
export const cronTickJobs: JobProcessor<CronTickData, CronTickResult> = {
  queue: QUEUES.ticks,
  accepts: (job: Job) => (job.data as { type?: string }).type === 'cron-tick',
  holdable: true,
  admit(job) {
    const dueAt = cronTickDueAt(job);
    return { pool: 'agent', dueAt: heldUntilDue(dueAt) ? dueAt : undefined };
  },
  settings: { repeatStrategy: cronRepeatStrategy },
  process: processCronTick,
  waitingForSlot: cancelReplacedRun,
};
