/**
 * Slash commands that arrive as session input (chat, Telegram): `/loop`
 * (alias `/proactive`), `/heartbeat` (alias `/hb`), `/status`, `/stop`,
 * `/start`, `/help`, and those other modules register (`/goal`). Their rules
 * live in `scheduler/`; this only routes.
 *
 * Chat input can never create a command turn: every schedule made here runs
 * the `agent` runner.
 */
import { parseLoopArgs, LOOP_HELP } from '../../scheduler/loop/loop-command.ts';
import { parseHeartbeatArgs, HEARTBEAT_HELP } from '../../scheduler/loop/heartbeat-command.ts';
import { parseChatCommand, shellOnlyFlag, shellOnlyReply } from '../../scheduler/session/chat-command.ts';
import type { Origin } from '../../scheduler/session/origin.ts';
import type { LoopKind } from '../../scheduler/tick/tick-kind.ts';
import type { LoopService } from '../../scheduler/loop/loop-service.ts';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { ownValue } from '../../scheduler/names/name-table.ts';

/** The commands that make a schedule (and so could be asked for a command turn). */
const SCHEDULE_COMMANDS = new Set(['loop', 'proactive', 'heartbeat', 'hb', 'goal']);

/** Context a slash command runs in. */
export interface SlashContext {
  sessionId: string;
  origin: Origin;
  schedules: LoopService;
  config: HermesConfig;
  /** Extra commands (e.g. `/goal`) registered by other modules. */
  extra?: Record<string, (args: string) => Promise<string>>;
  /** Abort the session's turn running on any worker (its tools and their processes with it); used by `/stop`. */
  abortRunningTurn?: () => Promise<unknown>;
}

/** What became of a text sent to a session. */
export type SlashOutcome =
  | { kind: 'reply'; text: string }
  /** A command addressed to another bot (`/stop@other_bot`): not run, not sent to the model, not answered (F16). */
  | { kind: 'ignored'; reason: 'other-bot' }
  /** Not a command: the text goes to the agent as a message. */
  | { kind: 'message' };

/**
 * Run a slash command. Every command goes through `parseChatCommand`
 * (scheduler/session/chat-command.ts), the one place that decides what is a command
 * and for whom. `/start` and `/help` answer a short help text; a command no
 * one here knows answers "unknown command" — neither becomes a model turn (F21).
 * @returns the reply, `ignored` for a command addressed to another bot, or
 *   `message` when the text is not a command
 * @throws ScheduleInputError for bad arguments; StoreUnavailableError when Redis refused a write
 */
