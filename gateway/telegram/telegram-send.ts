/**
 * Telegram's side of the ordered sender (gateway/outbound/ordered-sender.ts, where the order and
 * at-least-once rules live) for `outbound-telegram`: how a reply is cut, sent, and how a failed
 * `sendMessage` is read.
 *
 * - Parts: Markdown becomes Telegram entities, split at 4096 characters, each part carrying only
 *   whole entities (render-markdown.ts). A part whose formatting Telegram refuses (400 about an
 *   entity) is sent again as the same text, plain.
 * - Topics: sent with the topic's `message_thread_id`, none for the General topic (forum-topic.ts).
 * - 429 Too Many Requests is waited out by grammY's auto-retry plugin (telegram-adapter.ts) up to
 *   `gateway.max_retry_after_seconds`; a 429 that still reaches the sender (a longer
 *   `retry_after`, or the plugin's attempts spent) moves the job back to delayed for exactly its
 *   `retry_after` (`deferEveryRateLimit`).
 * - 4xx but 429 (400 chat not found, 403 bot blocked, bad thread), and a 429 without
 *   `retry_after`, are refused for good; a 5xx is transient, and Telegram answered it, so the part
 *   did not arrive; a network error is transient and the part may have arrived.
 * - Message ids are Telegram's numbers; each sent part ends the chat's typing indicator (`onSent`).
 */
import { GrammyError, type Api } from 'grammy';
import { PlatformError } from '../../scheduler/errors/platform-error.ts';
import { statusText } from '../../scheduler/errors/upstream-text.ts';
import type { OutboundData } from '../../scheduler/delivery/outbound.ts';
import type { PlatformSend, SendFailure } from '../outbound/ordered-sender.ts';
import { grammySignal } from './poller.ts';
import { renderMarkdown, splitFormatted, type FormattedText } from './render-markdown.ts';
import { threadParams } from './forum-topic.ts';

/** How the sender treats a failed `sendMessage`. */
export function classifyTelegramError(err: unknown): SendFailure {
  if (!(err instanceof GrammyError)) return { kind: 'transient' };
  const retryAfter = err.parameters?.retry_after;
  if (err.error_code === 429 && typeof retryAfter === 'number') return { kind: 'rate_limited', retryAfterSeconds: retryAfter };
  const error = new PlatformError(`Telegram refused the reply (${statusText(err.error_code, err.description)}).`, {
    platform: 'telegram',
    method: 'sendMessage',
    errorCode: err.error_code,
    cause: err,
  });
  if (err.error_code >= 400 && err.error_code < 500) return { kind: 'refused', error };
  return { kind: 'transient', error, answered: true };
}

/**
 * The platform side of Telegram's sender over `api` (grammY with the auto-retry transformer).
 * @param onSent called after a part was sent to a chat (ends its typing indicator)
 */
export function telegramSend(
  api: Api,
  onSent?: (chatId: string, threadId: string | undefined) => void,
): PlatformSend<FormattedText, number> {
  return {
    platform: 'telegram',
    parts: (text) => splitFormatted(renderMarkdown(text)),
    async send(data: OutboundData, part: FormattedText, signal: AbortSignal | undefined, log) {
      const thread = threadParams(data.threadId);
      const post = (entities: FormattedText['entities']) =>
        api.sendMessage(
          data.chatId,
          part.text,
          { ...thread, ...(entities.length ? { entities } : {}) },
          signal ? grammySignal(signal) : undefined,
        );
      try {
        return (await post(part.entities)).message_id;
      } catch (err) {
        // Telegram refused the formatting (an entity it does not accept): the same text, plain.
        if (!(err instanceof GrammyError && err.error_code === 400 && /entit/i.test(err.description) && part.entities.length > 0))
          throw err;
        log.warn({ err: err.description }, 'Telegram refused the formatting; sending the part as plain text');
        return (await post([])).message_id;
      }
    },
    classify: classifyTelegramError,
    recordedId: Number,
    deferEveryRateLimit: true,
    afterPart: (data) => onSent?.(data.chatId, data.threadId),
  };
}
