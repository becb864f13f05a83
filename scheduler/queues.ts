/**
 * BullMQ queues of the product, created in one place so every producer and
 * worker uses the same prefix, connection options and defaults.
 */
import { Queue, type ConnectionOptions, type JobsOptions } from 'bullmq';
import type { RedisClient } from './redis/connection-factory.ts';
import { QUEUES, type Keys } from './keys.ts';
import { cronRepeatStrategy } from './cron/repeat-strategy.ts';

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
    connection: RedisClient | ConnectionOptions,
  ) {
    const opts = { connection: connection as ConnectionOptions, prefix: keys.bullPrefix };
    // croner decides the fire times of cron job schedulers (scheduler/cron/repeat-strategy.ts);
    // every Worker of this queue needs the same setting.
    this.ticks = new Queue(QUEUES.ticks, { ...opts, defaultJobOptions: JOB_RETENTION, settings: { repeatStrategy: cronRepeatStrategy } });
    this.inbox = new Queue(QUEUES.inbox, { ...opts, defaultJobOptions: JOB_RETENTION });
    // A lost connection is reported by the calls that fail (and ioredis reconnects); without a
    // listener BullMQ would print each connection error with its stack on the terminal.
    for (const q of [this.ticks, this.inbox]) q.on('error', () => undefined);
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