export async function runSlashCommand(text: string, ctx: SlashContext): Promise<SlashOutcome> {
  const parsed = parseChatCommand(text);
  if (parsed.kind === 'message') return { kind: 'message' };
  if (parsed.kind === 'other-bot') return { kind: 'ignored', reason: 'other-bot' };
  const reply = (t: string): SlashOutcome => ({ kind: 'reply', text: t });
  const { name: cmd, args } = parsed;
  const { schedules, sessionId } = ctx;
  // `--run`, `--command`, `--script` are the shell's: said so, and nothing is set (chat-command.ts).
  const shellFlag = SCHEDULE_COMMANDS.has(cmd) ? shellOnlyFlag(args) : undefined;
  if (shellFlag) return reply(shellOnlyReply(cmd, shellFlag, sessionId));
  const runner = { kind: 'agent' as const };
  const control = async (kind: LoopKind, action: string, help: string) => {
    switch (action) {
      case 'status':
        return await schedules.status(sessionId, kind);
      case 'pause':
        return await schedules.pause(sessionId, kind);
      case 'resume':
        return await schedules.resume(sessionId, kind);
      case 'stop':
        return await schedules.stop(sessionId, kind);
      default:
        return help;
    }
  };
  switch (cmd) {
    case 'loop':
    case 'proactive': {
      const c = parseLoopArgs(args, {
        minIntervalSeconds: ctx.config.loops.min_interval_seconds,
        maxPromptChars: ctx.config.agent.max_prompt_chars,
      });
      if (c.action !== 'set') return reply(await control('loop', c.action, LOOP_HELP));
      return reply(await schedules.set(sessionId, 'loop', c, { origin: ctx.origin, runner }));
    }
    case 'heartbeat':
    case 'hb': {
      const c = parseHeartbeatArgs(args, {
        minIntervalSeconds: ctx.config.heartbeat.min_interval_seconds,
        maxPromptChars: ctx.config.agent.max_prompt_chars,
      });
      if (c.action !== 'set') return reply(await control('heartbeat', c.action, HEARTBEAT_HELP));
      return reply(await schedules.set(sessionId, 'heartbeat', { ...c, times: null, until: null }, { origin: ctx.origin, runner }));
    }
    case 'status': {
      const lines = [await schedules.status(sessionId, 'loop'), await schedules.status(sessionId, 'heartbeat')];
      if (ctx.extra?.goal) lines.push(await ctx.extra.goal('status'));
      return reply(lines.join('\n'));
    }
    case 'stop': {
      const lines = [await schedules.stop(sessionId, 'loop'), await schedules.stop(sessionId, 'heartbeat')];
      if (ctx.extra?.goal) lines.push(await ctx.extra.goal('pause'));
      // A turn already running (a tick calling a slow tool) stops too, not only the next ones.
      await ctx.abortRunningTurn?.();
      return reply(lines.join('\n'));
    }
    case 'start':
    case 'help':
      return reply(shortHelp(ctx));
    default: {
      const extra = ownValue(ctx.extra, cmd);
      if (extra) return reply(await extra(args));
      return reply(`Unknown command /${cmd}. Send /help for the commands; anything that is not a command goes to the agent.`);
    }
  }
}

/** The short help of `/start` and `/help`: the commands and the allow-list status. */
export function shortHelp(ctx: Pick<SlashContext, 'origin' | 'config'>): string {
  const { telegram, slack, discord } = ctx.config;
  const users = (n: number) => `${n} user${n === 1 ? '' : 's'}`;
  const access =
    ctx.origin.surface === 'telegram'
      ? `You are on this bot's allow-list (${users(telegram.allowed_users.length)} allowed in TELEGRAM_ALLOWED_USERS).`
      : ctx.origin.surface === 'slack'
        ? `You are on this app's allow-list (${users(slack.allowed_users.length)} allowed in SLACK_ALLOWED_USERS).`
        : ctx.origin.surface === 'discord'
          ? `You are on this bot's allow-list (${users(discord.allowed_users.length)} allowed in DISCORD_ALLOWED_USERS).`
          : platformsLine(ctx.config);
  // In Slack every command is a subcommand of the app's one slash command (`/hermes loop …`).
  const c = (name: string) => (ctx.origin.surface === 'slack' ? `/hermes ${name}` : `/${name}`);
  return [
    'Hermes runs schedules for this chat; they keep firing when you are away.',
    `${c('loop')} [every] <interval> <prompt> — a recurring task (${c('loop')} help for more)`,
    `${c('heartbeat')} every <interval> <prompt> — a regular check-in (alias ${c('hb')})`,
    `${c('goal')} <text> — a standing goal the agent works toward`,
    `${c('status')} — the schedules of this chat · ${c('stop')} — stop them`,
    `${c('help')} — this text. Anything else you write goes to the agent.`,
    access,
  ].join('\n');
}

/** The chat platforms this configuration serves, each with its allow-list's size. */
function platformsLine(config: SlashContext['config']): string {
  const on = [
    ['Telegram', config.telegram.bot_token, config.telegram.allowed_users.length, 'TELEGRAM_ALLOWED_USERS'],
    ['Slack', config.slack.bot_token, config.slack.allowed_users.length, 'SLACK_ALLOWED_USERS'],
    ['Discord', config.discord.bot_token, config.discord.allowed_users.length, 'DISCORD_ALLOWED_USERS'],
  ] as const;
  const parts = on.filter(([, token]) => token).map(([name, , n, env]) => `${name}: ${n} allow-listed user${n === 1 ? '' : 's'} (${env})`);
  return parts.length === 0 ? 'No chat platform is configured (Telegram, Slack, Discord).' : `${parts.join(' · ')}.`;
}
