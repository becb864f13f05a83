/**
 * Sends the replies workers queued for Telegram (`outbound-telegram`, one job
 * per occurrence, job id `out:<occurrenceId>`), and reports each outcome back.
 *
 * Order (per chat): a reply is sent only while it is the oldest unfinished
 * reply of its chat (`Keys.outboundOrder`, filled in queue order by
 * `registerOutbound`). A later reply that meets an earlier one still waiting,
 * retrying or in flight (on this gateway or a dead one whose job is not yet
 * recovered) moves back to delayed and is woken when the earlier one finishes
 * (or after `gateway.outbound_order_recheck_ms`). All parts of a reply are sent
 * before the next reply of the chat, so nothing lands between them, across
 * retries and gateway crashes alike. Different chats are sent in parallel
 * (`gateway.outbound_concurrency`).
 *
 * At least once per part: a reply is split at 4096 characters; before a part
 * is sent it is marked `sending` in `Keys.outboundSent`, and Telegram's message
 * id replaces the mark in the first Redis command after Telegram's answer. A
 * retried job (the gateway died after part 1 of 3) sends only the parts without
 * a message id. Telegram has no idempotent send, so one window is left: a crash
 * after Telegram took a part and before its id was written (one Redis round trip
 * after the answer arrived, about a millisecond) sends that part again; the
 * retry logs it. No window loses a part.
 *
 * Failures (each reported through `recordOutboundOutcome`: session stream, and
 * the cron run for cron deliveries):
 * - 429 Too Many Requests is waited out by grammY's auto-retry plugin up to
 *   `gateway.max_retry_after_seconds`; a longer `retry_after` moves the job
 *   back to delayed for exactly that long (it stays first in its chat).
 * - 4xx but 429 (400 chat not found, 403 bot blocked, bad thread) are permanent:
 *   failed at once, not retried; the chat's next reply goes on.
 * - network errors and 5xx are retried by BullMQ with exponential backoff up
 *   to `OUTBOUND_ATTEMPTS`; each failed attempt is reported with `willRetry`.
 *
 * `stop(deadlineMs)` has its own deadline: BullMQ's `Worker.close()` waits for
 * active jobs without a timeout and memoises its first call, so a later
 * `close(true)` cannot force it. After the deadline the active sends are
 * cancelled through their AbortSignals (`cancelAllJobs`), which lets the one
 * `close()` call resolve; cancelled jobs are retried by the next gateway.
 */
import type { HermesMetrics } from '../../scheduler/metrics.ts';
import { DelayedError, UnrecoverableError, Worker, type Job, type Queue } from 'bullmq';
import { GrammyError, type Api } from 'grammy';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import type { Logger } from 'pino';
import { PlatformError } from '../../scheduler/errors/platform-error.ts';
import { QUEUES, type Keys } from '../../scheduler/store/keys.ts';
import { deferJob } from '../../scheduler/store/defer-job.ts';
import { logBullmqErrors } from '../../scheduler/store/redis/bullmq-errors.ts';
import { JOB_RETENTION } from '../../scheduler/store/queues.ts';
import {
  OUTBOUND_ATTEMPTS,
  OUTBOUND_DONE_TTL_SECONDS,
  outboundJobId,
  registerOutbound,
  type TelegramOutboundData,
} from '../../scheduler/delivery/outbound.ts';
import { recordOutboundOutcome, type OutboundOutcome } from '../outbound/outbound-outcome.ts';
import { grammySignal } from './poller.ts';
import { renderMarkdown, splitFormatted } from './render-markdown.ts';
import { threadParams } from './forum-topic.ts';

/** Return value of an outbound job: the evidence of delivery. */
export interface TelegramOutboundResult {
  chatId: string;
  /** Telegram message ids, one per part, in order. */
  messageIds: number[];
}

/** Settings of the sender. */
export interface OutboundSenderOptions {
  /** grammY API client with the auto-retry transformer installed. */
  api: Api;
  redis: RedisClient;
  /** BullMQ connection for the worker (blocking commands). */
  connection: RedisClient;
  /** The outbound queue (to look at a chat's earlier replies). */
  queue: Queue<TelegramOutboundData>;
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
  /** Entries kept per session event stream, where outcomes are reported (`worker.events_max_entries`). */
  eventsMaxLen?: number;
  log: Logger;
  /** Each sendMessage is counted by outcome: sent, rate_limited (429, delayed), refused (4xx), failed (retried). */
  metrics?: HermesMetrics;
  /** Called after a part was sent to a chat (ends its typing indicator). */
  onSent?: (chatId: string, threadId: string | undefined) => void;
}

/** Mark of a part whose send started and whose message id is not known yet. */
const PENDING = 'sending';
/** States of a job that has not finished (an earlier reply in them holds its chat's later replies back). */
const UNFINISHED = new Set(['waiting', 'delayed', 'active', 'prioritized', 'waiting-children']);

export class TelegramOutboundSender {
  private worker: Worker<TelegramOutboundData, TelegramOutboundResult> | undefined;
  private stopping: Promise<void> | undefined;

  constructor(private readonly options: OutboundSenderOptions) {}

