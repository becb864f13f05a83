/**
 * The sender of every `outbound-<platform>` queue (one job per occurrence, job id
 * `out:<occurrenceId>`): the order and at-least-once rules of outbound replies, with
 * the platform's side passed in (`PlatformSend`: how a reply is cut into parts, how a
 * part is sent, how a failed send is read). Each outcome is reported back through
 * `recordOutboundOutcome` (session stream, and the cron run for cron deliveries).
 *
 * Order (per chat): a reply is sent only while it is the oldest unfinished reply of
 * its chat (`Keys.outboundOrder`, filled in queue order by `registerOutbound`). A
 * later reply that meets an earlier one still waiting, retrying or in flight (on this
 * gateway or a dead one whose job is not yet recovered) moves back to delayed and is
 * woken when the earlier one finishes (or after `gateway.outbound_order_recheck_ms`).
 * All parts of a reply are sent before the next reply of the chat, so nothing lands
 * between them, across retries and gateway crashes alike. Different chats are sent in
 * parallel (`gateway.outbound_concurrency`).
 *
 * At least once per part: before a part is sent it is marked `sending` in
 * `Keys.outboundSent`, and the platform's message id replaces the mark in the first
 * Redis command after the platform's answer. A retried job (the gateway died after
 * part 1 of 3) sends only the parts without a message id. No platform here has an
 * idempotent send, so one window is left: a crash after the platform took a part and
 * before its id was written (one Redis round trip after the answer arrived, about a
 * millisecond) sends that part again; the retry logs it. No window loses a part.
 *
 * Failures (each attempt reported, with `willRetry`):
 * - Rate limits: a platform's "retry after N s" is waited out in place when
 *   N ≤ `gateway.max_retry_after_seconds` (the part is sent once, after the wait); a
 *   longer one moves the job back to delayed for exactly N s (it stays first in its
 *   chat). A platform whose client already waits out the short ones
 *   (`PlatformSend.deferEveryRateLimit`) has every rate limit that reaches the sender
 *   moved back to delayed.
 * - Permanent refusals (the platform's 4xx but 429: unknown chat, bot blocked, bad
 *   thread) fail the job at once, not retried; the chat's next reply goes on.
 * - Anything else (network errors, 5xx) is retried by BullMQ with exponential backoff
 *   up to `OUTBOUND_ATTEMPTS`.
 *
 * `stop(deadlineMs)` has its own deadline: BullMQ's `Worker.close()` waits for active
 * jobs without a timeout and memoises its first call, so a later `close(true)` cannot
 * force it. After the deadline the active sends are cancelled through their
 * AbortSignals (`cancelAllJobs`), which lets the one `close()` call resolve; cancelled
 * jobs are retried by the next gateway.
 */
import { DelayedError, UnrecoverableError, Worker, type Job, type Queue } from 'bullmq';
import type { Logger } from 'pino';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import type { Keys } from '../../scheduler/store/keys.ts';
import type { HermesConfig } from '../../scheduler/config/config.ts';
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
import { ATTR, SPAN, carrierOf, tracing } from '../../scheduler/telemetry/tracing.ts';

/** What a platform says about a failed send. */
export type SendFailure =
  | { kind: 'rate_limited'; retryAfterSeconds: number }
  /** The platform refused for good (unknown channel, not in channel…): not retried. */
  | { kind: 'refused'; error: PlatformError }
  /**
   * Network error, 5xx: retried by the queue. The part may have arrived, so it stays `sending`,
   * unless the platform `answered` with the error (then it did not arrive and its mark is dropped).
   * `error`, when given, is what the job fails with (its message and code are reported).
   */
  | { kind: 'transient'; error?: PlatformError; answered?: boolean };

/** The platform's side of a sender: a part is `Part` (plain text by default), a message id `Id`. */
export interface PlatformSend<Part = string, Id extends string | number = string> {
  /** Platform name, for logs (`slack`). */
  platform: string;
  /** The parts of a reply, in order (rendered and split for the platform). */
  parts(text: string): Part[];
  /** Send one part; resolves with the platform's message id. */
  send(data: OutboundData, part: Part, signal: AbortSignal | undefined, log: Logger): Promise<Id>;
  /** Read a send's error. */
  classify(err: unknown): SendFailure;
  /** A message id as recorded in Redis (text) read back; the text itself when absent. */
  recordedId?(recorded: string): Id;
  /** The platform's client waits out rate limits up to the cap itself: every one that reaches the sender moves the job back to delayed. */
  deferEveryRateLimit?: boolean;
  /** Called once a part's message id is recorded. */
  afterPart?(data: OutboundData): void;
}

