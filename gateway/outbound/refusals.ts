/**
 * Refusals to platform users outside the allow-list, so that a stranger's spam
 * costs the bot almost nothing and never delays the owner's replies. The rules,
 * for every platform (Telegram, Slack, Discord):
 *
 * - At most one per user and chat per `<platform>.refusal_interval_seconds`
 *   (default one hour): a mark in Redis (`SET NX EX`, `Keys.refusalMark`), so it
 *   holds across gateway restarts and for every gateway of a fleet. Messages
 *   within the interval are not answered (logged at debug).
 * - Never ahead of allowed users' replies: when the chat already has replies
 *   queued, the refusal is dropped (and the mark given back, so a later
 *   message may be answered); otherwise it is queued at BullMQ's lowest
 *   priority and without a place in the chat's order, which it only takes
 *   when the sender picks it up — after every reply registered before then
 *   (gateway/outbound/ordered-sender.ts).
 *
 * The mark is set before the refusal is queued; a queueing that fails gives
 * it back and throws, so the platform's retry of the event tries again.
 */
import type { JobsOptions } from 'bullmq';
import type { Logger } from 'pino';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import type { Keys } from '../../scheduler/store/keys.ts';
import { outboundJobId, type OutboundData } from '../../scheduler/delivery/outbound.ts';

/** BullMQ's lowest priority (2^21 - 1): taken after every job without or with a higher priority. */
export const REFUSAL_PRIORITY = 2_097_151;

/** What became of a refusal. */
export type RefusalOutcome = 'queued' | 'limited' | 'dropped';

/** Where refusals are queued: the platform's outbound queue (a BullMQ `Queue` of its outbound data). */
export interface RefusalQueue {
  add(name: 'send', data: OutboundData, options: JobsOptions): Promise<unknown>;
}

/** Settings of one platform's refusals. */
export interface RefusalsOptions {
  /** The platform's name, as on a messaging route and in the outbound data (`telegram`, `slack`, `discord`). */
  platform: string;
  redis: RedisClient;
  keys: Keys;
  outbound: RefusalQueue;
  /** The bot's id on the platform: marks are per bot (per app on Slack). */
  botId: string;
  /** `<platform>.refusal_interval_seconds` */
  intervalSeconds: number;
  log: Logger;
}

/** A refusal to send: where, to whom, and its text. */
export interface RefusalTarget {
  chatId: string;
  /** Forum topic or thread the refused message came from. */
  threadId?: string;
  userId: string;
  sessionId: string;
  occurrenceId: string;
  text: string;
}

/** Sends (or holds back) refusals under the rules above. */
export class PlatformRefusals {
  constructor(private readonly options: RefusalsOptions) {}

  /**
   * Take the mark of a refusal to `userId` in `chatId`, for a refusal the caller answers itself
   * (a slash or application command's private answer).
   * @returns false when that user was refused there within the interval (say nothing)
   */
  async mark(chatId: string, userId: string): Promise<boolean> {
    const { redis, intervalSeconds } = this.options;
    return (await redis.set(this.markKey(chatId, userId), String(Date.now()), 'EX', intervalSeconds, 'NX')) !== null;
  }

  /**
   * Refuse `userId` in the chat through the outbound queue, unless refused there within the
   * interval or the chat has replies queued.
   * @throws when Redis refused the mark or the queueing (the caller's event is retried)
   */
  async refuse(target: RefusalTarget): Promise<RefusalOutcome> {
    const { platform, redis, keys, outbound, log } = this.options;
    if (!(await this.mark(target.chatId, target.userId))) {
      log.debug(
        { userId: target.userId, chatId: target.chatId },
        `user outside the allow-list was refused here within ${platform}.refusal_interval_seconds: not answered again`,
      );
      return 'limited';
    }
    const mark = this.markKey(target.chatId, target.userId);
    if ((await redis.zcard(keys.outboundOrder(platform, target.chatId))) > 0) {
      await redis.del(mark);
      log.info({ userId: target.userId, chatId: target.chatId }, 'refusal dropped: the chat has replies queued, which go first');
      return 'dropped';
    }
    const data: OutboundData = {
      platform,
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

  private markKey(chatId: string, userId: string): string {
    return this.options.keys.refusalMark(this.options.platform, this.options.botId, chatId, userId);
  }
}
