/** Cron runs as a kind of job of the `ticks` queue (`runtime/job-processor.ts`). */
import type { Job } from 'bullmq';
import { QUEUES } from '../../scheduler/store/keys.ts';
import type { CronTickData } from '../../scheduler/cron/cron-store.ts';
import { cronRepeatStrategy } from '../../scheduler/cron/repeat-strategy.ts';
import type { JobProcessor } from '../runtime/job-processor.ts';
import { cancelReplacedRun, processCronTick, type CronTickResult } from './cron-processor.ts';

/**
 * Run in the `agent` pool, due when fetched (a `--script` also takes a `command` slot while it runs:
 * `cron-processor.ts`); croner's `repeatStrategy` computes the next run of their job schedulers.
 */
export const cronTickJobs: JobProcessor<CronTickData, CronTickResult> = {
  queue: QUEUES.ticks,
  accepts: (job: Job) => (job.data as { type?: string }).type === 'cron-tick',
  settings: { repeatStrategy: cronRepeatStrategy },
  process: processCronTick,
  waitingForSlot: cancelReplacedRun,
};
