/**
 * Refusals to Discord users outside the allow-list — the rules of Telegram's
 * (gateway/telegram/refusals.ts), applied per user and channel: at most one
 * per `discord.refusal_interval_seconds` (a fleet-wide Redis mark, `SET NX EX`),
 * dropped (mark given back) while the channel has replies queued, otherwise
 * queued at BullMQ's lowest priority without a place in the channel's order.
 */
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import type { Keys } from '../../scheduler/store/keys.ts';
import { outboundJobId, type OutboundData } from '../../scheduler/delivery/outbound.ts';
import { REFUSAL_PRIORITY, type RefusalOutcome } from '../telegram/refusals.ts';

/** Settings of the refusals. */
export interface DiscordRefusalsOptions {
  redis: RedisClient;
  keys: Keys;
  outbound: Queue<OutboundData>;
  botId: string;
  /** `discord.refusal_interval_seconds` */
  intervalSeconds: number;
  log: Logger;
}

export class DiscordRefusals {
  constructor(private readonly options: DiscordRefusalsOptions) {}

  /**
   * Take the mark of a refusal to `userId` in `channelId`.
   * @returns false when that user was refused there within the interval (say nothing)
   */
  async mark(channelId: string, userId: string): Promise<boolean> {
    const { redis, keys, botId, intervalSeconds } = this.options;
    return (await redis.set(keys.discordRefusalMark(botId, channelId, userId), String(Date.now()), 'EX', intervalSeconds, 'NX')) !== null;
  }

  /** Give a mark back (the refusal was not sent). */
  async unmark(channelId: string, userId: string): Promise<void> {
    const { redis, keys, botId } = this.options;
    await redis.del(keys.discordRefusalMark(botId, channelId, userId));
  }

  /**
   * Refuse `userId` in the channel with a message, unless refused there within the interval or the channel has replies queued.
   * @throws when Redis refused the mark or the queueing (the event is not confirmed and is replayed)
   */
  async refuse(target: {
    channelId: string;
    threadId?: string;
    userId: string;
    sessionId: string;
    occurrenceId: string;
    text: string;
  }): Promise<RefusalOutcome> {
    const { redis, keys, outbound, log } = this.options;
    if (!(await this.mark(target.channelId, target.userId))) {
      log.debug(
        { userId: target.userId, channelId: target.channelId },
        'user outside the allow-list was refused here within discord.refusal_interval_seconds: not answered again',
      );
      return 'limited';
    }
    if ((await redis.zcard(keys.outboundOrder('discord', target.channelId))) > 0) {
      await this.unmark(target.channelId, target.userId);
      log.info({ userId: target.userId, channelId: target.channelId }, 'refusal dropped: the channel has replies queued, which go first');
      return 'dropped';
    }
    const data: OutboundData = {
      platform: 'discord',
      chatId: target.channelId,
      ...(target.threadId ? { threadId: target.threadId } : {}),
      text: target.text,
      sessionId: target.sessionId,
      occurrenceId: target.occurrenceId,
    };
    try {
      await outbound.add('send', data, { jobId: outboundJobId(target.occurrenceId), priority: REFUSAL_PRIORITY });
    } catch (err) {
      await this.unmark(target.channelId, target.userId).catch(() => {});
      throw err;
    }
    return 'queued';
  }
}
