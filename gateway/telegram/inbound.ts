/**
 * What the gateway does with one Telegram update: relay, refuse or ignore.
 * No command logic lives here — `/loop`, `/heartbeat`, `/goal`, `/status`,
 * `/stop`, `/help` are relayed like any message and interpreted by workers;
 * the gateway only checks whom a command is addressed to (it alone knows the
 * bot's username).
 *
 * - An allow-listed user's text message is stored with `enqueueInput` as input
 *   of session `telegram:<chat>` (or `telegram:<chat>:<thread>` in a forum
 *   topic), message id `tg-<update_id>`: the inbox job id dedupes an update
 *   that Telegram delivers again.
 * - Anyone else gets a short refusal through the outbound queue, at most once per
 *   user and chat per `telegram.refusal_interval_seconds` and never ahead of allowed
 *   users' replies (gateway/outbound/refusals.ts), and a WARNING that names the user and chat but never
 *   the text (docs/DESIGN.md §8, §11); refused again within the interval: a debug line only.
 * - A message over `agent.max_prompt_chars` is answered with the limit and not relayed.
 * - A command addressed to another bot (`/stop@other_bot`) is ignored entirely;
 *   one addressed to this bot is stored without the `@username`.
 * - A photo, voice message, file, sticker… is answered "text only for now" (a refusal for users
 *   outside the allow-list); other updates without text are ignored (debug log).
 */
import type { Queue } from 'bullmq';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import type { Logger } from 'pino';
import type { Update } from 'grammy/types';
import { ScheduleInputError } from '../../scheduler/errors/schedule-input-error.ts';
import { parseChatCommand } from '../../scheduler/session/chat-command.ts';
import { enqueueInput } from '../../scheduler/session/inbox.ts';
import type { Keys } from '../../scheduler/store/keys.ts';
import type { Origin } from '../../scheduler/session/origin.ts';
import { formatDeliveryTarget, routeOfTarget } from '../../scheduler/delivery/delivery-target.ts';
import { enqueueTelegramOutbound, type TelegramOutboundData } from '../../scheduler/delivery/outbound.ts';
import type { HermesQueues } from '../../scheduler/store/queues.ts';
import type { AllowList } from './allow-list.ts';
import type { PlatformRefusals } from '../outbound/refusals.ts';

/** The refusal a user outside the allow-list gets. */
export const REFUSAL_TEXT = 'Sorry, this bot only answers its allow-listed users. Ask its owner to add your Telegram user id.';

/** The answer to a photo, voice message, file, sticker… from an allow-listed user. */
export const TEXT_ONLY_TEXT = 'Text only for now: please send your request as a text message.';

/** Message fields of content a user sent that is not text (answered with TEXT_ONLY_TEXT). */
const NON_TEXT_CONTENT = [
  'photo',
  'document',
  'voice',
  'audio',
  'video',
  'video_note',
  'sticker',
  'animation',
  'location',
  'contact',
  'poll',
  'venue',
  'dice',
];

/** What became of an update. */
export type InboundOutcome = 'stored' | 'refused' | 'rejected' | 'ignored';

/** What `storeUpdate` uses. */
export interface InboundDeps {
  redis: RedisClient;
  keys: Keys;
  queues: HermesQueues;
  outbound: Queue<TelegramOutboundData>;
  allow: AllowList;
  /** Refusals to users outside the allow-list (rate-limited, lowest priority). */
  refusals: PlatformRefusals;
  /** `agent.max_prompt_chars` */
  maxChars: number;
  /** The bot's username (from getMe): `/cmd@<username>` is for us, `/cmd@<other>` is ignored. */
  botUsername: string | undefined;
  /** Called after a message was stored for the agent (the typing indicator starts). */
  onStored?: (chatId: string, threadId: string | undefined) => void;
  log: Logger;
}

/** Session id of a Telegram chat (and forum topic): spelled like its delivery target, `telegram:<chat>[:<thread>]`. */
export function telegramSessionId(chatId: string, threadId?: string): string {
  return formatDeliveryTarget({ kind: 'telegram', chatId, ...(threadId ? { threadId } : {}) });
}