/** Settings of an ordered sender. */
export interface OrderedSenderOptions {
  queueName: string;
  /** The platform's outbound queue (to look at a chat's earlier replies; any platform's job data). */
  queue: Pick<Queue, 'getJob'>;
  redis: RedisClient;
  /** BullMQ connection of the worker (blocking commands). */
  connection: RedisClient;
  keys: Keys;
  concurrency: number;
  /** BullMQ job lock, ms (`worker.lock_duration_ms`). */
  lockDurationMs: number;
  /** Renewal interval of the job locks, ms (`worker.lock_renew_ms`). */
  lockRenewMs: number;
  /** Stalled-job check interval, ms (`worker.stalled_interval_ms`): a dead gateway's send is taken over within lock + this. */
  stalledIntervalMs: number;
  /** Stalls (gateway deaths mid-send) a job survives before it fails (`worker.max_stalled_count`). */
  maxStalledCount: number;
  /** Wait of a reply queued behind an unfinished earlier one before it looks again, ms (`gateway.outbound_order_recheck_ms`). */
  orderRecheckMs: number;
  /** `gateway.max_retry_after_seconds`: a longer wait moves the job back to delayed. */
  maxRetryAfterSeconds: number;
  /** Entries kept per session event stream, where outcomes are reported (`worker.events_max_entries`). */
  eventsMaxLen: number;
  log: Logger;
  /** Each send counted by outcome: sent, rate_limited, refused, failed. */
  countSend?: (outcome: 'sent' | 'rate_limited' | 'refused' | 'failed') => void;
}

/** The settings of every platform's sender that come from the configuration. */
export function orderedSenderSettings(
  config: HermesConfig,
): Pick<
  OrderedSenderOptions,
  | 'concurrency'
  | 'orderRecheckMs'
  | 'maxRetryAfterSeconds'
  | 'lockDurationMs'
  | 'lockRenewMs'
  | 'stalledIntervalMs'
  | 'maxStalledCount'
  | 'eventsMaxLen'
> {
  return {
    concurrency: config.gateway.outbound_concurrency,
    orderRecheckMs: config.gateway.outbound_order_recheck_ms,
    maxRetryAfterSeconds: config.gateway.max_retry_after_seconds,
    lockDurationMs: config.worker.lock_duration_ms,
    lockRenewMs: config.worker.lock_renew_ms,
    stalledIntervalMs: config.worker.stalled_interval_ms,
    maxStalledCount: config.worker.max_stalled_count,
    eventsMaxLen: config.worker.events_max_entries,
  };
}

/** Return value of an outbound job: the evidence of delivery. */
export interface OrderedSendResult<Id extends string | number = string> {
  chatId: string;
  /** The platform's message ids, one per part, in order. */
  messageIds: Id[];
}

/** Mark of a part whose send started and whose message id is not known yet. */
const PENDING = 'sending';
/** States of a job that has not finished (an earlier reply in them holds its chat's later replies back). */
const UNFINISHED = new Set(['waiting', 'delayed', 'active', 'prioritized', 'waiting-children']);

