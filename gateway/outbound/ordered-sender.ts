/**
 * A platform-neutral sender of an `outbound-<platform>` queue: the order and
 * at-least-once rules of the Telegram sender (gateway/telegram/outbound-sender.ts,
 * where they are explained), with the platform's send and error reading passed in.
 * Used by Slack; a later platform plugs in the same way.
 *
 * - Order per chat: a reply is sent only while it is the oldest unfinished one of
 *   its chat (`Keys.outboundOrder`); a later one moves back to delayed and is woken
 *   when the earlier one finishes (or after `orderRecheckMs`).
 * - At least once per part: each part is marked `sending`, then its message id,
 *   in `Keys.outboundSent`; a retried job sends only the parts without an id.
 * - Rate limits: a platform's "retry after N s" is waited out in place when
 *   N ≤ `maxRetryAfterSeconds` (the part is sent once, after the wait); a longer
 *   one moves the job back to delayed for exactly N s.
 * - Permanent refusals fail the job at once; anything else is retried by BullMQ.
 */
import { DelayedError, UnrecoverableError, Worker, type Job, type Queue } from 'bullmq';
import type { Logger } from 'pino';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import type { Keys } from '../../scheduler/store/keys.ts';
import { deferJob } from '../../scheduler/store/defer-job.ts';
import { logBullmqErrors } from '../../scheduler/store/redis/bullmq-errors.ts';
import { JOB_RETENTION } from '../../scheduler/store/queues.ts';
import { PlatformError } from '../../scheduler/errors/platform-error.ts';
import {
  OUTBOUND_ATTEMPTS,
  OUTBOUND_DONE_TTL_SECONDS,
  outboundJobId,
  registerOutbound,
  type OutboundData,
} from '../../scheduler/delivery/outbound.ts';
import { recordOutboundOutcome, type OutboundOutcome } from './outbound-outcome.ts';

/** What a platform says about a failed send. */
export type SendFailure =
  | { kind: 'rate_limited'; retryAfterSeconds: number }
  /** The platform refused for good (unknown channel, not in channel…): not retried. */
  | { kind: 'refused'; error: PlatformError }
  /** Network error, 5xx: retried by the queue (the part may have arrived: it stays `sending`). */
  | { kind: 'transient' };

/** The platform's side of a sender. */
export interface PlatformSend {
  /** Platform name, for logs (`slack`). */
  platform: string;
  /** The parts of a reply, in order (rendered and split for the platform). */
  parts(text: string): string[];
  /** Send one part; resolves with the platform's message id. */
  send(data: OutboundData, part: string, signal: AbortSignal | undefined): Promise<string>;
  /** Read a send's error. */
  classify(err: unknown): SendFailure;
}

/** Settings of an ordered sender. */
export interface OrderedSenderOptions {
  queueName: string;
  /** The platform's outbound queue (to look at a chat's earlier replies). */
  queue: Queue<OutboundData>;
  redis: RedisClient;
  /** BullMQ connection of the worker (blocking commands). */
  connection: RedisClient;
  keys: Keys;
  concurrency: number;
  lockDurationMs: number;
  lockRenewMs: number;
  stalledIntervalMs: number;
  maxStalledCount: number;
  /** `gateway.outbound_order_recheck_ms` */
  orderRecheckMs: number;
  /** `gateway.max_retry_after_seconds`: a longer wait moves the job back to delayed. */
  maxRetryAfterSeconds: number;
  eventsMaxLen?: number;
  log: Logger;
  /** Each send counted by outcome: sent, rate_limited, refused, failed. */
  countSend?: (outcome: 'sent' | 'rate_limited' | 'refused' | 'failed') => void;
}

/** Return value of an outbound job: the evidence of delivery. */
export interface OrderedSendResult {
  chatId: string;
  /** The platform's message ids, one per part, in order. */
  messageIds: string[];
}

const PENDING = 'sending';
const UNFINISHED = new Set(['waiting', 'delayed', 'active', 'prioritized', 'waiting-children']);

