/**
 * Who a schedule or a turn answers to: the surface its input came from and the messaging route
 * replies go to (`Origin`), how its turns are produced (`RunnerSpec`), and who made it when no
 * person typed it (`AgentCreator`). Loops, heartbeats, goals, cron jobs, the inbox, the gateway's
 * platforms and the worker's tools all carry them.
 */
import type { MessagingRoute } from '../delivery/delivery-target.ts';

/** How a turn is produced. `command` may only be created by a trusted surface (CLI, config). */
export type RunnerSpec =
  | { kind: 'agent' }
  | {
      kind: 'command';
      /** shell command line */
      command: string;
      timeoutSeconds: number;
      /** the `commands.<name>` entry it came from (its `env` and `pass_env` apply at run time) */
      name?: string;
    };

/**
 * The surfaces input comes from, the one list of them: `web` is the console (`/ui`) or
 * `POST /api/sessions/:id/messages` (chat input, never trusted, like `telegram`); `mcp` is a client
 * of `hermes mcp` or the gateway's `/mcp` (another agent: never trusted to make command turns unless
 * the operator sets `mcp.command_turns`; gateway/mcp/); `webhook` is a signed `POST /hooks/<name>`
 * (gateway/hooks/: input rendered from a payload by the operator's template, never trusted). The lists that add
 * kinds of turn to it (`TOOL_SURFACES`, `SCHEDULE_TOOL_SURFACES` in `../config/config.ts`) are
 * derived from it.
 */
export const ORIGIN_SURFACES = ['cli', 'chat', 'telegram', 'slack', 'discord', 'api', 'web', 'mcp', 'webhook'] as const;
/** A surface input comes from (`ORIGIN_SURFACES`). */
export type OriginSurface = (typeof ORIGIN_SURFACES)[number];

/** Where a schedule was created, and where replies go besides the session stream. */
export interface Origin {
  /** The surface its input came from. */
  surface: OriginSurface;
  /** Messaging route (platform + chat) for replies, when set from a platform. */
  route?: MessagingRoute;
}

/**
 * Who made a schedule when no person typed it: the agent, with its `schedules` tool, in a turn
 * from `surface` (the surface of the chat it talked in). Records keep it; status shows it.
 */
export interface AgentCreator {
  by: 'agent';
  surface: Origin['surface'];
  /**
   * Made in a turn whose context held text a tool brought in (a web page, a file, a command's output):
   * that text may have asked for it. Shown wherever the maker is (`hermes status`, `cron list/show`,
   * `/loop status`, the console, `/api`). Absent: no tool output was in the context.
   */
  from_tool_output?: true;
}

/** A maker in a table cell: `agent (telegram)`, `agent (telegram, tool output)`. */
export function agentCreatorCell(c: AgentCreator): string {
  return `agent (${c.surface}${c.from_tool_output ? ', tool output' : ''})`;
}

/** A maker in a sentence: `the agent (telegram)`, `the agent (telegram), after reading a tool's output`. */
export function agentCreatorText(c: AgentCreator): string {
  return `the agent (${c.surface})${c.from_tool_output ? ", after reading a tool's output" : ''}`;
}
