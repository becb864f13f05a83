/**
 * What became of an outbound reply, reported back by the gateway after every
 * send attempt: to the session's event stream (a `delivery` event, so clients
 * and operators see a reply that did not reach its chat) and, for a cron
 * delivery, into the run record (scheduler/cron/delivery-report.ts).
 *
 * Retry policy (decided in gateway/outbound/ordered-sender.ts): permanent
 * refusals (400 chat not found, 403 bot blocked, other 4xx but 429) are not
 * retried; network errors and 5xx are, with exponential backoff, up to
 * `OUTBOUND_ATTEMPTS` attempts; a 429 waits out `retry_after`.
 */
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import type { Keys } from '../../scheduler/store/keys.ts';
import { reportCronDelivery } from '../../scheduler/cron/delivery-report.ts';
import { DELIVERY_EVENT, type OutboundData } from '../../scheduler/delivery/outbound.ts';

/** The outcome of one send attempt of an outbound job. */
export type OutboundOutcome =
  | { status: 'sent'; messageIds: Array<number | string>; attempts: number }
  | {
      status: 'failed';
      /** The platform's answer or the network error, without secrets. */
      error: string;
      /** The platform's error code, when it answered. */
      errorCode?: number;
      /** Whether the job is tried again (transient failure with attempts left). */
      willRetry: boolean;
      attempts: number;
    };

/**
 * Report `outcome` of the reply `data` to its session stream and, when the
 * job names one, to its cron run record.
 * @throws when Redis refused a write (the caller retries the job; the parts already sent are not sent again)
 */
export async function recordOutboundOutcome(
  redis: RedisClient,
  keys: Keys,
  data: OutboundData,
  outcome: OutboundOutcome,
  eventsMaxLen: number,
): Promise<void> {
  const event = {
    platform: data.platform,
    chatId: data.chatId,
    ...(data.threadId ? { threadId: data.threadId } : {}),
    occurrenceId: data.occurrenceId,
    ...outcome,
  };
  await redis.xadd(
    keys.events(data.sessionId),
    'MAXLEN',
    '~',
    String(eventsMaxLen),
    '*',
    'type',
    DELIVERY_EVENT,
    'data',
    JSON.stringify(event),
  );
  if (data.report?.kind === 'cron') {
    await reportCronDelivery(
      redis,
      keys,
      data.report,
      outcome.status === 'sent'
        ? {
            status: 'sent',
            message_ids: outcome.messageIds,
            evidence: `message ids ${outcome.messageIds.join(',')}`,
            attempts: outcome.attempts,
          }
        : {
            status: outcome.willRetry ? 'queued' : 'failed',
            error: outcome.error,
            will_retry: outcome.willRetry,
            attempts: outcome.attempts,
          },
    );
  }
}
