/**
 * Discord's side of the ordered sender (gateway/outbound/ordered-sender.ts, where the order and
 * at-least-once rules live): how a reply is cut, posted, and how a failed post is read.
 *
 * - Parts: Discord's 2,000-character limit, cut at a line break (else a space) by `splitMessage`
 *   (gateway/telegram/split-message.ts); the parts joined are the reply exactly.
 * - Post: `POST /channels/{id}/messages` to the thread when the reply has one (a thread is a
 *   channel of its own), else to the channel; no mention is resolved (`allowed_mentions` empty),
 *   so an agent's text never pings `@everyone` or a role.
 * - Rate limits: `@discordjs/rest` keeps Discord's per-route buckets (`X-RateLimit-*`) and waits
 *   out a 429's `retry_after` itself before sending again; only a wait longer than
 *   `gateway.max_retry_after_seconds` reaches the sender (`rejectOnRateLimit`, discord-adapter.ts)
 *   as `rate_limited`, which moves the job back to delayed for that long.
 * - 4xx but 429 (unknown channel, missing access) is refused for good; 5xx and network errors are
 *   transient (the library retries them first, then the queue).
 */
import type { API } from '@discordjs/core';
import { DiscordAPIError, RateLimitError } from '@discordjs/rest';
import { PlatformError } from '../../scheduler/errors/platform-error.ts';
import { statusText } from '../../scheduler/errors/upstream-text.ts';
import type { OutboundData } from '../../scheduler/delivery/outbound.ts';
import type { PlatformSend, SendFailure } from '../outbound/ordered-sender.ts';
import { splitMessage } from '../telegram/split-message.ts';

/** Discord's limit for one message's content. */
export const DISCORD_MESSAGE_LIMIT = 2000;

/** The parts of a reply. */
export function discordParts(text: string): string[] {
  return splitMessage(text, DISCORD_MESSAGE_LIMIT);
}

/** How the sender treats a failed post. */
export function classifyDiscordError(err: unknown): SendFailure {
  if (err instanceof RateLimitError) return { kind: 'rate_limited', retryAfterSeconds: Math.ceil(err.retryAfter / 1000) };
  if (err instanceof DiscordAPIError && err.status >= 400 && err.status < 500) {
    return {
      kind: 'refused',
      // The message only: the error's URL may hold an interaction token.
      error: new PlatformError(`Discord refused the message (${statusText(err.status, err.message)}).`, {
        platform: 'discord',
        method: 'createMessage',
        errorCode: err.status,
        cause: err,
      }),
    };
  }
  return { kind: 'transient' };
}

/** The platform side of Discord's sender over `api`. */
export function discordSend(api: API): PlatformSend {
  return {
    platform: 'discord',
    parts: discordParts,
    async send(data: OutboundData, part: string, signal: AbortSignal | undefined) {
      const sent = await api.channels.createMessage(
        data.threadId ?? data.chatId,
        { content: part, allowed_mentions: { parse: [] } },
        signal ? { signal } : {},
      );
      return sent.id;
    },
    classify: classifyDiscordError,
  };
}
