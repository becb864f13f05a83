/**
 * What the gateway does with one Discord event: relay, refuse or ignore. The
 * rules are Telegram's (gateway/telegram/inbound.ts); no command logic lives
 * here — a typed `/loop …` and an invoked application command are relayed as
 * text and interpreted by workers, with the agent runner only.
 *
 * - A message is for the bot when it is a direct message, or mentions the bot
 *   in a guild channel (the mention is removed from the text); other messages,
 *   and those of bots and webhooks, are ignored.
 * - An allow-listed user's message is stored with `enqueueInput` as input of
 *   session `discord:<channel>[:<thread>]`, message id `dc-<message id>`: the
 *   inbox job id dedupes an event Discord replays after a resume.
 * - An application command (`/loop`, `/heartbeat`, `/goal`, `/stop`, `/status`)
 *   is stored the same way (message id `dc-i-<interaction id>`) and only then
 *   acknowledged with the command's text.
 * - Anyone else gets at most one refusal per user and channel per
 *   `discord.refusal_interval_seconds` (gateway/outbound/refusals.ts), and a WARNING naming the
 *   user and channel but never the text.
 */
import type { Queue } from 'bullmq';
import {
  InteractionType,
  MessageFlags,
  type API,
  type APIChatInputApplicationCommandInteraction,
  type GatewayInteractionCreateDispatchData,
  type GatewayMessageCreateDispatchData,
} from '@discordjs/core';
import type { Logger } from 'pino';
import { ScheduleInputError } from '../../scheduler/errors/schedule-input-error.ts';
import { parseChatCommand } from '../../scheduler/session/chat-command.ts';
import { enqueueInput } from '../../scheduler/session/inbox.ts';
import type { Keys } from '../../scheduler/store/keys.ts';
import type { HermesQueues } from '../../scheduler/store/queues.ts';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import type { Origin } from '../../scheduler/session/origin.ts';
import { formatDeliveryTarget, routeOfTarget, type DiscordTarget } from '../../scheduler/delivery/delivery-target.ts';
import { enqueueOutbound, type OutboundData } from '../../scheduler/delivery/outbound.ts';
import type { AllowList } from '../telegram/allow-list.ts';
import { commandText } from './application-commands.ts';
import { targetOfChannel, type ChannelRoutes } from './channel-route.ts';
import type { PlatformRefusals } from '../outbound/refusals.ts';

/** The refusal a user outside the allow-list gets. */
export const REFUSAL_TEXT = 'Sorry, this bot only answers its allow-listed users. Ask its owner to add your Discord user id.';

/** The answer to a message with attachments and no text. */
export const TEXT_ONLY_TEXT = 'Text only for now: please send your request as a text message.';

/** What became of an event. */
export type InboundOutcome = 'stored' | 'refused' | 'rejected' | 'ignored';

/** What the handlers use. */
export interface DiscordInboundDeps {
  redis: RedisClient;
  keys: Keys;
  queues: HermesQueues;
  outbound: Queue<OutboundData>;
  api: API;
  allow: AllowList;
  refusals: PlatformRefusals;
  channels: ChannelRoutes;
  /** The bot's user id (mentions). */
  botId: string;
  /** `agent.max_prompt_chars` */
  maxChars: number;
  log: Logger;
}

/** Session id of a Discord channel or thread: spelled like its delivery target. */
export function discordSessionId(target: DiscordTarget): string {
  return formatDeliveryTarget(target);
}

/** The text of a message without the bot's mentions (`<@id>`, `<@!id>`), or `undefined` when it is not for the bot. */
export function textForBot(
  msg: Pick<GatewayMessageCreateDispatchData, 'content' | 'guild_id' | 'mentions'>,
  botId: string,
): string | undefined {
  const mentioned = msg.mentions?.some((u) => u.id === botId) || new RegExp(`<@!?${botId}>`).test(msg.content);
  if (msg.guild_id !== undefined && !mentioned) return undefined;
  return msg.content.replace(new RegExp(`<@!?${botId}>`, 'g'), ' ').trim();
}

/**
 * Store (or refuse, or ignore) one MESSAGE_CREATE. Resolves only after Redis took what was stored.
 * @throws when Redis refused a write (the event is not confirmed and is replayed)
 */
