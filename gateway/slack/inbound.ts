/**
 * What the gateway does with one Slack event or slash command: relay, refuse or
 * ignore. Like Telegram's inbound (gateway/telegram/inbound.ts), no command
 * logic lives here: `/loop …` typed as a message and `/hermes loop …` are both
 * stored as the text `/loop …` and interpreted by workers, whose chat command
 * rules never create a command turn (scheduler/session/chat-command.ts).
 *
 * - Relayed: a direct message (`message` in an `im` channel) and a mention
 *   (`app_mention`) of an allow-listed user, as input of session
 *   `slack:<channel>` — or `slack:<channel>:<thread_ts>` for a message in a
 *   thread, whose replies then go to that thread. Message id `slack-<event_id>`:
 *   the inbox job id dedupes an event Slack delivers again (`X-Slack-Retry-Num`),
 *   across gateway restarts, since the dedupe lives in Redis.
 * - `/hermes <sub> <args>` becomes `/<sub> <args>` (`/hermes` alone: `/help`),
 *   message id `slack-cmd-<trigger_id>`, in the channel's session.
 * - Refused: anyone not in `SLACK_ALLOWED_USERS`, at most once per user and
 *   channel per `slack.refusal_interval_seconds` (gateway/outbound/refusals.ts); the log names the
 *   user and channel, never the text.
 * - Ignored: the bot's own and other bots' messages, edits and other subtypes,
 *   channel messages that do not mention the bot (those arrive as `app_mention`).
 */
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import type { Keys } from '../../scheduler/store/keys.ts';
import type { HermesQueues } from '../../scheduler/store/queues.ts';
import type { Origin } from '../../scheduler/session/origin.ts';
import { ScheduleInputError } from '../../scheduler/errors/schedule-input-error.ts';
import { parseChatCommand } from '../../scheduler/session/chat-command.ts';
import { enqueueInput } from '../../scheduler/session/inbox.ts';
import { formatDeliveryTarget, routeOfTarget, type SlackTarget } from '../../scheduler/delivery/delivery-target.ts';
import { enqueueOutbound, type OutboundData } from '../../scheduler/delivery/outbound.ts';
import type { PlatformRefusals } from '../outbound/refusals.ts';

/** The refusal a user outside the allow-list gets. */
export const SLACK_REFUSAL_TEXT = 'Sorry, this app only answers its allow-listed users. Ask its owner to add your Slack user id.';

/** The one slash command of the app (a Slack app has a cap on slash commands). */
export const SLACK_SLASH_COMMAND = '/hermes';

/** What became of an event. */
export type SlackInboundOutcome = 'stored' | 'refused' | 'rejected' | 'ignored';

/** An Events API `event_callback` body (the fields read here). */
export interface SlackEventCallback {
  type: 'event_callback';
  event_id: string;
  team_id?: string;
  event: {
    type: string;
    subtype?: string;
    channel?: string;
    channel_type?: string;
    user?: string;
    bot_id?: string;
    text?: string;
    ts?: string;
    thread_ts?: string;
  };
}

/** A slash command's fields (form-encoded over HTTP, JSON over Socket Mode). */
export interface SlackSlashCommand {
  command: string;
  text?: string;
  user_id: string;
  channel_id: string;
  trigger_id: string;
}

/** What a slash command answers at once (the reply itself comes through the outbound queue). */
export interface SlashAnswer {
  outcome: SlackInboundOutcome;
  /** Shown to the caller only (`response_type: ephemeral`), or nothing. */
  ephemeral?: string;
}

/** What the inbound functions use. */
export interface SlackInboundDeps {
  redis: RedisClient;
  keys: Keys;
  queues: HermesQueues;
  outbound: Queue<OutboundData>;
  /** `SLACK_ALLOWED_USERS` */
  allowed: ReadonlySet<string>;
  refusals: PlatformRefusals;
  /** The bot's own user id (`auth.test`): its mentions are stripped, its messages ignored. */
  botUserId: string;
  /** `agent.max_prompt_chars` */
  maxChars: number;
  log: Logger;
}

/** Session id of a Slack conversation (and thread): spelled like its delivery target. */
export function slackSessionId(channel: string, threadTs?: string): string {
  return formatDeliveryTarget(slackTarget(channel, threadTs));
}

function slackTarget(channel: string, threadTs?: string): SlackTarget {
  return { kind: 'slack', chatId: channel, ...(threadTs ? { threadId: threadTs } : {}) };
}

/**
 * Store (or refuse, or ignore) one event. Resolves only after Redis confirmed
 * the write, so the caller may then acknowledge it.
 * @throws when Redis refused the write (the caller must not acknowledge)
 */