/** Sends one platform's outbound queue in order, at least once per part (the rules: this file's head). */
export class OrderedSender<Part = string, Id extends string | number = string> {
  private worker: Worker<OutboundData, OrderedSendResult<Id>> | undefined;
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly options: OrderedSenderOptions,
    private readonly platform: PlatformSend<Part, Id>,
  ) {}

  /** Start consuming the queue. Resolves when the worker is connected. */
  async start(): Promise<void> {
    const o = this.options;
    this.worker = new Worker<OutboundData, OrderedSendResult<Id>>(
      o.queueName,
      (job, token, signal) =>
        tracing().continued(
          SPAN.job,
          carrierOf(job.data),
          {
            [ATTR.queue]: o.queueName,
            [ATTR.jobId]: job.id,
            [ATTR.sessionId]: job.data.sessionId,
            [ATTR.occurrenceId]: job.data.occurrenceId,
          },
          () => this.process(job, token, signal),
        ),
      {
        connection: o.connection,
        prefix: o.keys.bullPrefix,
        concurrency: o.concurrency,
        lockDuration: o.lockDurationMs,
        lockRenewTime: o.lockRenewMs,
        stalledInterval: o.stalledIntervalMs,
        maxStalledCount: o.maxStalledCount,
        ...JOB_RETENTION,
      },
    );
    this.worker.on('failed', (job, err) =>
      o.log.warn({ jobId: job?.id, attempts: job?.attemptsMade, err: err.message }, `${this.platform.platform} reply not sent`),
    );
    logBullmqErrors(this.worker, o.queueName, o.log);
    // A send whose job lock lapsed (this process stalled longer than the lock) may already be
    // taken over elsewhere: stop it, so one reply is never sent by two processors at once.
    this.worker.on('lockRenewalFailed', (jobIds) => {
      for (const id of jobIds) {
        if (this.worker?.cancelJob(id, 'job lock lost'))
          o.log.warn({ jobId: id }, 'outbound job lock lost; its send is stopped here and left to whoever took the job over');
      }
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
        this.options.log.warn({ deadlineMs }, 'outbound sends still running at the deadline; cancelling them (they are retried later)');
        worker.cancelAllJobs('gateway shutdown');
        await closed;
      }
    })();
    return this.stopping;
  }

  /** Process one outbound job: wait for its turn in the chat, send, report. */
  private async process(
    job: Job<OutboundData>,
    token: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<OrderedSendResult<Id>> {
    const { redis, keys } = this.options;
    const data = job.data;
    const log = this.options.log.child({ jobId: job.id, occurrenceId: data.occurrenceId, chatId: data.chatId });
    // A producer that died before registering is covered here (idempotent).
    await registerOutbound(redis, keys, data);
    const orderKey = keys.outboundOrder(data.platform, data.chatId);
    const ahead = await this.earlierUnfinished(orderKey, data.occurrenceId);
    if (ahead !== null && token) {
      log.debug({ waitsFor: ahead }, 'an earlier reply of this chat is not finished; this one waits');
      return await deferJob(job, token, this.options.orderRecheckMs);
    }
    const attempt = job.attemptsMade + 1;
    const attempts = job.opts.attempts ?? OUTBOUND_ATTEMPTS;
    let messageIds: Id[];
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

  /**
   * The oldest unfinished reply queued before `occurrenceId` in its chat, or
   * `null` when this one is first (or not ordered any more: a retry after it
   * finished). Entries whose job finished or is gone are dropped on the way.
   */
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

  /** This reply is done (sent or given up): let the chat's next reply go at once. */
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
      // A sent reply whose report failed is retried: its parts are recorded, so only the report is repeated.
      log.warn({ err: (err as Error).message, status: outcome.status }, 'outbound outcome not recorded');
      if (outcome.status === 'sent') throw err;
    }
  }

  /**
   * Send the parts that have no recorded message id, in order.
   * @returns every part's message id
   * @throws DelayedError after a long rate limit (the job waits its retry-after);
   *   UnrecoverableError (cause: PlatformError) for a permanent refusal;
   *   the failure's error, or the send's own, for a transient failure
   */
  private async sendParts(job: Job<OutboundData>, token: string | undefined, signal: AbortSignal | undefined, log: Logger): Promise<Id[]> {
    const { redis, keys } = this.options;
    const platform = this.platform;
    const data = job.data;
    const parts = platform.parts(data.text);
    const key = keys.outboundSent(data.occurrenceId);
    const recorded = await redis.hgetall(key);
    const ids: Id[] = [];
    for (let i = 0; i < parts.length; i++) {
      signal?.throwIfAborted(); // stopped (lock lost, shutdown): the next part is left to the job's next run
      const prior = recorded[String(i)];
      if (prior && prior !== PENDING) {
        ids.push(platform.recordedId ? platform.recordedId(prior) : (prior as Id));
        continue;
      }
      if (prior === PENDING)
        log.warn({ part: i + 1, parts: parts.length }, 'resending a part whose earlier send was not confirmed; it may arrive twice');
      await redis.hset(key, String(i), PENDING);
      let messageId: Id;
      for (;;) {
        try {
          const part = parts[i]!;
          messageId = await tracing().span(
            SPAN.deliveryPart,
            { [ATTR.platform]: platform.platform, [ATTR.part]: i + 1, 'hermes.delivery.parts': parts.length },
            () => platform.send(data, part, signal, log),
          );
          break;
        } catch (err) {
          const failure = platform.classify(err);
          if (failure.kind === 'transient') {
            this.options.countSend?.('failed');
            if (failure.answered) await redis.hdel(key, String(i)); // else the part may have arrived: it stays `sending`
            throw failure.error ?? err;
          }
          if (failure.kind === 'refused') {
            this.options.countSend?.('refused');
            await redis.hdel(key, String(i));
            throw Object.assign(new UnrecoverableError(failure.error.message), { cause: failure.error });
          }
          this.options.countSend?.('rate_limited');
          const waitMs = failure.retryAfterSeconds * 1000;
          if ((platform.deferEveryRateLimit || failure.retryAfterSeconds > this.options.maxRetryAfterSeconds) && token) {
            await redis.hdel(key, String(i));
            log.warn(
              { retryAfter: failure.retryAfterSeconds },
              `${platform.platform} asked to wait longer than max_retry_after_seconds; reply delayed`,
            );
            return await deferJob(job, token, waitMs);
          }
          log.info({ retryAfter: failure.retryAfterSeconds, part: i + 1 }, 'rate limited; waiting before sending the part again');
          await sleep(waitMs, undefined, signal ? { signal } : undefined);
        }
      }
      // The at-least-once window closes here: the first command after the platform's answer.
      await redis.hset(key, String(i), String(messageId));
      this.options.countSend?.('sent');
      platform.afterPart?.(data);
      ids.push(messageId);
    }
    return ids;
  }
}
