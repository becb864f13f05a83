/**
 * BullMQ queues of the product, created in one place so every producer and
 * worker uses the same prefix, connection options and defaults.
 */
import { Queue, type ConnectionOptions, type JobType, type KeepJobs, type QueueOptions, type RepeatStrategy } from 'bullmq';
import type { Logger } from '../logger.ts';
import { logBullmqErrors } from './redis/bullmq-errors.ts';
import type { RedisClient } from './redis/connection-factory.ts';
import { QUEUES, type Keys } from './keys.ts';

/**
 * Completed/failed job retention: enough for inspection, bounded memory. The one
 * definition: the workers' options use it (BullMQ applies a worker's retention
 * to a job that names none), and so do the defaults of the queues whose jobs are
 * few. The `ticks` queue's jobs name none: options a job carries are stored in
 * its hash and in each job scheduler's template, bytes per stored schedule.
 */
export const JOB_RETENTION: { removeOnComplete: KeepJobs; removeOnFail: KeepJobs } = {
  removeOnComplete: { count: 1000 },
  removeOnFail: { count: 5000 },
};

/**
 * Entries kept in the `ticks` queue's BullMQ event stream (`<queue>:events`; BullMQ's default is
 * 10,000). Nothing in the product reads it (no `QueueEvents`); every job a schedule arms adds two
 * entries, and 10,000 entries are ~0.9 MB per shard of Redis memory (docs/BENCHMARKS.md, scale).
 * A `QueueEvents` an operator attaches still sees every event as it happens.
 */
export const TICKS_EVENTS_MAX_LEN = 1000;

/** What a process opens its queues with (`openQueues` in scheduler/services.ts gives the product's). */
export interface QueueSettings {
  /**
   * BullMQ's `repeatStrategy` of the `ticks` queue: croner decides the fire times of cron job
   * schedulers (`cronRepeatStrategy`, scheduler/cron/repeat-strategy.ts, which every Worker of the
   * queue takes too). Given by the caller: the cron package stores through this one.
   */
  ticksRepeatStrategy: RepeatStrategy;
  /**
   * Where the queues' connection errors are logged (rate-limited, see `logBullmqErrors`); without
   * it they are dropped, never printed with a stack.
   */
  log?: Logger;
}

/**
 * The product's queues of one shard over one connection (`ticks`, `inbox`),
 * and, through `forShard`/`forSession`/`forCronJob`, those of every other
 * shard of the key space over the same connection. `close()` closes the
 * queues of every shard opened so far, not the connection.
 */
export class HermesQueues {
  private ticksQueue: Queue | undefined;
  private inboxQueue: Queue | undefined;
  private readonly family: Map<number, HermesQueues>;

  /**
   * @param keys - the builder of the shard these queues belong to (its `bullPrefix`)
   * @param connection - BullMQ connection (`maxRetriesPerRequest: null`), shared by every shard's queues
   */
  constructor(
    readonly keys: Keys,
    private readonly connection: RedisClient | ConnectionOptions,
    private readonly settings: QueueSettings,
    family?: Map<number, HermesQueues>,
  ) {
    this.family = family ?? new Map<number, HermesQueues>();
    this.family.set(keys.shardIndex, this);
  }

  /**
   * The `ticks` queue (loop, heartbeat and cron ticks), opened on first use: a command that only
   * reads records (`hermes cron list`) never opens a queue, so it never loads BullMQ
   * (docs/BENCHMARKS.md, "CLI start-up").
   */
  get ticks(): Queue {
    return (this.ticksQueue ??= this.open(QUEUES.ticks, {
      settings: { repeatStrategy: this.settings.ticksRepeatStrategy },
      streams: { events: { maxLen: TICKS_EVENTS_MAX_LEN } },
    }));
  }

  /** The `inbox` queue (user input, goal continuations), opened on first use. */
  get inbox(): Queue {
    return (this.inboxQueue ??= this.open(QUEUES.inbox, { defaultJobOptions: JOB_RETENTION }));
  }

  private open(name: string, options: Omit<QueueOptions, 'connection' | 'prefix'>): Queue {
    const queue = new Queue(name, { ...options, connection: this.connection, prefix: this.keys.bullPrefix });
    // A lost connection is reported by the calls that fail (and ioredis reconnects); without a
    // listener BullMQ would print each connection error with its stack on the terminal.
    logBullmqErrors(queue, name, this.settings.log);
    return queue;
  }

  /** The queues of shard `index` (opened on first use). */
  forShard(index: number): HermesQueues {
    return this.family.get(index) ?? new HermesQueues(this.keys.shard(index), this.connection, this.settings, this.family);
  }

  /** The queues of a session's shard. */
  forSession(sessionId: string): HermesQueues {
    return this.forShard(this.keys.shardOfSession(sessionId));
  }

  /** The queues of a cron job's shard. */
  forCronJob(jobId: string): HermesQueues {
    return this.forShard(this.keys.shardOfCronJob(jobId));
  }

  /** The queues of every shard, in shard order. */
  shards(): HermesQueues[] {
    return this.keys.shards().map((k) => this.forShard(k.shardIndex));
  }

  /**
   * One queue name over every shard: its name and its job counts summed over
   * the shards' queues of that name (for metrics and status).
   */
  acrossShards(queue: 'ticks' | 'inbox'): { name: string; getJobCounts(...types: string[]): Promise<Record<string, number>> } {
    const all = this.shards().map((q) => q[queue]);
    return {
      name: all[0]!.name,
      async getJobCounts(...types: string[]) {
        const sum: Record<string, number> = {};
        for (const counts of await Promise.all(all.map((q) => q.getJobCounts(...(types as JobType[]))))) {
          for (const [state, n] of Object.entries(counts)) sum[state] = (sum[state] ?? 0) + n;
        }
        return sum;
      },
    };
  }

  /** Close the queues opened so far (of every shard); the connection stays open. */
  async close(): Promise<void> {
    const all = [...this.family.values()];
    await Promise.allSettled(all.flatMap((q) => [q.ticksQueue, q.inboxQueue]).flatMap((q) => (q ? [q.close()] : [])));
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
