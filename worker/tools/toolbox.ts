/**
 * The tools of one worker process, and how one call runs.
 *
 * Where tools come from (docs/DESIGN.md §3): the operator's config only —
 * `tools.files.roots` (`read_file`, `list_dir`), `tools.http.allow`
 * (`http_get`), `tools.commands.<name>`, `mcp_servers.<name>` (their tools,
 * named `<server>__<tool>`) — plus the built-in read-only `schedule_status` and
 * the `schedules` tool (`tools.schedules`; it acts only for the chat of its turn).
 * The model can only call a tool in this list; a name that is not in it runs
 * nothing and is answered with an error the model sees.
 *
 * Surfaces (`tools.allow_from`): a tool's most specific name found in the map
 * decides (`read_file`, then `files`); a tool named nowhere is open to every
 * surface, since the operator declared it.
 *
 * Limits of one call: `tools.timeout_seconds` (a command's own
 * `timeout_seconds` wins), then the call is aborted and the model sees the
 * error; a result over `tools.max_result_bytes` keeps its head and its tail
 * (the big-result rule, `./tool-output.ts`).
 * Processes a tool starts get the command environment rule (`../command-env.ts`).
 * A call whose turn is aborted stops at once (tools get the signal; a tool
 * that ignores it is no longer waited for).
 */
import { resolve } from 'node:path';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { ToolError } from '../../scheduler/errors/tool-error.ts';
import { commandEnv } from '../runtime/command-env.ts';
import { commandTool } from './command-tool.ts';
import { fileTools } from './file-tools.ts';
import { httpTool } from './http-tool.ts';
import { scheduleStatusTool, type ScheduleStatusSources } from './schedule-status-tool.ts';
import { schedulesTool, type SchedulesToolDeps } from './schedules-tool.ts';
import { surfaceList, surfaceRefusal, type AgentTool, type ToolSurface, type ToolTurn, type TurnSurfaces } from './tool.ts';
import { ToolOutput, type ToolOutputOptions } from './tool-output.ts';
import type { OnDoubt } from '../../scheduler/journal/turn-replay.ts';

/** Who runs a call: its session, the surfaces it answers to, its turn's signal, the turn when it is one. */
export interface ToolCallScope {
  sessionId: string;
  surface: TurnSurfaces;
  signal: AbortSignal;
  turn?: ToolTurn;
  /** The call's idempotency key (`HERMES_STEP_ID` of a command tool), stable across runs of its turn; absent outside a journaled turn. */
  stepId?: string;
}

/** Tools that appear and disappear at run time (MCP servers). */
export interface ToolSource {
  tools(): AgentTool[];
}

/** An OpenAI Chat Completions function tool definition. */
export interface FunctionToolDefinition {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

/** The outcome of one call, as the model and the event stream see it. */
export interface ToolCallResult {
  /** The `tool` message content (the result, or `Error: …`), cut by the big-result rule (`./tool-output.ts`). */
  content: string;
  ms: number;
  /** Size of the full result before the cut, bytes. */
  bytes: number;
  truncated: boolean;
  error?: ToolError;
}

/** What a `--watch` check's call gave: its whole output collected for the watch, or why it failed. */
export interface WatchCallResult {
  output: ToolOutput;
  error?: ToolError;
  ms: number;
}

/** Tool names a turn's system prompt lists per surface that keeps them from it (`Toolbox.promptNotes`). */
const WITHHELD_NAMES_SHOWN = 10;

/** The operator's tools of this process. */
export class Toolbox {
  private readonly builtIn: AgentTool[];
  private readonly sources: ToolSource[] = [];
  private readonly timeoutMs: number;
  /** How a call's result is collected and cut (`tools.max_result_bytes`, `result_head_share`, `files.max_scan_bytes`). */
  private readonly resultLimits: ToolOutputOptions;
  /** Bytes of a watched file digested whole (`tools.watch_max_bytes`). */
  private readonly watchMaxBytes: number;
  private readonly allowFrom: Record<string, readonly ToolSurface[]>;
  private readonly onDoubtPolicy: Record<string, OnDoubt>;

