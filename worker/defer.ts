import { DelayedError, type Job } from 'bullmq';

/**
 * Put a job back to run again after `delayMs` (deferred, not dropped, not run
 * in parallel). Throws BullMQ's `DelayedError`, which tells the worker the job
 * was moved and must not be completed or failed.
 * @throws DelayedError always
 */
export async function deferJob(job: Job, token: string | undefined, delayMs: number): Promise<never> {
  await job.moveToDelayed(Date.now() + delayMs, token);
  throw new DelayedError();
}

/** Resolve at epoch ms `at` (at once when it has passed), or when `signal` aborts. */
export async function sleepUntil(at: number, signal?: AbortSignal): Promise<void> {
  const ms = at - Date.now();
  if (ms <= 0 || signal?.aborted) return;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
