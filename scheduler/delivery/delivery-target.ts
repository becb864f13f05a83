/**
 * Delivery targets: where a reply goes, as written by a user (`--deliver`,
 * `deliver` of `/api/cron/jobs`) and as stored on cron jobs and runs (docs/DESIGN.md §7
 * Delivery). This module is the one place the text form is parsed and spelled:
 *
 *   local                        the session's event stream only
 *   origin                       the route the job was created from, else local
 *   telegram:<chat>[:<thread>]   a Telegram chat (numeric id, `-100…` for supergroups and
 *                                channels, or `@username`), optionally a forum topic
 *   slack:<channel>[:<thread_ts>] a Slack conversation (`C…`, `G…`, `D…`), optionally a thread
 *                                (its parent message's `ts`, e.g. `1712345678.123456`)
 *   discord:<channel>[:<thread>] a Discord channel (snowflake id; a DM channel too),
 *                                optionally a thread of it (the thread's own channel id)
 *   http(s)://…                  a webhook (its address rule: `webhook-policy.ts`)
 *
 * Records keep the text form (`CronJob.deliver`, `CronDelivery.target`); code
 * that acts on a target parses it here into a {@link DeliveryTarget} and never
 * splits the string itself. A platform chat's session id is spelled like its
 * target (`telegram:<chat>[:<thread>]`, `gateway/telegram/inbound.ts`;
 * `slack:<channel>[:<thread_ts>]`, `gateway/slack/inbound.ts`; `discord:<channel>[:<thread>]`,
 * `gateway/discord/inbound.ts`).
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';

/** A Telegram chat, optionally one forum topic of it. Ids are kept as written (strings). */
export interface TelegramTarget {
  kind: 'telegram';
  /** Numeric chat id (negative for groups, `-100…` for supergroups and channels) or `@username`. */
  chatId: string;
  /** Forum topic (`message_thread_id`), decimal digits. */
  threadId?: string;
}

/** A Slack conversation, optionally one thread of it. */
export interface SlackTarget {
  kind: 'slack';
  /** Conversation id: `C…` (channel), `G…` (private), `D…` (direct message). */
  chatId: string;
  /** The thread's parent message `ts` (`thread_ts`), e.g. `1712345678.123456`. */
  threadId?: string;
}

/** A Discord channel, optionally one thread of it. Ids are snowflakes, kept as strings. */
export interface DiscordTarget {
  kind: 'discord';
  /** The channel (a guild text channel or a DM channel). */
  chatId: string;
  /** A thread of that channel: replies are posted there (a thread is a channel of its own). */
  threadId?: string;
}

/** A target on a messaging platform: its kind is the platform's name (`MessagingRoute.platform`). */
export type PlatformTarget = TelegramTarget | SlackTarget | DiscordTarget;

/** A parsed delivery target. */
export type DeliveryTarget =
  | { kind: 'local' }
  | { kind: 'origin' }
  | PlatformTarget
  | { kind: 'webhook'; /** The URL as written (only its scheme is checked here). */ url: string };

/**
 * A messaging route as stored on a schedule's origin (`Origin.route`): the
 * platform and chat a reply is sent to.
 */
export interface MessagingRoute {
  platform: string;
  chatId: string;
  threadId?: string;
}

const TELEGRAM_PREFIX = 'telegram:';
/** `telegram:<chat>[:<thread>]`: chat a (possibly negative) integer or `@` and 4+ username characters. */
const TELEGRAM_TARGET = /^telegram:(-?\d+|@[A-Za-z0-9_]{4,})(?::(\d+))?$/;
const SLACK_PREFIX = 'slack:';
/** `slack:<channel>[:<thread_ts>]`: an upper-case conversation id, a thread's `ts` (seconds.micros). */
const SLACK_TARGET = /^slack:([A-Z][A-Z0-9]{2,})(?::(\d{1,12}\.\d{1,9}))?$/;
const DISCORD_PREFIX = 'discord:';
/** `discord:<channel>[:<thread>]`: snowflakes, decimal digits (17–20 today; 1 to 20 accepted). */
const DISCORD_TARGET = /^discord:(\d{1,20})(?::(\d{1,20}))?$/;
const WEBHOOK_SCHEME = /^https?:\/\//i;

/**
 * Parse one delivery target (surrounding blanks are ignored).
 * @param text - the target as typed, e.g. `telegram:-1001234567890:42`
 * @param field - the input field named in the error (default `deliver`)
 * @throws ScheduleInputError naming the field and quoting the value: a
 *   `telegram:` target whose chat or thread is malformed, or an unknown kind
 */
export function parseDeliveryTarget(text: string, field = 'deliver'): DeliveryTarget {
  const t = text.trim();
  if (t === 'local' || t === 'origin') return { kind: t };
  if (t.startsWith(TELEGRAM_PREFIX)) {
    const m = TELEGRAM_TARGET.exec(t);
    if (!m) throw new ScheduleInputError(`Invalid delivery target "${t}": use telegram:<chat id>[:<thread id>].`, { field });
    return { kind: 'telegram', chatId: m[1]!, ...(m[2] ? { threadId: m[2] } : {}) };
  }
  if (t.startsWith(SLACK_PREFIX)) {
    const m = SLACK_TARGET.exec(t);
    if (!m)
      throw new ScheduleInputError(
        `Invalid delivery target "${t}": use slack:<channel id>[:<thread_ts>], e.g. slack:C0123ABCD:1712345678.123456.`,
        { field },
      );
    return { kind: 'slack', chatId: m[1]!, ...(m[2] ? { threadId: m[2] } : {}) };
  }
  if (t.startsWith(DISCORD_PREFIX)) {
    const m = DISCORD_TARGET.exec(t);
    if (!m) throw new ScheduleInputError(`Invalid delivery target "${t}": use discord:<channel id>[:<thread id>].`, { field });
    return { kind: 'discord', chatId: m[1]!, ...(m[2] ? { threadId: m[2] } : {}) };
  }
  if (WEBHOOK_SCHEME.test(t)) return { kind: 'webhook', url: t };
  throw new ScheduleInputError(
    `Unknown delivery target "${t}": use local, origin, telegram:<chat>[:<thread>], slack:<channel>[:<thread_ts>], discord:<channel>[:<thread>] or an http(s) URL.`,
    { field },
  );
}

/** The text form of a target; `parseDeliveryTarget(formatDeliveryTarget(t))` gives `t` back. */
export function formatDeliveryTarget(target: DeliveryTarget): string {
  switch (target.kind) {
    case 'local':
    case 'origin':
      return target.kind;
    case 'telegram':
    case 'slack':
    case 'discord':
      return target.threadId ? `${target.kind}:${target.chatId}:${target.threadId}` : `${target.kind}:${target.chatId}`;
    case 'webhook':
      return target.url;
  }
}

/** Platforms with a target form (a route of any other platform has no target). */
const TARGET_PLATFORMS: ReadonlySet<string> = new Set<PlatformTarget['kind']>(['telegram', 'slack', 'discord']);

/** The target a messaging route delivers to, or `undefined` for a platform without a target form. */
export function targetOfRoute(route: MessagingRoute): PlatformTarget | undefined {
  if (!TARGET_PLATFORMS.has(route.platform)) return undefined;
  return { kind: route.platform as PlatformTarget['kind'], chatId: route.chatId, ...(route.threadId ? { threadId: route.threadId } : {}) };
}

/** The messaging route of a platform target (what an origin stores). */
export function routeOfTarget(target: PlatformTarget): MessagingRoute {
  return { platform: target.kind, chatId: target.chatId, ...(target.threadId ? { threadId: target.threadId } : {}) };
}
