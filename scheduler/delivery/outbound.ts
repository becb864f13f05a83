/**
 * Outbound replies to messaging platforms. A worker that finished a turn for a
 * session with a platform route enqueues one outbound job per reply; the
 * gateway consumes the platform's queue and sends it. The job id is derived
 * from the occurrence, so a retried turn or a second worker never queues the
 * same reply twice; the gateway records the platform's message id as evidence.
 *
 * Ordering policy (per chat): replies leave a chat in the order they were
 * queued, and the parts of one reply leave together. Queue order is fixed when
 * a reply is registered in its chat's order set (`Keys.outboundOrder`), right
 * after its job was added; the gateway sends a reply only while it is the
 * oldest unfinished one of its chat (gateway/outbound/ordered-sender.ts).
 * A producer that died between adding the job and registering it is covered
 * by the gateway, which registers a job it meets unregistered.
 */
import { Queue, type ConnectionOptions } from 'bullmq';
import type { Logger } from '../logger.ts';
import { logBullmqErrors } from '../store/redis/bullmq-errors.ts';
import type { RedisClient } from '../store/redis/connection-factory.ts';
import { QUEUES, bullJobId, Keys } from '../store/keys.ts';
import { JOB_RETENTION } from '../store/queues.ts';
import { luaScript, runLuaScript } from '../store/redis/lua-script.ts';
import { tracing, type TraceCarrier } from '../telemetry/tracing.ts';

/** Where the outcome of a send is reported besides the session stream: a cron run's delivery. */
export interface OutboundReport {
  kind: 'cron';
  cronJobId: string;
  /** The cron run's occurrence id (the run record's key in the job's history). */
  runOccurrenceId: string;
  /** The delivery target as written on the run (`telegram:<chat>[:<thread>]`). */
  target: string;
}

/** Data of an outbound job of any platform (`outbound-<platform>` queue). */
export interface OutboundData {
  /** The platform's name, as on a messaging route (`telegram`, `slack`). */
  platform: string;
  /** The platform's chat (Telegram chat id, Slack conversation id). */
  chatId: string;
  /** Forum topic (Telegram) or thread (`thread_ts`, Slack). */
  threadId?: string;
  text: string;
  sessionId: string;
  /** The occurrence or input this reply belongs to. */
  occurrenceId: string;
  /** Also report the outcome to this record (cron deliveries). */
  report?: OutboundReport;
  /** The trace of the occurrence or input that queued it, continued by the send of each part. */
  trace?: TraceCarrier;
}

/** Data of an outbound Telegram job. */
export interface TelegramOutboundData extends OutboundData {
  platform: 'telegram';
}

/** Send attempts of an outbound job (transient failures: network, 5xx). */
export const OUTBOUND_ATTEMPTS = 8;

/**
 * Type of the session event that tells what became of a reply sent beyond the session: to a platform
 * (written by the gateway after each send attempt) or to a webhook (written by the worker after its POST).
 */
export const DELIVERY_EVENT = 'delivery';

/**
 * How long the per-reply send record (`Keys.outboundSent`) is kept while the
 * reply is unfinished, seconds: longer than every retry of the job.
 */
export const OUTBOUND_RECORD_TTL_SECONDS = 24 * 3600;

/**
 * How long the send record is kept once the reply is finished, seconds. While
 * it exists a reply queued again (its job already trimmed) is not sent again.
 */
export const OUTBOUND_DONE_TTL_SECONDS = 3600;

/** How long a chat's order set lives after its last registration, seconds. */
export const OUTBOUND_ORDER_TTL_SECONDS = 7 * 24 * 3600;

/** Job id of the outbound reply of an occurrence (dedupes). */
export function outboundJobId(occurrenceId: string): string {
  return bullJobId('out', occurrenceId);
}

/**
 * Open the Telegram outbound queue.
 * @param log - where its connection errors are logged (rate-limited, see `logBullmqErrors`)
 */
export function telegramOutboundQueue(keys: Keys, connection: RedisClient | ConnectionOptions, log?: Logger): Queue<TelegramOutboundData> {
  return logBullmqErrors(
    new Queue<TelegramOutboundData>(QUEUES.outboundTelegram, {
      connection,
      prefix: keys.bullPrefix,
      defaultJobOptions: { ...JOB_RETENTION, attempts: OUTBOUND_ATTEMPTS, backoff: { type: 'exponential', delay: 1000 } },
    }),
    QUEUES.outboundTelegram,
    log,
  );
}

/** Platforms with an outbound queue, and its name. */
export const OUTBOUND_QUEUES = { telegram: QUEUES.outboundTelegram, slack: QUEUES.outboundSlack, discord: QUEUES.outboundDiscord } as const;
/** A platform the gateway sends to. */
export type OutboundPlatform = keyof typeof OUTBOUND_QUEUES;

/** Whether `platform` has an outbound queue. */
export function isOutboundPlatform(platform: string): platform is OutboundPlatform {
  return Object.hasOwn(OUTBOUND_QUEUES, platform);
}

/**
 * Open the outbound queue of `platform` (same job options as Telegram's: attempts, backoff, retention).
 * @param log - where its connection errors are logged (rate-limited, see `logBullmqErrors`)
 */
export function outboundQueue(
  platform: OutboundPlatform,
  keys: Keys,
  connection: RedisClient | ConnectionOptions,
  log?: Logger,
): Queue<OutboundData> {
  const name = OUTBOUND_QUEUES[platform];
  return logBullmqErrors(
    new Queue<OutboundData>(name, {
      connection,
      prefix: keys.bullPrefix,
      defaultJobOptions: { ...JOB_RETENTION, attempts: OUTBOUND_ATTEMPTS, backoff: { type: 'exponential', delay: 1000 } },
    }),
    name,
    log,
  );
}

const REGISTER = luaScript('register-outbound-3.lua');

/**
 * Fix a reply's place in its chat's queue order (idempotent: a reply is
 * registered once; registering it again returns its first place).
 * @returns its sequence number
 */
export async function registerOutbound(
  redis: RedisClient,
  keys: Keys,
  data: Pick<OutboundData, 'platform' | 'chatId' | 'occurrenceId'>,
): Promise<number> {
  const seq = await runLuaScript(
    redis,
    REGISTER,
    [keys.outboundSent(data.occurrenceId), keys.outboundOrder(data.platform, data.chatId), keys.outboundSequence],
    [data.occurrenceId, OUTBOUND_RECORD_TTL_SECONDS, OUTBOUND_ORDER_TTL_SECONDS],
  );
  return Number(seq);
}

/**
 * Queue a reply for Telegram (no-op when already queued for this occurrence)
 * and fix its place in the chat's order.
 */
export async function enqueueTelegramOutbound(queue: Queue<TelegramOutboundData>, data: TelegramOutboundData): Promise<void> {
  await enqueueOutbound(queue as unknown as Queue<OutboundData>, data);
}

/**
 * Queue a reply on its platform's outbound queue (no-op when already queued for this
 * occurrence) and fix its place in the chat's order.
 */
export async function enqueueOutbound(queue: Queue<OutboundData>, data: OutboundData): Promise<void> {
  const trace = tracing().carrier();
  await queue.add('send', trace ? { ...data, trace } : data, { jobId: outboundJobId(data.occurrenceId) });
  // The queue's own connection and prefix: the queue was opened with `keys.bullPrefix` (= `keys.prefix`).
  const client = (await queue.getBackend().client) as unknown as RedisClient;
  await registerOutbound(client, new Keys((queue.opts as { prefix?: string }).prefix!), data);
}