export async function storeSlackEvent(body: SlackEventCallback, deps: SlackInboundDeps): Promise<SlackInboundOutcome> {
  const ev = body.event;
  const log = deps.log.child({ eventId: body.event_id });
  const relevant = (ev.type === 'message' && ev.channel_type === 'im') || ev.type === 'app_mention';
  if (
    !relevant ||
    ev.subtype !== undefined ||
    ev.bot_id !== undefined ||
    !ev.user ||
    ev.user === deps.botUserId ||
    !ev.channel ||
    typeof ev.text !== 'string'
  ) {
    log.debug({ type: ev.type, subtype: ev.subtype }, 'Slack event ignored');
    return 'ignored';
  }
  const channel = ev.channel;
  // A message in a thread belongs to the thread's session; its replies go to the thread.
  const threadTs = ev.thread_ts;
  const sessionId = slackSessionId(channel, threadTs);
  if (!deps.allowed.has(ev.user)) {
    const outcome = await deps.refusals.refuse({
      chatId: channel,
      threadId: threadTs,
      userId: ev.user,
      sessionId,
      occurrenceId: `refusal:slack-${body.event_id}`,
      text: SLACK_REFUSAL_TEXT,
    });
    if (outcome !== 'limited')
      log.warn({ userId: ev.user, channel, refusal: outcome }, 'Slack message refused: user not in SLACK_ALLOWED_USERS');
    return 'refused';
  }
  const text = ev.text.replaceAll(`<@${deps.botUserId}>`, ' ').trim();
  const command = parseChatCommand(text);
  if (command.kind === 'other-bot') {
    log.debug({ channel, command: command.name }, 'Slack command for another bot ignored');
    return 'ignored';
  }
  return await store(deps, log, {
    sessionId,
    channel,
    threadTs,
    text: command.kind === 'command' ? command.text : text,
    messageId: `slack-${body.event_id}`,
  });
}

/**
 * Store one `/hermes` slash command as the chat command it names.
 * @throws when Redis refused the write
 */
export async function storeSlashCommand(cmd: SlackSlashCommand, deps: SlackInboundDeps): Promise<SlashAnswer> {
  const log = deps.log.child({ triggerId: cmd.trigger_id });
  if (cmd.command !== SLACK_SLASH_COMMAND) {
    log.debug({ command: cmd.command }, 'Slack slash command of another app ignored');
    return { outcome: 'ignored' };
  }
  const sessionId = slackSessionId(cmd.channel_id);
  if (!deps.allowed.has(cmd.user_id)) {
    if (!(await deps.refusals.mark(cmd.channel_id, cmd.user_id))) return { outcome: 'refused' };
    log.warn({ userId: cmd.user_id, channel: cmd.channel_id }, 'Slack slash command refused: user not in SLACK_ALLOWED_USERS');
    return { outcome: 'refused', ephemeral: SLACK_REFUSAL_TEXT };
  }
  const args = (cmd.text ?? '').trim();
  // `/hermes loop 10m x` → `/loop 10m x`: the worker's chat command rules apply as to any typed command.
  const text = args === '' ? '/help' : `/${args}`;
  const outcome = await store(deps, log, { sessionId, channel: cmd.channel_id, text, messageId: `slack-cmd-${cmd.trigger_id}` });
  return {
    outcome,
    ...(outcome === 'stored' ? { ephemeral: `\`${text.split(/\s/, 1)[0]}\` received; the answer follows in this channel.` } : {}),
  };
}

async function store(
  deps: SlackInboundDeps,
  log: Logger,
  input: { sessionId: string; channel: string; threadTs?: string; text: string; messageId: string },
): Promise<SlackInboundOutcome> {
  const origin: Origin = { surface: 'slack', route: routeOfTarget(slackTarget(input.channel, input.threadTs)) };
  try {
    const jobId = await enqueueInput(
      { redis: deps.redis, keys: deps.keys, queues: deps.queues, maxChars: deps.maxChars },
      { sessionId: input.sessionId, text: input.text, messageId: input.messageId, origin },
    );
    log.info({ sessionId: input.sessionId, jobId, chars: input.text.length }, 'Slack message stored');
    log.debug({ sessionId: input.sessionId, text: input.text }, 'Slack message text');
    return 'stored';
  } catch (err) {
    if (!(err instanceof ScheduleInputError)) throw err;
    log.warn({ sessionId: input.sessionId, field: err.field }, `Slack message rejected: ${err.message}`);
    await enqueueOutbound(deps.outbound, {
      platform: 'slack',
      chatId: input.channel,
      ...(input.threadTs ? { threadId: input.threadTs } : {}),
      text: err.message,
      sessionId: input.sessionId,
      occurrenceId: `rejected:${input.messageId}`,
    });
    return 'rejected';
  }
}
