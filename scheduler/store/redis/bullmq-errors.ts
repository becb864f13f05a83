/**
 * Error listeners for the BullMQ objects the product creates (Queue, Worker).
 *
 * Policy: a BullMQ object without an `error` listener prints every connection
 * error with its stack on stderr (BullMQ falls back to `console.error`), so an
 * outage of Redis floods the terminal. Every Queue and Worker therefore gets
 * this listener: it writes one structured warn line (the queue's name and the
 * error message, never a stack) for the first error and then at most one line
 * per `BULLMQ_ERROR_LOG_INTERVAL_MS` per object, counting the errors left out
 * (`suppressed`). Nothing else is done with the error: the calls that fail
 * report their own failure, and ioredis reconnects by itself.
 */
import type { Logger } from '../../logger.ts';

/** At most one logged BullMQ error per object in this window, ms. */
export const BULLMQ_ERROR_LOG_INTERVAL_MS = 10_000;

/** What can report errors: a BullMQ Queue, Worker or QueueEvents. */
export interface ErrorEmitter {
  on(event: 'error', listener: (err: Error) => void): unknown;
}

/**
 * Attach the rate-limited error listener to `emitter`.
 * @param emitter - a BullMQ Queue, Worker or QueueEvents
 * @param queue - the queue's name, for the log line
 * @param log - where the line goes; without a logger the errors are dropped (still no stack dump)
 * @param intervalMs - the rate limit window (tests)
 * @returns the emitter, for chaining at creation
 */
export function logBullmqErrors<T extends ErrorEmitter>(
  emitter: T,
  queue: string,
  log?: Logger,
  intervalMs = BULLMQ_ERROR_LOG_INTERVAL_MS,
): T {
  let lastLoggedAt = -Infinity;
  let suppressed = 0;
  emitter.on('error', (err: Error) => {
    if (!log) return;
    const now = Date.now();
    if (now - lastLoggedAt < intervalMs) {
      suppressed++;
      return;
    }
    lastLoggedAt = now;
    log.warn({ queue, err: err?.message ?? String(err), ...(suppressed > 0 ? { suppressed } : {}) }, 'BullMQ error (Redis connection)');
    suppressed = 0;
  });
  return emitter;
}
