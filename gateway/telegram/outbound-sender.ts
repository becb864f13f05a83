/**
 * Sends the replies workers queued for Telegram (`outbound-telegram`, one job
 * per occurrence, job id `out:<occurrenceId>`), once (SPEC §8):
 *
 * - A reply is split at 4096 characters; each part's Telegram message id is
 *   recorded in Redis (`Keys.outboundSent`) right after Telegram confirmed it,
 *   and the job returns all ids as delivery evidence. A retried job (e.g. the
 *   gateway died after part 1 of 3) sends only the parts without a recorded
 *   id. The one window left is a crash between Telegram's answer and the
 *   record of that part (milliseconds); that part may then be sent twice, and
 *   the retry logs it.
 * - 429 Too Many Requests is waited out by grammY's auto-retry plugin up to
 *   `gateway.max_retry_after_seconds`; a longer `retry_after` moves the job
 *   back to delayed for exactly that long.
 * - 400/403 (chat not found, bot blocked, bad thread) fail the job without
 *   retries; network errors and 5xx are retried by BullMQ with backoff.
 *
 * `stop(deadlineMs)` has its own deadline: BullMQ's `Worker.close()` waits for
 * active jobs without a timeout and memoises its first call, so a later
 * `close(true)` cannot force it. After the deadline the active sends are
 * cancelled through their AbortSignals (`cancelAllJobs`), which lets the one
 * `close()` call resolve; cancelled jobs are retried by the next gateway.
 */
import { DelayedError, UnrecoverableError, Worker, type Job } from 'bullmq';
import { GrammyError, type Api } from 'grammy';
import type { RedisClient } from '../../scheduler/redis/connection-factory.ts';
import type { Logger } from 'pino';
import { PlatformError } from '../../scheduler/errors/platform-error.ts';
import { QUEUES, type Keys } from '../../scheduler/keys.ts';
import type { TelegramOutboundData } from '../../scheduler/outbound.ts';
import { OCCURRENCE_TTL_SECONDS } from '../../scheduler/session-store.ts';
import { grammySignal } from './poller.ts';
import { splitMessage } from './split-message.ts';

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
  keys: Keys;
  concurrency: number;
  /** BullMQ job lock, ms (`worker.lock_duration_ms`). */
  lockDurationMs: number;
  /** Stalled-job check interval, ms (`worker.stalled_interval_ms`). */
  stalledIntervalMs: number;
  log: Logger;
}

const PENDING = 'sending';

export class TelegramOutboundSender {
  private worker: Worker<TelegramOutboundData, TelegramOutboundResult> | undefined;
  private stopping: Promise<void> | undefined;

  constructor(private readonly options: OutboundSenderOptions) {}

  /** Start consuming the outbound queue. Resolves when the worker is connected. */
  async start(): Promise<void> {
    const o = this.options;
    this.worker = new Worker<TelegramOutboundData, TelegramOutboundResult>(
      QUEUES.outboundTelegram,
      (job, token, signal) => this.send(job, token, signal),
      {
        connection: o.connection, prefix: o.keys.bullPrefix, concurrency: o.concurrency,
        lockDuration: o.lockDurationMs, stalledInterval: o.stalledIntervalMs,
      },
    );
    this.worker.on('failed', (job, err) => {
      o.log.warn({ jobId: job?.id, attempts: job?.attemptsMade, err: err.message }, 'Telegram reply not sent');
    });
    this.worker.on('error', (err) => o.log.warn({ err: err.message }, 'outbound worker error'));
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

  /** Process one outbound job. */
  private async send(job: Job<TelegramOutboundData>, token: string | undefined, signal: AbortSignal | undefined): Promise<TelegramOutboundResult> {
    const { api, redis, keys } = this.options;
    const data = job.data;
    const log = this.options.log.child({ jobId: job.id, occurrenceId: data.occurrenceId, chatId: data.chatId });
    const parts = splitMessage(data.text);
    const key = keys.outboundSent(data.occurrenceId);
    const recorded = await redis.hgetall(key);
    const ids: number[] = [];
    for (let i = 0; i < parts.length; i++) {
      const prior = recorded[String(i)];
      if (prior && prior !== PENDING) {
        ids.push(Number(prior));
        continue;
      }
      if (prior === PENDING) log.warn({ part: i + 1, parts: parts.length }, 'resending a part whose earlier send was not confirmed; it may arrive twice');
      await redis.multi().hset(key, String(i), PENDING).expire(key, OCCURRENCE_TTL_SECONDS).exec();
      let messageId: number;
      try {
        const sent = await api.sendMessage(
          data.chatId,
          parts[i]!,
          data.threadId ? { message_thread_id: Number(data.threadId) } : {},
          signal ? grammySignal(signal) : undefined,
        );
        messageId = sent.message_id;
      } catch (err) {
        if (err instanceof GrammyError) {
          const retryAfter = err.parameters?.retry_after;
          if (err.error_code === 429 && typeof retryAfter === 'number' && token) {
            log.warn({ retryAfter }, 'Telegram asked to wait longer than max_retry_after_seconds; reply delayed');
            await redis.hdel(key, String(i));
            await job.moveToDelayed(Date.now() + retryAfter * 1000, token);
            throw new DelayedError();
          }
          const platformErr = new PlatformError(`Telegram refused the reply (${err.error_code} ${err.description}).`, {
            platform: 'telegram', method: 'sendMessage', errorCode: err.error_code, cause: err,
          });
          await redis.hdel(key, String(i));
          if (err.error_code >= 400 && err.error_code < 500) throw new UnrecoverableError(platformErr.message);
          throw platformErr;
        }
        throw err;
      }
      await redis.multi().hset(key, String(i), String(messageId)).expire(key, OCCURRENCE_TTL_SECONDS).exec();
      ids.push(messageId);
    }
    log.info({ parts: parts.length, messageIds: ids, sessionId: data.sessionId }, 'Telegram reply sent');
    return { chatId: data.chatId, messageIds: ids };
  }
}
