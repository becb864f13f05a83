/**
 * Outbound replies to messaging platforms. A worker that finished a turn for a
 * session with a platform route enqueues one outbound job per reply; the
 * gateway consumes the platform's queue and sends it. The job id is derived
 * from the occurrence, so a retried turn or a second worker never queues the
 * same reply twice; the gateway records the platform's message id as evidence.
 */
import { Queue, type ConnectionOptions } from 'bullmq';
import type { RedisClient } from './redis/connection-factory.ts';
import { QUEUES, bullJobId, type Keys } from './keys.ts';
import { JOB_RETENTION } from './queues.ts';

/** Data of an outbound Telegram job. */
export interface TelegramOutboundData {
  platform: 'telegram';
  chatId: string;
  threadId?: string;
  text: string;
  sessionId: string;
  /** The occurrence or input this reply belongs to. */
  occurrenceId: string;
}

/** Job id of the outbound reply of an occurrence (dedupes). */
export function outboundJobId(occurrenceId: string): string {
  return bullJobId('out', occurrenceId);
}

/** Open the Telegram outbound queue. */
export function telegramOutboundQueue(keys: Keys, connection: RedisClient | ConnectionOptions): Queue<TelegramOutboundData> {
  return new Queue<TelegramOutboundData>(QUEUES.outboundTelegram, {
    connection: connection as ConnectionOptions,
    prefix: keys.bullPrefix,
    defaultJobOptions: { ...JOB_RETENTION, attempts: 8, backoff: { type: 'exponential', delay: 1000 } },
  });
}

/** Queue a reply for Telegram (no-op when already queued for this occurrence). */
export async function enqueueTelegramOutbound(queue: Queue<TelegramOutboundData>, data: TelegramOutboundData): Promise<void> {
  await queue.add('send', data, { jobId: outboundJobId(data.occurrenceId) });
}
