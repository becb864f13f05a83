import { DelayedError, type Job } from 'bullmq';

/**
 * Put a job that is being processed back in its queue, to run again after `delayMs`: deferred, not
 * dropped and not run in parallel. The one place a processor (worker or gateway) moves its own job
 * back to delayed; a layout test keeps `moveToDelayed` out of every other file.
 *
 * Throws BullMQ's `DelayedError`, which tells the worker the job was moved and must be neither
 * completed nor failed; its attempt count is untouched. Used for: a busy session, earlier input or
 * an earlier tick first, a job picked up before it is due, a drain hand-back (delay 0; the paused
 * worker does not take it again, another worker does), a Telegram reply behind an earlier one or a
 * long `retry_after`. The policies are in `docs/RELIABILITY.md` and `docs/CRON.md`.
 *
 * @param job - the job being processed
 * @param token - the worker's lock token of `job` (BullMQ checks it holds the job)
 * @param delayMs - ms from now until the job is due again (0: due at once; a negative delay counts as 0)
 * @throws DelayedError always, after the job was moved; whatever Redis or BullMQ throws when it could not be moved
 */
export async function deferJob(job: Job, token: string | undefined, delayMs: number): Promise<never> {
  await job.moveToDelayed(Date.now() + Math.max(0, delayMs), token);
  throw new DelayedError();
}