  /** Variables of the worker's environment every command may get (`command_env.pass`). */
  private readonly passEnv: readonly string[];

  /**
   * @param config - `tools.*` decides the tools and their limits
   * @param status - the stores `schedule_status` reads
   * @param envSource - the worker's environment; tool processes get only the minimal base and
   *   what the operator lets through from it (`../command-env.ts`), never its secrets
   */
  constructor(
    config: Pick<HermesConfig, 'tools' | 'command_env'>,
    status: ScheduleStatusSources,
    private readonly envSource: Readonly<Record<string, string | undefined>> = {},
  ) {
    const t = config.tools;
    this.passEnv = config.command_env.pass;
    this.timeoutMs = t.timeout_seconds * 1000;
    this.resultLimits = { maxBytes: t.max_result_bytes, headShare: t.result_head_share, fileReadBytes: t.files.max_scan_bytes };
    this.watchMaxBytes = t.watch_max_bytes;
    this.allowFrom = t.allow_from;
    this.onDoubtPolicy = t.on_doubt;
    this.builtIn = [scheduleStatusTool(status)];
    if (t.files.roots.length > 0) this.builtIn.push(...fileTools(t.files.roots.map((r) => resolve(r))));
    if (t.http.allow.length > 0) this.builtIn.push(httpTool(t.http.allow));
    for (const [name, spec] of Object.entries(t.commands))
      this.builtIn.push(commandTool(name, spec, (turn) => this.processEnv(spec.env, turn, spec.pass_env)));
  }

  /**
   * The environment of a process a tool starts (a command tool, a stdio MCP server): the
   * rule of `../command-env.ts` — the minimal base, `command_env.pass`, the tool's own
   * `passEnv` and `set`, then the call's `turn` variables.
   */
  processEnv(set: Record<string, string> = {}, turn: Record<string, string> = {}, passEnv: readonly string[] = []): Record<string, string> {
    return commandEnv(this.envSource, [{ pass: this.passEnv }, { pass: passEnv, set }], turn);
  }

  /**
   * Add the `schedules` tool, with the services it acts with (a worker does, once, before its
   * first turn); nothing when `tools.schedules.enabled` is false. It comes right after
   * `schedule_status`, before the operator's tools: a command named `schedules` is hidden by it.
   */
  addSchedulesTool(deps: SchedulesToolDeps): void {
    if (deps.config.tools.schedules.enabled) this.builtIn.splice(1, 0, schedulesTool(deps));
  }

  /**
   * What a resumed turn does with a call of `name` in doubt — started by an earlier run, no result
   * recorded (docs/RELIABILITY.md, "The step in doubt"): the operator's `tools.on_doubt` for the tool's
   * most specific name found there (`ci`, then `commands`), else `rerun` for a tool that declares
   * itself idempotent (the built-in read-only tools) and `report` for any other (command, MCP and
   * `schedules` tools; a tool that no longer exists).
   */
  onDoubt(name: string): OnDoubt {
    const tool = this.all().find((t) => t.name === name);
    if (!tool) return 'report';
    const group = tool.groups.find((g) => Object.hasOwn(this.onDoubtPolicy, g));
    if (group !== undefined) return this.onDoubtPolicy[group]!;
    return tool.idempotent === true ? 'rerun' : 'report';
  }

  /** Add a source of tools found at run time (an MCP hub). */
  addSource(source: ToolSource): void {
    this.sources.push(source);
  }

  /** Every declared tool, whatever the surface. Later sources never shadow an earlier name. */
  all(): AgentTool[] {
    const seen = new Set<string>();
    const out: AgentTool[] = [];
    for (const tool of [...this.builtIn, ...this.sources.flatMap((s) => s.tools())]) {
      if (seen.has(tool.name)) continue;
      seen.add(tool.name);
      out.push(tool);
    }
    return out;
  }

  /**
   * Whether `tool` may be used by a turn from `surface` (see the rule at the top of this file);
   * with several surfaces, each must allow it.
   */
  allowed(tool: AgentTool, surface: TurnSurfaces): boolean {
    return this.refusingSurface(tool, surface) === undefined;
  }