  /** Start consuming the outbound queue. Resolves when the worker is connected. */
  async start(): Promise<void> {
    const o = this.options;
    this.worker = new Worker<TelegramOutboundData, TelegramOutboundResult>(
      QUEUES.outboundTelegram,
      (job, token, signal) => this.process(job, token, signal),
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
    this.worker.on('failed', (job, err) => {
      o.log.warn({ jobId: job?.id, attempts: job?.attemptsMade, err: err.message }, 'Telegram reply not sent');
    });
    logBullmqErrors(this.worker, QUEUES.outboundTelegram, o.log);
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

  /**
   * Stop taking jobs; wait for active sends up to `deadlineMs`, then cancel them.
   * Memoised. Resolves when the worker is closed.
   */
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
    job: Job<TelegramOutboundData>,
    token: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<TelegramOutboundResult> {
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
    let messageIds: number[];
    try {
      messageIds = await this.sendParts(job, token, signal, log);
    } catch (err) {
      if (err instanceof DelayedError || signal?.aborted) throw err;
      const permanent = err instanceof UnrecoverableError;
      const willRetry = !permanent && attempt < attempts;
      if (!willRetry) await this.finish(orderKey, data.occurrenceId);
      const platform =
        err instanceof UnrecoverableError ? (err.cause as PlatformError | undefined) : err instanceof PlatformError ? err : undefined;
      await this.report(
        data,
        {
          status: 'failed',
          error: platform?.message ?? (err as Error).message,
          ...(platform?.errorCode !== undefined ? { errorCode: platform.errorCode } : {}),
          willRetry,
          attempts: attempt,
        },
        log,
      );
      throw err;
    }
    await this.finish(orderKey, data.occurrenceId);
    await this.report(data, { status: 'sent', messageIds, attempts: attempt }, log);
    log.info({ messageIds, sessionId: data.sessionId }, 'Telegram reply sent');
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

  private async report(data: TelegramOutboundData, outcome: OutboundOutcome, log: Logger): Promise<void> {
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
   * @throws DelayedError after a long 429 (the job waits `retry_after`);
   *   UnrecoverableError (cause: PlatformError) for a permanent refusal;
   *   PlatformError for a 5xx; the network error otherwise
   */
  private async sendParts(
    job: Job<TelegramOutboundData>,
    token: string | undefined,
    signal: AbortSignal | undefined,
    log: Logger,
  ): Promise<number[]> {
    const { api, redis, keys } = this.options;
    const data = job.data;
    // Markdown becomes Telegram entities; each part carries only whole entities (render-markdown.ts).
    const parts = splitFormatted(renderMarkdown(data.text));
    const key = keys.outboundSent(data.occurrenceId);
    const recorded = await redis.hgetall(key);
    const ids: number[] = [];
    for (let i = 0; i < parts.length; i++) {
      signal?.throwIfAborted(); // stopped (lock lost, shutdown): the next part is left to the job's next run
      const prior = recorded[String(i)];
      if (prior && prior !== PENDING) {
        ids.push(Number(prior));
        continue;
      }
      if (prior === PENDING)
        log.warn({ part: i + 1, parts: parts.length }, 'resending a part whose earlier send was not confirmed; it may arrive twice');
      await redis.hset(key, String(i), PENDING);
      let messageId: number;
      try {
        const part = parts[i]!;
        const thread = threadParams(data.threadId); // the General topic (1) is sent without a thread id
        const send = (entities: typeof part.entities) =>
          api.sendMessage(
            data.chatId,
            part.text,
            { ...thread, ...(entities.length ? { entities } : {}) },
            signal ? grammySignal(signal) : undefined,
          );
        let sent;
        try {
          sent = await send(part.entities);
        } catch (err) {
          // Telegram refused the formatting (an entity it does not accept): the same text, plain.
          if (!(err instanceof GrammyError && err.error_code === 400 && /entit/i.test(err.description) && part.entities.length > 0))
            throw err;
          log.warn({ part: i + 1, err: err.description }, 'Telegram refused the formatting; sending the part as plain text');
          sent = await send([]);
        }
        messageId = sent.message_id;
      } catch (err) {
        const outcome =
          !(err instanceof GrammyError) || err.error_code >= 500 ? 'failed' : err.error_code === 429 ? 'rate_limited' : 'refused';
        this.options.metrics?.telegramSends.inc({ outcome });
        if (!(err instanceof GrammyError)) throw err; // the part may have reached Telegram: it stays `sending`
        await redis.hdel(key, String(i));
        const retryAfter = err.parameters?.retry_after;
        if (err.error_code === 429 && typeof retryAfter === 'number' && token) {
          log.warn({ retryAfter }, 'Telegram asked to wait longer than max_retry_after_seconds; reply delayed');
          return await deferJob(job, token, retryAfter * 1000);
        }
        const platformErr = new PlatformError(`Telegram refused the reply (${err.error_code} ${err.description}).`, {
          platform: 'telegram',
          method: 'sendMessage',
          errorCode: err.error_code,
          cause: err,
        });
        if (err.error_code >= 400 && err.error_code < 500)
          throw Object.assign(new UnrecoverableError(platformErr.message), { cause: platformErr });
        throw platformErr;
      }
      // The at-least-once window closes here: the first command after Telegram's answer.
      await redis.hset(key, String(i), String(messageId));
      this.options.metrics?.telegramSends.inc({ outcome: 'sent' });
      this.options.onSent?.(data.chatId, data.threadId);
      ids.push(messageId);
    }
    return ids;
  }
}