export class OrderedSender {
  private worker: Worker<OutboundData, OrderedSendResult> | undefined;
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly options: OrderedSenderOptions,
    private readonly platform: PlatformSend,
  ) {}

  /** Start consuming the queue. Resolves when the worker is connected. */
  async start(): Promise<void> {
    const o = this.options;
    this.worker = new Worker<OutboundData, OrderedSendResult>(o.queueName, (job, token, signal) => this.process(job, token, signal), {
      connection: o.connection,
      prefix: o.keys.bullPrefix,
      concurrency: o.concurrency,
      lockDuration: o.lockDurationMs,
      lockRenewTime: o.lockRenewMs,
      stalledInterval: o.stalledIntervalMs,
      maxStalledCount: o.maxStalledCount,
      ...JOB_RETENTION,
    });
    this.worker.on('failed', (job, err) =>
      o.log.warn({ jobId: job?.id, attempts: job?.attemptsMade, err: err.message }, `${this.platform.platform} reply not sent`),
    );
    logBullmqErrors(this.worker, o.queueName, o.log);
    this.worker.on('lockRenewalFailed', (jobIds) => {
      for (const id of jobIds)
        if (this.worker?.cancelJob(id, 'job lock lost')) o.log.warn({ jobId: id }, 'outbound job lock lost; its send is stopped here');
    });
    await this.worker.waitUntilReady();
  }

  /** Stop taking jobs; wait for active sends up to `deadlineMs`, then cancel them. Memoised. */
  stop(deadlineMs: number): Promise<void> {
    this.stopping ??= (async () => {
      const worker = this.worker;
      if (!worker) return;
      const closed = worker.close();
      let timer: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([
        closed.then(() => 'closed' as const),
        new Promise<'deadline'>((r) => (timer = setTimeout(() => r('deadline'), deadlineMs))),
      ]);
      clearTimeout(timer);
      if (outcome === 'deadline') {
        worker.cancelAllJobs('gateway shutdown');
        await closed;
      }
    })();
    return this.stopping;
  }

  private async process(job: Job<OutboundData>, token: string | undefined, signal: AbortSignal | undefined): Promise<OrderedSendResult> {
    const { redis, keys } = this.options;
    const data = job.data;
    const log = this.options.log.child({ jobId: job.id, occurrenceId: data.occurrenceId, chatId: data.chatId });
    await registerOutbound(redis, keys, data);
    const orderKey = keys.outboundOrder(data.platform, data.chatId);
    if ((await this.earlierUnfinished(orderKey, data.occurrenceId)) !== null && token) {
      return await deferJob(job, token, this.options.orderRecheckMs);
    }
    const attempt = job.attemptsMade + 1;
    const attempts = job.opts.attempts ?? OUTBOUND_ATTEMPTS;
    let messageIds: string[];
    try {
      messageIds = await this.sendParts(job, token, signal, log);
    } catch (err) {
      if (err instanceof DelayedError || signal?.aborted) throw err;
      const permanent = err instanceof UnrecoverableError;
      const willRetry = !permanent && attempt < attempts;
      if (!willRetry) await this.finish(orderKey, data.occurrenceId);
      const platformErr = permanent ? (err.cause as PlatformError | undefined) : err instanceof PlatformError ? err : undefined;
      await this.report(
        data,
        {
          status: 'failed',
          error: platformErr?.message ?? (err as Error).message,
          ...(platformErr?.errorCode !== undefined ? { errorCode: platformErr.errorCode } : {}),
          willRetry,
          attempts: attempt,
        },
        log,
      );
      throw err;
    }
    await this.finish(orderKey, data.occurrenceId);
    await this.report(data, { status: 'sent', messageIds, attempts: attempt }, log);
    log.info({ messageIds, sessionId: data.sessionId }, `${this.platform.platform} reply sent`);
    return { chatId: data.chatId, messageIds };
  }

  private async earlierUnfinished(orderKey: string, occurrenceId: string): Promise<string | null> {
    const { redis, queue } = this.options;
    for (;;) {
      const [head] = await redis.zrange(orderKey, 0, 0);
      if (head === undefined || head === occurrenceId) return null;
      if ((await redis.zscore(orderKey, occurrenceId)) === null) return null;
      const job = await queue.getJob(outboundJobId(head));
      const state = job ? await job.getState() : 'unknown';
      if (UNFINISHED.has(state)) return head;
      await redis.zrem(orderKey, head);
    }
  }

  private async finish(orderKey: string, occurrenceId: string): Promise<void> {
    const { redis, queue, keys } = this.options;
    await redis.multi().zrem(orderKey, occurrenceId).expire(keys.outboundSent(occurrenceId), OUTBOUND_DONE_TTL_SECONDS).exec();
    const [next] = await redis.zrange(orderKey, 0, 0);
    if (next === undefined) return;
    const job = await queue.getJob(outboundJobId(next));
    if (job && (await job.getState()) === 'delayed') await job.promote().catch(() => {});
  }

  private async report(data: OutboundData, outcome: OutboundOutcome, log: Logger): Promise<void> {
    try {
      await recordOutboundOutcome(this.options.redis, this.options.keys, data, outcome, this.options.eventsMaxLen);
    } catch (err) {
      log.warn({ err: (err as Error).message, status: outcome.status }, 'outbound outcome not recorded');
      if (outcome.status === 'sent') throw err;
    }
  }

  private async sendParts(
    job: Job<OutboundData>,
    token: string | undefined,
    signal: AbortSignal | undefined,
    log: Logger,
  ): Promise<string[]> {
    const { redis, keys } = this.options;
    const data = job.data;
    const parts = this.platform.parts(data.text);
    const key = keys.outboundSent(data.occurrenceId);
    const recorded = await redis.hgetall(key);
    const ids: string[] = [];
    for (let i = 0; i < parts.length; i++) {
      signal?.throwIfAborted();
      const prior = recorded[String(i)];
      if (prior && prior !== PENDING) {
        ids.push(prior);
        continue;
      }
      if (prior === PENDING)
        log.warn({ part: i + 1, parts: parts.length }, 'resending a part whose earlier send was not confirmed; it may arrive twice');
      await redis.hset(key, String(i), PENDING);
      let messageId: string;
      for (;;) {
        try {
          messageId = await this.platform.send(data, parts[i]!, signal);
          break;
        } catch (err) {
          const failure = this.platform.classify(err);
          if (failure.kind === 'transient') {
            this.options.countSend?.('failed');
            throw err; // the part may have arrived: it stays `sending`
          }
          if (failure.kind === 'refused') {
            this.options.countSend?.('refused');
            await redis.hdel(key, String(i));
            throw Object.assign(new UnrecoverableError(failure.error.message), { cause: failure.error });
          }
          this.options.countSend?.('rate_limited');
          const waitMs = failure.retryAfterSeconds * 1000;
          if (failure.retryAfterSeconds > this.options.maxRetryAfterSeconds && token) {
            await redis.hdel(key, String(i));
            log.warn({ retryAfter: failure.retryAfterSeconds }, 'asked to wait longer than max_retry_after_seconds; reply delayed');
            return await deferJob(job, token, waitMs);
          }
          log.info({ retryAfter: failure.retryAfterSeconds, part: i + 1 }, 'rate limited; waiting before sending the part again');
          await sleep(waitMs, undefined, signal ? { signal } : undefined);
        }
      }
      await redis.hset(key, String(i), messageId);
      this.options.countSend?.('sent');
      ids.push(messageId);
    }
    return ids;
  }
}