  /** The first of the turn's surfaces that `tools.allow_from` keeps `tool` from, if any. */
  private refusingSurface(tool: AgentTool, surface: TurnSurfaces): ToolSurface | undefined {
    const group = tool.groups.find((g) => this.allowFrom[g] !== undefined);
    if (group === undefined) return undefined;
    return surfaceList(surface).find((s) => !this.allowFrom[group]!.includes(s));
  }

  /**
   * The tools a turn from `surface` may use; with `turn`, also those a tool keeps from turns of its
   * kind are left out (`AgentTool.refusal`).
   */
  forSurface(surface: TurnSurfaces, turn?: ToolTurn): AgentTool[] {
    const scope = { surfaces: surfaceList(surface), turn };
    return this.all().filter((t) => this.allowed(t, surface) && t.refusal?.(scope) === undefined);
  }

  /** Chat Completions `tools` for a turn from `surface`. */
  definitions(surface: TurnSurfaces, turn?: ToolTurn): FunctionToolDefinition[] {
    return this.forSurface(surface, turn).map((t) => ({
      type: 'function' as const,
      function: { name: t.name, description: t.description, parameters: t.parameters },
    }));
  }

  /**
   * The system prompt paragraphs of the tools offered to a turn (`AgentTool.promptNote`), then one
   * naming the tools provenance keeps from it, so the agent can tell the user why they are missing.
   */
  promptNotes(surface: TurnSurfaces, turn?: ToolTurn): string[] {
    const scope = { surfaces: surfaceList(surface), turn };
    const notes = this.forSurface(surface, turn).flatMap((t) => t.promptNote?.(scope) ?? []);
    const withheld = this.withheldByContext(surface);
    return withheld === undefined ? notes : [...notes, withheld];
  }

  /**
   * The tools `tools.allow_from` keeps from a turn because of another surface than its own (text of
   * that surface is in its context), by that surface, at most `WITHHELD_NAMES_SHOWN` names each; or
   * `undefined` when there are none.
   */
  private withheldByContext(surface: TurnSurfaces): string | undefined {
    const own = surfaceList(surface)[0];
    const by = new Map<string, string[]>();
    for (const tool of this.all()) {
      const s = this.refusingSurface(tool, surface);
      if (s !== undefined && s !== own) by.set(s, [...(by.get(s) ?? []), tool.name]);
    }
    if (by.size === 0) return undefined;
    return [...by]
      .map(([s, names]) => {
        const shown =
          names.length > WITHHELD_NAMES_SHOWN
            ? `${names.slice(0, WITHHELD_NAMES_SHOWN).join(', ')} and ${names.length - WITHHELD_NAMES_SHOWN} more`
            : names.join(', ');
        return `Not available in this turn: ${shown}. This conversation holds text from the ${s} surface, which may not use ${names.length === 1 ? 'it' : 'them'} (tools.allow_from); if the user asks for ${names.length === 1 ? 'it' : 'them'}, tell them so.`;
      })
      .join('\n');
  }

  /**
   * Run one call the model asked for. Never throws: a refusal, a failure or a
   * timeout comes back as `error`, with `content` saying so for the model.
   */
  async call(name: string, rawArguments: string, ctx: ToolCallScope): Promise<ToolCallResult> {
    const ran = await this.slotted(name, ctx.signal, () => this.execute(name, rawArguments, ctx, new ToolOutput(this.resultLimits)));
    const shown = ran.error ? ToolOutput.of(`Error: ${ran.error.message}`, this.resultLimits) : ran.output;
    return { ...shown.render(), ms: ran.ms, ...(ran.error ? { error: ran.error } : {}) };
  }

