/**
 * Refusals to Telegram users outside the allow-list, so that a stranger's spam
 * costs the bot almost nothing and never delays the owner's replies:
 *
 * - At most one per user and chat per `telegram.refusal_interval_seconds`
 *   (default one hour): a mark in Redis (`SET NX EX`), so it holds across
 *   gateway restarts and for every gateway of a fleet. Messages within the
 *   interval are not answered (logged at debug).
 * - Never ahead of allowed users' replies: when the chat already has replies
 *   queued, the refusal is dropped (and the mark given back, so a later
 *   message may be answered); otherwise it is queued at BullMQ's lowest
 *   priority and without a place in the chat's order, which it only takes
 *   when the sender picks it up — after every reply registered before then
 *   (gateway/telegram/outbound-sender.ts).
 *
 * The mark is set before the refusal is queued; a queueing that fails gives
 * it back and throws, so the poller's retry of the update tries again.
 */
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { keyPart, type Keys } from '../../scheduler/store/keys.ts';
import { outboundJobId, type TelegramOutboundData } from '../../scheduler/delivery/outbound.ts';

/** BullMQ's lowest priority (2^21 - 1): taken after every job without or with a higher priority. */
export const REFUSAL_PRIORITY = 2_097_151;

/** What became of a refusal. */
export type RefusalOutcome = 'queued' | 'limited' | 'dropped';

/**
 * The mark of a refusal sent to `userId` in `chatId` by bot `botId` (fleet-wide, like the poll lease).
 * Spelled like the keys of scheduler/store/keys.ts: every id through `keyPart`.
 */
export function refusalMarkKey(keys: Keys, botId: string, chatId: string, userId: string): string {
  return `${keys.basePrefix}:telegram:${keyPart(botId)}:refused:${keyPart(chatId)}:${keyPart(userId)}`;
}

/** Sends (or holds back) refusals under the rules above. */
export class TelegramRefusals {
  constructor(
    private readonly options: {
      redis: RedisClient;
      keys: Keys;
      outbound: Queue<TelegramOutboundData>;
      botId: string;
      /** `telegram.refusal_interval_seconds` */
      intervalSeconds: number;
      log: Logger;
    },
  ) {}

  /**
   * Refuse `userId` in the chat, unless refused there within the interval or the chat has replies queued.
   * @throws when Redis refused the mark or the queueing (the caller retries the update)
   */
  async refuse(target: {
    chatId: string;
    threadId?: string;
    userId: string;
    sessionId: string;
    occurrenceId: string;
    text: string;
  }): Promise<RefusalOutcome> {
    const { redis, keys, outbound, botId, intervalSeconds, log } = this.options;
    const mark = refusalMarkKey(keys, botId, target.chatId, target.userId);
    if ((await redis.set(mark, String(Date.now()), 'EX', intervalSeconds, 'NX')) === null) {
      log.debug(
        { userId: target.userId, chatId: target.chatId },
        'user outside the allow-list was refused here within telegram.refusal_interval_seconds: not answered again',
      );
      return 'limited';
    }
    if ((await redis.zcard(keys.outboundOrder('telegram', target.chatId))) > 0) {
      await redis.del(mark);
      log.info({ userId: target.userId, chatId: target.chatId }, 'refusal dropped: the chat has replies queued, which go first');
      return 'dropped';
    }
    const data: TelegramOutboundData = {
      platform: 'telegram',
      chatId: target.chatId,
      ...(target.threadId ? { threadId: target.threadId } : {}),
      text: target.text,
      sessionId: target.sessionId,
      occurrenceId: target.occurrenceId,
    };
    try {
      await outbound.add('send', data, { jobId: outboundJobId(target.occurrenceId), priority: REFUSAL_PRIORITY });
    } catch (err) {
      await redis.del(mark).catch(() => {});
      throw err;
    }
    return 'queued';
  }
}
