/**
 * BullMQ queues of the product, created in one place so every producer and
 * worker uses the same prefix, connection options and defaults.
 */
import { Queue, type ConnectionOptions, type JobsOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import { QUEUES, type Keys } from './keys.ts';

/** Completed/failed job retention: enough for inspection, bounded memory. */
export const JOB_RETENTION: Pick<JobsOptions, 'removeOnComplete' | 'removeOnFail'> = {
  removeOnComplete: { count: 1000 },
  removeOnFail: { count: 5000 },
};

/** The product's queues over one connection. `close()` closes the queues, not the connection. */
export class HermesQueues {
  readonly ticks: Queue;
  readonly inbox: Queue;

  constructor(
    readonly keys: Keys,
    connection: Redis | ConnectionOptions,
  ) {
    const opts = { connection: connection as ConnectionOptions, prefix: keys.bullPrefix };
    this.ticks = new Queue(QUEUES.ticks, { ...opts, defaultJobOptions: JOB_RETENTION });
    this.inbox = new Queue(QUEUES.inbox, { ...opts, defaultJobOptions: JOB_RETENTION });
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.ticks.close(), this.inbox.close()]);
  }
}

/**
 * The scheduled time of a job made by a BullMQ job scheduler, read from its id
 * (`repeat:<schedulerId>:<millis>`), or `undefined` for other jobs.
 */
export function schedulerJobMillis(jobId: string | undefined): number | undefined {
  if (!jobId?.startsWith('repeat:')) return undefined;
  const n = Number(jobId.slice(jobId.lastIndexOf(':') + 1));
  return Number.isFinite(n) ? n : undefined;
}

/**
 * A custom BullMQ job id from an id that may contain `:`. BullMQ 6 refuses
 * custom ids with a `:` unless they have exactly three `:`-separated parts
 * (the legacy repeatable-job form), and session ids (`telegram:<chat>`) and
 * occurrence ids (`loop:<id>:<ms>`) contain colons. `!` is not allowed in
 * session ids, so the mapping does not merge two session ids.
 */
export function safeJobId(id: string): string {
  return id.replaceAll(':', '!');
}