  /**
   * Run a `--watch` check (`../watch-check.ts`): the same checks, limits and rights as a call of
   * the model's, but the whole output is collected for the watch (digest, a copy up to
   * `collect.keepBytes`, what came after `collect.since`), a file read through up to
   * `tools.watch_max_bytes`. Never throws.
   */
  async watch(
    name: string,
    args: Record<string, unknown>,
    ctx: ToolCallScope,
    collect: { keepBytes: number; since?: number },
  ): Promise<WatchCallResult> {
    const output = new ToolOutput({ ...this.resultLimits, fileReadBytes: this.watchMaxBytes, watch: collect });
    return await this.slotted(name, ctx.signal, () => this.execute(name, JSON.stringify(args), ctx, output));
  }

  /**
   * Runs `run` for a call of the tool `name`; a subclass may hold something while it runs (a
   * worker's turn slot for a command tool: `create-worker-deps.ts`).
   */
  protected async slotted<T>(_name: string, _signal: AbortSignal, run: () => Promise<T>): Promise<T> {
    return await run();
  }

  /** One call into `output`, with the checks and limits of this file's header. Never throws. */
  private async execute(name: string, rawArguments: string, ctx: ToolCallScope, output: ToolOutput): Promise<WatchCallResult> {
    const started = Date.now();
    const failed = (error: ToolError): WatchCallResult => ({ output, error, ms: Date.now() - started });
    const tool = this.all().find((t) => t.name === name);
    if (!tool)
      return failed(new ToolError(`Unknown tool "${name}": only the tools listed for this turn exist.`, { kind: 'refused', tool: name }));
    const surfaces = surfaceList(ctx.surface);
    const refusing = this.refusingSurface(tool, ctx.surface);
    if (refusing !== undefined) {
      // The surface that keeps it, by name: the turn's own, or one whose text is in the context (provenance).
      return failed(new ToolError(surfaceRefusal(name, refusing, surfaces[0]!, 'tools.allow_from'), { kind: 'refused', tool: name }));
    }
    const kept = tool.refusal?.({ surfaces, turn: ctx.turn });
    if (kept !== undefined) return failed(new ToolError(kept, { kind: 'refused', tool: name }));
    let args: Record<string, unknown>;
    try {
      const parsed: unknown = rawArguments.trim() === '' ? {} : JSON.parse(rawArguments);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
      args = parsed as Record<string, unknown>;
    } catch {
      return failed(new ToolError('The arguments must be a JSON object.', { kind: 'refused', tool: name }));
    }
    const timeoutMs = tool.timeoutMs ?? this.timeoutMs;
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error('tool timeout'));
    }, timeoutMs);
    const onTurnAbort = () => controller.abort(ctx.signal.reason);
    if (ctx.signal.aborted) onTurnAbort();
    else ctx.signal.addEventListener('abort', onTurnAbort, { once: true });
    // A tool that ignores its signal is not waited for past the abort.
    const stopped = new Promise<never>((_, reject) => {
      const fail = () => reject(new Error('stopped'));
      if (controller.signal.aborted) fail();
      else controller.signal.addEventListener('abort', fail, { once: true });
    });
    stopped.catch(() => {});
    try {
      const got = await Promise.race([
        tool.call(args, {
          sessionId: ctx.sessionId,
          surface: surfaces[0]!,
          surfaces,
          ...(ctx.turn ? { turn: ctx.turn } : {}),
          ...(ctx.stepId ? { stepId: ctx.stepId } : {}),
          signal: controller.signal,
          output,
          timeoutMs,
        }),
        stopped,
      ]);
      if (typeof got === 'string') output.push(got);
      return { output, ms: Date.now() - started };
    } catch (err) {
      if (timedOut)
        return failed(
          new ToolError(`The tool did not finish within ${timeoutMs / 1000}s and was stopped.`, {
            kind: 'timeout',
            tool: name,
            cause: err,
          }),
        );
      if (ctx.signal.aborted)
        return failed(new ToolError('The call was stopped with its turn.', { kind: 'aborted', tool: name, cause: err }));
      if (err instanceof ToolError) return failed(err);
      return failed(new ToolError(`The tool failed: ${(err as Error).message}`, { kind: 'failed', tool: name, cause: err }));
    } finally {
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', onTurnAbort);
    }
  }
}
