/**
 * The contract of an agent tool. Every tool comes from the operator's config
 * (or is built in: the read-only `schedule_status`, and `schedules`, which acts
 * only for the chat of its turn); nothing a chat, Telegram or `/v1` caller
 * sends can add one (docs/DESIGN.md §3).
 */
import type { TOOL_SURFACES } from '../../scheduler/config/config.ts';
import { ToolError } from '../../scheduler/errors/tool-error.ts';
import type { Origin } from '../../scheduler/session/origin.ts';
import type { ToolOutput } from './tool-output.ts';

/** Surfaces a turn can come from (`tools.allow_from` names them). */
export type ToolSurface = (typeof TOOL_SURFACES)[number];

/**
 * The surfaces a turn answers to: one, or several that must each allow a tool.
 * A cron job runs as `cron`; one created or edited from another surface than
 * the CLI (over `/api`) runs as `['cron', 'api']` (`cronToolSurfaces`), so
 * `tools.allow_from` that keeps a tool from `api` keeps it from that job's runs
 * too. The first is the turn's own.
 */
export type TurnSurfaces = ToolSurface | readonly ToolSurface[];

/** The surfaces of `s` as a list, the turn's own first. */
export function surfaceList(s: TurnSurfaces): readonly ToolSurface[] {
  return typeof s === 'string' ? [s] : s;
}

/** What a turn is: a user message, a loop or heartbeat tick, a goal continuation, a cron run, a `/v1` request. */
export type TurnKind = 'message' | 'loop' | 'heartbeat' | 'goal' | 'cron' | 'v1';

/**
 * The turn a tool call belongs to, for a tool that acts for it (the `schedules` tool): what kind of
 * turn, where its input came from, and what the tool asks of the turn's commit. One object per turn.
 */
export interface ToolTurn {
  kind: TurnKind;
  /** The surface and messaging route of its input (a tick's, goal's or cron job's origin for their turns). */
  origin?: Origin;
  /** A tick of a self-paced loop: its agent may set the delay to the next tick. */
  selfPaced?: boolean;
  /** Set by a tool during the turn: the delay to the next tick the agent asked for, seconds (clamped at the commit). */
  nextTickSeconds?: number;
  /**
   * The context the model has been sent holds text a tool brought in (`isToolOutput`): a tool result in
   * the transcript or of this turn's own calls, a summary standing for one, a `--watch` check's output.
   * Set by the runner before the first call and when a result comes in; never cleared within the turn.
   */
  toolOutput?: boolean;
  /** Schedules the `schedules` tool created in this turn (`tools.schedules.max_created_per_turn`). */
  schedulesCreated?: number;
}

/** The name of the built-in `schedules` tool (`schedules-tool.ts`). */
export const SCHEDULES_TOOL = 'schedules';

/**
 * Whether a transcript or runner message is text a tool brought in from outside the conversation: a
 * `tool` result, except the `schedules` tool's (the product's own account of what the model asked
 * for). What such text says may have been written by anyone who can put text where a tool reads
 * (a web page, a file, a command's output), so what the agent makes after reading it is marked
 * (docs/TOOLS.md, "The agent schedules").
 */
export function isToolOutput(m: { role: string; name?: string }): boolean {
  return m.role === 'tool' && m.name !== SCHEDULES_TOOL;
}

/**
 * Why a turn may not use `tool` because of `surface`: its own surface (`own`) is not allowed it, or
 * (provenance, docs/TOOLS.md) text of another surface is in its context — a message in the session, a
 * loop's or a cron job's prompt set from there. `rule` names the setting. The model gets it as the
 * call's result and the event stream as the call's error, so the user can be told why.
 */
export function surfaceRefusal(tool: string, surface: string, own: string, rule: string): string {
  return surface === own
    ? `Tool "${tool}" is not allowed from ${surface} (${rule}).`
    : `${tool} is not available in this turn: its context holds text from the ${surface} surface, which may not use it (${rule}).`;
}

/** Who asks for a tool: the surfaces the turn answers to (its own first) and the turn, when it is one. */
export interface ToolScope {
  surfaces: readonly ToolSurface[];
  turn?: ToolTurn;
}

/** A JSON Schema of a tool's parameters (type `object`). */
export type ToolParameters = Record<string, unknown>;

/** What a tool call gets besides its arguments. */
export interface ToolCallContext {
  sessionId: string;
  surface: ToolSurface;
  /** Every surface the turn answers to, `surface` first (absent: `surface` alone). */
  surfaces?: readonly ToolSurface[];
  /** The turn the call belongs to; absent for a call outside a turn (a `--watch` check, a judge). */
  turn?: ToolTurn;
  /** Aborted at the call's timeout or when the turn is aborted; tools stop at once (child processes included). */
  signal: AbortSignal;
  /**
   * Where a tool that reads a stream (a file, a body, a process's output) puts it as it comes,
   * in bounded memory (`./tool-output.ts`); a tool that has its whole text at once may return it instead.
   */
  output: ToolOutput;
  /** The call's timeout, ms (`signal` is aborted then); a tool that starts a process bounds it by this too. */
  timeoutMs: number;
  /**
   * The call's idempotency key, the same on every run of this call of its turn (a rerun after a crash
   * included); a command tool passes it as `HERMES_STEP_ID`. Absent outside a journaled turn.
   */
  stepId?: string;
}

/** One tool the agent may call. */
export interface AgentTool {
  /** Function name the model calls (`read_file`, `ci`, `<server>__<tool>`). */
  name: string;
  description: string;
  parameters: ToolParameters;
  /**
   * Names `tools.allow_from` may use for this tool, most specific first
   * (e.g. `['read_file', 'files']`, `['github__list_runs', 'github', 'mcp']`).
   */
  groups: string[];
  /**
   * Running the call twice has the effect of running it once (it only reads): a call in doubt after
   * a crash is run again (docs/RELIABILITY.md, "The step in doubt"). @defaultValue false
   */
  idempotent?: boolean;
  /** Own timeout, ms (a command's `timeout_seconds`); default `tools.timeout_seconds`. */
  timeoutMs?: number;
  /**
   * Why the tool is kept from a turn besides `tools.allow_from` (which the toolbox applies), or
   * `undefined` when it is offered: such a tool is not offered, and refused with this when called.
   */
  refusal?(scope: ToolScope): string | undefined;
  /** A short paragraph for the system prompt of a turn the tool is offered to, if it has one for that turn. */
  promptNote?(scope: ToolScope): string | undefined;
  /**
   * Run the call.
   * @returns the result text, or `ctx.output` with the result streamed into it (the caller cuts
   *   either by the big-result rule of `./tool-output.ts`)
   * @throws ToolError `refused` or `failed` with a message for the model
   */
  call(args: Record<string, unknown>, ctx: ToolCallContext): Promise<string | ToolOutput>;
}

/** The JSON Schema of a tool without parameters. */
export const NO_PARAMETERS: ToolParameters = { type: 'object', properties: {}, additionalProperties: false };

/** A required string argument. @throws ToolError `refused` when missing or not a string */
export function stringArg(args: Record<string, unknown>, name: string, tool: string): string {
  const v = args[name];
  if (typeof v !== 'string' || v.length === 0) throw new ToolError(`Argument "${name}" (a string) is required.`, { kind: 'refused', tool });
  return v;
}