export async function storeMessage(msg: GatewayMessageCreateDispatchData, deps: DiscordInboundDeps): Promise<InboundOutcome> {
  const log = deps.log.child({ messageId: msg.id });
  if (msg.author.bot || msg.webhook_id !== undefined) return 'ignored';
  const text = textForBot(msg, deps.botId);
  if (text === undefined) return 'ignored';
  const target = await deps.channels.targetOf(msg.channel_id, msg.guild_id !== undefined);
  const sessionId = discordSessionId(target);
  const userId = msg.author.id;
  const reply = (occurrenceId: string, body: string) =>
    enqueueOutbound(deps.outbound, {
      platform: 'discord',
      chatId: target.chatId,
      ...(target.threadId ? { threadId: target.threadId } : {}),
      text: body,
      sessionId,
      occurrenceId,
    });
  const command = parseChatCommand(text);
  if (command.kind === 'other-bot') {
    log.debug({ channelId: msg.channel_id, command: command.name }, 'Discord command for another bot ignored');
    return 'ignored';
  }
  if (!deps.allow.allows(userId)) {
    const outcome = await deps.refusals.refuse({
      chatId: target.chatId,
      threadId: target.threadId,
      userId,
      sessionId,
      occurrenceId: `refusal:dc-${msg.id}`,
      text: REFUSAL_TEXT,
    });
    if (outcome !== 'limited')
      log.warn({ userId, channelId: msg.channel_id, refusal: outcome }, 'Discord message refused: user not in DISCORD_ALLOWED_USERS');
    return 'refused';
  }
  if (text.length === 0) {
    if ((msg.attachments?.length ?? 0) === 0 && (msg.sticker_items?.length ?? 0) === 0) return 'ignored';
    await reply(`text-only:dc-${msg.id}`, TEXT_ONLY_TEXT);
    return 'rejected';
  }
  const origin: Origin = { surface: 'discord', route: routeOfTarget(target) };
  try {
    const jobId = await enqueueInput(
      { redis: deps.redis, keys: deps.keys, queues: deps.queues, maxChars: deps.maxChars },
      { sessionId, text: command.kind === 'command' ? command.text : text, messageId: `dc-${msg.id}`, origin },
    );
    log.info({ sessionId, jobId, chars: text.length }, 'Discord message stored');
    log.debug({ sessionId, text }, 'Discord message text');
    return 'stored';
  } catch (err) {
    if (!(err instanceof ScheduleInputError)) throw err;
    log.warn({ sessionId, field: err.field }, `Discord message rejected: ${err.message}`);
    await reply(`rejected:dc-${msg.id}`, err.message);
    return 'rejected';
  }
}

/**
 * Store (or refuse) one INTERACTION_CREATE of an application command, then acknowledge it.
 * An acknowledgement Discord refuses (a replayed interaction, an expired token) is logged, not thrown.
 * @throws when Redis refused a write (the event is not confirmed and is replayed)
 */
export async function storeInteraction(
  interaction: GatewayInteractionCreateDispatchData,
  deps: DiscordInboundDeps,
): Promise<InboundOutcome> {
  if (interaction.type !== InteractionType.ApplicationCommand) return 'ignored';
  const command = interaction as APIChatInputApplicationCommandInteraction;
  const log = deps.log.child({ interactionId: command.id });
  const user = command.member?.user ?? command.user;
  const channel = command.channel;
  if (!user || !channel) return 'ignored';
  const answer = async (content: string, ephemeral: boolean) => {
    try {
      await deps.api.interactions.reply(command.id, command.token, { content, ...(ephemeral ? { flags: MessageFlags.Ephemeral } : {}) });
    } catch (err) {
      // Never the error's URL: it holds the interaction token.
      log.info({ err: (err as Error).message }, 'Discord interaction not acknowledged (replayed or expired)');
    }
  };
  const text = commandText(command);
  if (text === undefined) {
    await answer('Unknown command.', true);
    return 'ignored';
  }
  const target = targetOfChannel(channel);
  const sessionId = discordSessionId(target);
  if (!deps.allow.allows(user.id)) {
    // Interactions answer only the user who invoked them (ephemeral); still at most one per interval.
    if (await deps.refusals.mark(target.chatId, user.id)) {
      log.warn({ userId: user.id, channelId: channel.id }, 'Discord command refused: user not in DISCORD_ALLOWED_USERS');
      await answer(REFUSAL_TEXT, true);
    }
    return 'refused';
  }
  const origin: Origin = { surface: 'discord', route: routeOfTarget(target) };
  try {
    const jobId = await enqueueInput(
      { redis: deps.redis, keys: deps.keys, queues: deps.queues, maxChars: deps.maxChars },
      { sessionId, text, messageId: `dc-i-${command.id}`, origin },
    );
    log.info({ sessionId, jobId, command: command.data.name }, 'Discord command stored');
  } catch (err) {
    if (!(err instanceof ScheduleInputError)) throw err;
    await answer(err.message, true);
    return 'rejected';
  }
  await answer(text, false);
  return 'stored';
}
