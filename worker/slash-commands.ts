/**
 * Slash commands that arrive as session input (chat, Telegram): `/loop`
 * (alias `/proactive`), `/heartbeat` (alias `/hb`), `/status`, `/stop`,
 * `/help`. Their rules live in `scheduler/`; this only routes.
 *
 * Chat input can never create a command turn: every schedule made here runs
 * the `agent` runner.
 */
import { parseLoopArgs, LOOP_HELP } from '../scheduler/loop-command.ts';
import { parseHeartbeatArgs, HEARTBEAT_HELP } from '../scheduler/heartbeat-command.ts';
import { GOAL_HELP } from '../scheduler/goal-command.ts';
import type { Origin } from '../scheduler/loop-state.ts';
import type { ScheduleKind } from '../scheduler/keys.ts';
import type { ScheduleService } from '../scheduler/schedule-service.ts';
import type { HermesConfig } from '../scheduler/config.ts';

/** Context a slash command runs in. */
export interface SlashContext {
  sessionId: string;
  origin: Origin;
  schedules: ScheduleService;
  config: HermesConfig;
  /** Extra commands (e.g. `/goal`) registered by other modules. */
  extra?: Record<string, (args: string) => Promise<string>>;
}

/** Split `/cmd rest` → `['cmd', 'rest']`; `undefined` when the text is not a slash command. */
export function splitSlash(text: string): [string, string] | undefined {
  const m = /^\/([A-Za-z][\w-]*)(?:@\w+)?(?:\s+([\s\S]*))?$/.exec(text.trim());
  return m ? [m[1]!.toLowerCase(), m[2] ?? ''] : undefined;
}

/**
 * Run a slash command.
 * @returns the reply, or `undefined` when the text is not a command handled here
 *   (it then goes to the agent as a normal message, e.g. `/recap`)
 * @throws ScheduleInputError for bad arguments; StoreUnavailableError when Redis refused a write
 */
export async function runSlashCommand(text: string, ctx: SlashContext): Promise<string | undefined> {
  const parts = splitSlash(text);
  if (!parts) return undefined;
  const [cmd, args] = parts;
  const { schedules, sessionId } = ctx;
  const runner = { kind: 'agent' as const };
  const control = async (kind: ScheduleKind, action: string, help: string) => {
    switch (action) {
      case 'status': return await schedules.status(sessionId, kind);
      case 'pause': return await schedules.pause(sessionId, kind);
      case 'resume': return await schedules.resume(sessionId, kind);
      case 'stop': return await schedules.stop(sessionId, kind);
      default: return help;
    }
  };
  switch (cmd) {
    case 'loop':
    case 'proactive': {
      const c = parseLoopArgs(args, { minIntervalSeconds: ctx.config.loops.min_interval_seconds, maxPromptChars: ctx.config.agent.max_prompt_chars });
      if (c.action !== 'set') return await control('loop', c.action, LOOP_HELP);
      return await schedules.set(sessionId, 'loop', c, { origin: ctx.origin, runner });
    }
    case 'heartbeat':
    case 'hb': {
      const c = parseHeartbeatArgs(args, { minIntervalSeconds: ctx.config.heartbeat.min_interval_seconds, maxPromptChars: ctx.config.agent.max_prompt_chars });
      if (c.action !== 'set') return await control('heartbeat', c.action, HEARTBEAT_HELP);
      return await schedules.set(sessionId, 'heartbeat', { ...c, times: null, until: null }, { origin: ctx.origin, runner });
    }
    case 'status': {
      const lines = [await schedules.status(sessionId, 'loop'), await schedules.status(sessionId, 'heartbeat')];
      if (ctx.extra?.goal) lines.push(await ctx.extra.goal('status'));
      return lines.join('\n');
    }
    case 'stop': {
      const lines = [await schedules.stop(sessionId, 'loop'), await schedules.stop(sessionId, 'heartbeat')];
      if (ctx.extra?.goal) lines.push(await ctx.extra.goal('pause'));
      return lines.join('\n');
    }
    case 'help':
      return [LOOP_HELP, HEARTBEAT_HELP, GOAL_HELP, '/status shows every schedule of this session; /stop stops them.'].join('\n\n');
    default: {
      const extra = ctx.extra?.[cmd];
      return extra ? await extra(args) : undefined;
    }
  }
}