/** Refuse a user outside the allow-list: the refusal reply (rate-limited), and a warning unless that limit held it back. */
async function refuse(
  deps: InboundDeps,
  log: Logger,
  updateId: number,
  userId: number,
  chatId: string,
  threadId: string | undefined,
): Promise<'refused'> {
  const outcome = await deps.refusals.refuse({
    chatId,
    threadId,
    userId: String(userId),
    sessionId: telegramSessionId(chatId, threadId),
    occurrenceId: `refusal:tg-${updateId}`,
    text: REFUSAL_TEXT,
  });
  if (outcome !== 'limited') log.warn({ userId, chatId, refusal: outcome }, 'Telegram message refused: user not in TELEGRAM_ALLOWED_USERS');
  return 'refused';
}

/**
 * Store (or refuse) one update. Resolves only after Redis confirmed the write,
 * so the caller may then advance the offset.
 * @throws when Redis refused the write (the caller must not advance the offset)
 */
export async function storeUpdate(update: Update, deps: InboundDeps): Promise<InboundOutcome> {
  const msg = update.message;
  const log = deps.log.child({ updateId: update.update_id });
  if (msg && typeof msg.text !== 'string' && msg.from && !msg.from.is_bot && NON_TEXT_CONTENT.some((k) => k in msg)) {
    // Silence would look like a broken bot: say what works instead. Stored durably like any reply.
    const chatId = String(msg.chat.id);
    const threadId = msg.is_topic_message && msg.message_thread_id !== undefined ? String(msg.message_thread_id) : undefined;
    const allowed = deps.allow.allows(msg.from.id);
    const sessionId = telegramSessionId(chatId, threadId);
    if (!allowed) return await refuse(deps, log, update.update_id, msg.from.id, chatId, threadId);
    log.info({ chatId, allowed }, 'Telegram message without text answered');
    await enqueueTelegramOutbound(deps.outbound, {
      platform: 'telegram',
      chatId,
      threadId,
      text: TEXT_ONLY_TEXT,
      sessionId,
      occurrenceId: `text-only:tg-${update.update_id}`,
    });
    return 'rejected';
  }
  if (!msg || typeof msg.text !== 'string' || !msg.from) {
    log.debug('Telegram update without a text message ignored');
    return 'ignored';
  }
  const chatId = String(msg.chat.id);
  const threadId = msg.is_topic_message && msg.message_thread_id !== undefined ? String(msg.message_thread_id) : undefined;
  const sessionId = telegramSessionId(chatId, threadId);
  const reply = async (occurrenceId: string, text: string) =>
    enqueueTelegramOutbound(deps.outbound, { platform: 'telegram', chatId, threadId, text, sessionId, occurrenceId });

  // A command addressed to another bot (`/stop@other_bot`) is not for us: not stored, not run,
  // not sent to the model, not answered — whoever sent it (F16; the rule: scheduler/session/chat-command.ts).
  const command = parseChatCommand(msg.text, deps.botUsername);
  if (command.kind === 'other-bot') {
    log.debug({ chatId, command: command.name }, 'Telegram command for another bot ignored');
    return 'ignored';
  }
  if (!deps.allow.allows(msg.from.id)) return await refuse(deps, log, update.update_id, msg.from.id, chatId, threadId);
  const origin: Origin = { surface: 'telegram', route: routeOfTarget({ kind: 'telegram', chatId, ...(threadId ? { threadId } : {}) }) };
  try {
    const jobId = await enqueueInput(
      { redis: deps.redis, keys: deps.keys, queues: deps.queues, maxChars: deps.maxChars },
      { sessionId, text: command.kind === 'command' ? command.text : msg.text, messageId: `tg-${update.update_id}`, origin },
    );
    log.info({ sessionId, jobId, chars: msg.text.length }, 'Telegram message stored');
    deps.onStored?.(chatId, threadId);
    log.debug({ sessionId, text: msg.text }, 'Telegram message text');
    return 'stored';
  } catch (err) {
    if (!(err instanceof ScheduleInputError)) throw err;
    log.warn({ sessionId, field: err.field }, `Telegram message rejected: ${err.message}`);
    await reply(`rejected:tg-${update.update_id}`, err.message);
    return 'rejected';
  }
}
