/**
 * Refusals to Slack users outside the allow-list, under Telegram's rules
 * (gateway/telegram/refusals.ts, where they are explained): at most one per user
 * and channel per `slack.refusal_interval_seconds` (a Redis mark, `SET NX EX`,
 * fleet-wide and across restarts), dropped while the channel has replies queued,
 * otherwise queued at BullMQ's lowest priority.
 */
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { keyPart, type Keys } from '../../scheduler/store/keys.ts';
import { outboundJobId, type OutboundData } from '../../scheduler/delivery/outbound.ts';
import { REFUSAL_PRIORITY, type RefusalOutcome } from '../telegram/refusals.ts';

/** The mark of a refusal sent to `userId` in `channel` of workspace app `appId`. Spelled like scheduler/store/keys.ts. */
export function slackRefusalMarkKey(keys: Keys, appId: string, channel: string, userId: string): string {
  return `${keys.basePrefix}:slack:${keyPart(appId)}:refused:${keyPart(channel)}:${keyPart(userId)}`;
}

export class SlackRefusals {
  constructor(
    private readonly options: {
      redis: RedisClient;
      keys: Keys;
      outbound: Queue<OutboundData>;
      /** The bot's id (`auth.test` `bot_id`, else its user id): marks are per app. */
      appId: string;
      /** `slack.refusal_interval_seconds` */
      intervalSeconds: number;
      log: Logger;
    },
  ) {}

  /**
   * Take the refusal mark of `userId` in `channel` (the caller answers it itself, e.g. a slash
   * command's ephemeral response).
   * @returns `queued` when this refusal may be sent, `limited` when one was sent within the interval
   */
  async mark(channel: string, userId: string): Promise<'queued' | 'limited'> {
    const { redis, keys, appId, intervalSeconds } = this.options;
    const set = await redis.set(slackRefusalMarkKey(keys, appId, channel, userId), String(Date.now()), 'EX', intervalSeconds, 'NX');
    return set === null ? 'limited' : 'queued';
  }

  /**
   * Refuse `userId` in the channel through the outbound queue, unless refused there within the
   * interval or the channel has replies queued.
   * @throws when Redis refused the mark or the queueing (the event is not acknowledged; Slack retries)
   */
  async refuse(target: {
    channel: string;
    threadTs?: string;
    userId: string;
    sessionId: string;
    occurrenceId: string;
    text: string;
  }): Promise<RefusalOutcome> {
    const { redis, keys, outbound, appId, log } = this.options;
    if ((await this.mark(target.channel, target.userId)) === 'limited') {
      log.debug(
        { userId: target.userId, channel: target.channel },
        'user outside the allow-list was refused here within slack.refusal_interval_seconds: not answered again',
      );
      return 'limited';
    }
    const mark = slackRefusalMarkKey(keys, appId, target.channel, target.userId);
    if ((await redis.zcard(keys.outboundOrder('slack', target.channel))) > 0) {
      await redis.del(mark);
      return 'dropped';
    }
    const data: OutboundData = {
      platform: 'slack',
      chatId: target.channel,
      ...(target.threadTs ? { threadId: target.threadTs } : {}),
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
