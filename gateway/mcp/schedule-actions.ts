/**
 * What the MCP server's schedule tools do (gateway/mcp/mcp-server.ts registers them): create,
 * update, pause, resume, remove and run loops, heartbeats and cron jobs, with the safeguards of
 * the agent's `schedules` tool (worker/tools/schedules-tool.ts), for surface `mcp`:
 *
 * - Provenance: what an MCP client makes has origin `mcp` and is recorded as made by an agent on
 *   surface `mcp` (`createdBy` / `created_by`, with the session for a cron job), which `hermes status`,
 *   `cron list/show`, `/loop status`, the console and `/api` show. Ticks and runs of what it makes
 *   answer to `tools.allow_from`'s `mcp` (and `cron` for a cron job's runs).
 * - No command turns unless `mcp.command_turns`: a loop's `command` or a cron job's `script` is
 *   refused, and so is changing, resuming or running a command job or updating a command loop;
 *   nothing is written. Pausing and removing stay open (they start nothing).
 * - Per-day limit: `mcp.max_created_per_day` creations by MCP clients, all sessions together, in
 *   any 24 hours (`CreationLedger`); creations run one after another in this process.
 * - Every change is told on the session's event stream: a `notice` with `by: 'mcp'`, the action and
 *   the schedule (a cron job's notices go to the session it was made for).
 * - Validation is that of `/loop`, `/heartbeat` and `hermes cron add` (the same parsers and
 *   services); their input errors come back as the call's error, in their words, nothing written.
 */
import type { Origin, RunnerSpec } from '../../scheduler/session/origin.ts';
import type { LoopKind } from '../../scheduler/tick/tick-kind.ts';
import type { LoopRecord } from '../../scheduler/loop/loop-state.ts';
import type { LoopSpec } from '../../scheduler/loop/loop-service.ts';
import { scheduleObject } from '../../scheduler/loop/schedule-view.ts';
import { parseLoopInterval } from '../../scheduler/loop/loop-command.ts';
import { parseHeartbeatInterval } from '../../scheduler/loop/heartbeat-command.ts';
import { parseNotify, type NotifyMode } from '../../scheduler/economy/notify.ts';
import { parseDeliverList } from '../../scheduler/delivery/deliver-list.ts';
import { cronJobView, defaultName, type CronJob } from '../../scheduler/cron/cron-job.ts';
import type { CronCaller } from '../../scheduler/cron/cron-input.ts';
import { assertSessionId } from '../../scheduler/session/session-id.ts';
import { ScheduleInputError } from '../../scheduler/errors/schedule-input-error.ts';
import { MAX_TIMES } from '../../scheduler/interval.ts';
import { clip } from '../../scheduler/text/clip.ts';
import type { McpDeps } from './mcp-deps.ts';

/** The kinds of schedule. */
export const MCP_SCHEDULE_KINDS = ['loop', 'heartbeat', 'cron'] as const;
export type McpScheduleKind = (typeof MCP_SCHEDULE_KINDS)[number];

/** The fields of a schedule a client may set (`create_schedule`, `update_schedule`). */
export interface ScheduleFields {
  kind: McpScheduleKind;
  /** The session a loop or heartbeat runs in, and whose stream tells every change (default `main`). */
  session: string;
  /** A cron job's id or name (`update`, `pause`, …). */
  id?: string;
  prompt?: string;
  interval?: string;
  schedule?: string;
  tz?: string;
  times?: number;
  until?: string;
  name?: string;
  deliver?: string;
  notify?: string;
  /** A command turn: a loop's shell command, a cron job's `script`. */
  command?: string;
  /** A cron job's parents (`<job>[:ok|error|any]`): it runs after each of their runs that ends so; `[]` on update clears them. */
  after?: string[];
  /** With two parents or more: one run once all of them have run in one window (`--after-all`); `false` on update: after each. */
  after_all?: boolean;
}

/** What a schedule action answers: a sentence, and the schedule as `/api` shows it. */
export interface ActionResult {
  text: string;
  schedule: Record<string, unknown> | null;
}

/** Seconds a loop's command may run (as `hermes loop --run` without `--timeout-seconds`). */
const COMMAND_TIMEOUT_SECONDS = 60;

/** The schedule actions over `deps`. */
export class ScheduleActions {
  constructor(private readonly deps: McpDeps) {}

  private now(): number {
    return (this.deps.clock ?? Date.now)();
  }

  /** The caller of the cron service: surface `mcp`, trusted only with `mcp.command_turns`. */
  private caller(session?: string): CronCaller {
    return {
      origin: MCP_ORIGIN,
      trusted: this.deps.config.mcp.command_turns,
      ...(session !== undefined ? { createdBy: { by: 'agent', surface: 'mcp', session_id: session } } : {}),
    };
  }

  /** @throws ScheduleInputError when command turns are off for MCP */
  private assertCommandsAllowed(what: string): void {
    if (!this.deps.config.mcp.command_turns) {
      throw new ScheduleInputError(
        `${what} is a command turn; MCP clients may not make command turns unless the operator sets mcp.command_turns. Nothing was changed.`,
        { field: 'command' },
      );
    }
  }

  /**
   * Create a schedule: one creation at a time per ledger (the process's, shared by the servers of
   * every `/mcp` request and a stdio connection), so the per-day count holds in this process.
   */
  async create(f: ScheduleFields): Promise<ActionResult> {
    const before = CREATIONS.get(this.deps.ledger) ?? Promise.resolve();
    const run = before.then(
      () => this.createNow(f),
      () => this.createNow(f),
    );
    CREATIONS.set(
      this.deps.ledger,
      run.catch(() => undefined),
    );
    return await run;
  }

  private async createNow(f: ScheduleFields): Promise<ActionResult> {
    const session = assertSessionId(f.session);
    if (f.id !== undefined)
      throw new ScheduleInputError('`id` names an existing schedule; create makes a new one (give `name`).', { field: 'id' });
    if (f.command !== undefined)
      this.assertCommandsAllowed(f.kind === 'cron' ? 'A cron job with a `command` (script)' : `A ${f.kind} with a \`command\``);
    await this.assertUnderDailyLimit();
    if (f.kind === 'cron') {
      if (f.schedule === undefined && !f.after?.length)
        throw new ScheduleInputError(
          'A cron job needs a `schedule`, e.g. "weekdays at 9am", "every 2h", "0 9 * * 1-5" (or `after`: the jobs it runs after).',
          { field: 'schedule' },
        );
      this.refuseLoopFields(f);
      if (f.command === undefined && (f.prompt === undefined || f.prompt.trim() === ''))
        throw new ScheduleInputError('A cron job needs a `prompt`: what each run asks the agent to do.', { field: 'prompt' });
      const job = await this.deps.cron.add(
        {
          schedule: f.schedule,
          prompt: f.prompt,
          name: f.name,
          deliver: f.deliver,
          repeat: f.times,
          tz: f.tz,
          notify: f.notify,
          ...(f.after?.length ? { after: f.after } : {}),
          ...(f.after_all !== undefined ? { after_all: f.after_all } : {}),
          ...(f.command !== undefined ? { script: f.command } : {}),
        },
        this.caller(session),
      );
      await this.deps.ledger.record(this.deps.keys.mcpSchedulesCreated, job.id, this.now());
      const text = `Created cron job ${job.id} "${job.name}": ${describeJob(job)}.`;
      await this.tell(session, 'create', 'cron', job.id, text);
      return { text, schedule: cronJobView(job) };
    }
    const kind = f.kind;
    const existing = await this.deps.loops.get(session, kind);
    if (existing && existing.status !== 'finished') {
      throw new ScheduleInputError(
        `Session ${session} already has a ${kind} (${existing.loopId}, “${clip(existing.prompt, 60)}”); use update_schedule to change it, or remove it first.`,
        { field: 'kind' },
      );
    }
    const spec = this.loopSpec(kind, f, undefined);
    const runner: RunnerSpec =
      f.command !== undefined ? { kind: 'command', command: f.command, timeoutSeconds: COMMAND_TIMEOUT_SECONDS } : { kind: 'agent' };
    const reply = await this.deps.schedules.set(session, kind, spec, { origin: MCP_ORIGIN, runner, createdBy: MCP_CREATOR });
    const record = await this.deps.loops.get(session, kind);
    if (record && record.loopId !== existing?.loopId) {
      await this.deps.ledger.record(this.deps.keys.mcpSchedulesCreated, record.loopId, this.now());
      await this.tell(session, 'create', kind, record.loopId, `Scheduled by an MCP client: ${reply}`);
    }
    return { text: reply, schedule: record ? await this.loopView(record) : null };
  }

  /** Change a schedule's fields (only those given). */
  async update(f: ScheduleFields): Promise<ActionResult> {
    const session = assertSessionId(f.session);
    if (f.kind === 'cron') {
      const ref = this.cronRef(f);
      const current = await this.deps.cron.get(ref);
      if (f.command !== undefined) this.assertCommandsAllowed('A `command` (script)');
      if (current.script !== null) this.assertCommandsAllowed(`Cron job ${current.id} runs a command (script): changing it`);
      this.refuseLoopFields(f);
      const job = await this.deps.cron.edit(
        current.id,
        {
          schedule: f.schedule,
          prompt: f.prompt,
          name: f.name,
          deliver: f.deliver,
          repeat: f.times,
          tz: f.tz,
          notify: f.notify,
          ...(f.after !== undefined ? { after: f.after.length === 0 ? null : f.after } : {}),
          ...(f.after_all !== undefined ? { after_all: f.after_all } : {}),
          ...(f.command !== undefined ? { script: f.command } : {}),
        },
        this.caller(),
      );
      const text = `Changed cron job ${job.id} "${job.name}": ${describeJob(job)}.`;
      await this.tell(session, 'update', 'cron', job.id, text);
      return { text, schedule: cronJobView(job) };
    }
    const kind = f.kind;
    const current = await this.deps.loops.get(session, kind);
    if (!current || current.status === 'finished') throw new ScheduleInputError(`No ${kind} in session ${session}.`, { field: 'kind' });
    if (current.runner.kind === 'command' || f.command !== undefined) this.assertCommandsAllowed(`The ${kind}'s command`);
    const spec = this.loopSpec(kind, f, current);
    const runner: RunnerSpec =
      f.command !== undefined ? { kind: 'command', command: f.command, timeoutSeconds: COMMAND_TIMEOUT_SECONDS } : current.runner;
    const reply = await this.deps.schedules.set(session, kind, spec, { origin: MCP_ORIGIN, runner, createdBy: MCP_CREATOR });
    const record = await this.deps.loops.get(session, kind);
    if (record && record.loopId !== current.loopId)
      await this.tell(session, 'update', kind, record.loopId, `Changed by an MCP client: ${reply}`);
    return { text: reply, schedule: record ? await this.loopView(record) : null };
  }

  /** Pause, resume or remove a schedule; `run` a cron job now, outside its schedule. */
  async act(action: 'pause' | 'resume' | 'remove' | 'run', f: Pick<ScheduleFields, 'kind' | 'session' | 'id'>): Promise<ActionResult> {
    const session = assertSessionId(f.session);
    if (f.kind === 'cron') {
      const ref = this.cronRef(f);
      let job: CronJob;
      let text: string;
      switch (action) {
        case 'pause':
          job = (await this.deps.cron.pause(ref)).job;
          text = `Paused cron job ${job.id} "${job.name}".`;
          break;
        case 'resume':
          job = (await this.deps.cron.resume(ref, this.caller())).job;
          text = `Resumed cron job ${job.id} "${job.name}": ${describeJob(job)}.`;
          break;
        case 'remove':
          job = await this.deps.cron.remove(ref);
          text = `Removed cron job ${job.id} "${job.name}".`;
          break;
        case 'run': {
          const r = await this.deps.cron.runNow(ref, this.caller());
          job = r.job;
          text = `Running cron job ${job.id} "${job.name}" now, outside its schedule (run job ${r.manualJobId}); its output comes with \`runs\`.`;
          break;
        }
      }
      await this.tell(session, action, 'cron', job.id, text);
      return { text, schedule: action === 'remove' ? null : cronJobView(job) };
    }
    if (action === 'run')
      throw new ScheduleInputError(`run_schedule is for cron jobs; a ${f.kind} runs on its own cadence.`, { field: 'kind' });
    const kind = f.kind;
    const before = await this.deps.loops.get(session, kind);
    if (!before) throw new ScheduleInputError(`No ${kind} in session ${session}.`, { field: 'kind' });
    const t = this.now();
    const reply =
      action === 'pause'
        ? await this.deps.schedules.pause(session, kind, t)
        : action === 'resume'
          ? await this.deps.schedules.resume(session, kind, t)
          : await this.deps.schedules.stop(session, kind, t);
    const after = await this.deps.loops.get(session, kind);
    await this.tell(session, action, kind, before.loopId, `${VERB[action]} by an MCP client: ${reply}`);
    return { text: reply, schedule: after ? await this.loopView(after) : null };
  }

  /** A loop's or heartbeat's `/api` view with its next tick. */
  async loopView(r: LoopRecord): Promise<Record<string, unknown>> {
    const next = r.status === 'active' ? await this.deps.loops.nextDueAt(r) : undefined;
    return scheduleObject(r, this.now(), next);
  }

  /** @throws ScheduleInputError past `mcp.max_created_per_day` */
  private async assertUnderDailyLimit(): Promise<void> {
    const max = this.deps.config.mcp.max_created_per_day;
    const created = await this.deps.ledger.createdInWindow(this.deps.keys.mcpSchedulesCreated, this.now());
    if (created >= max) {
      throw new ScheduleInputError(
        `MCP clients created ${created} schedules in the last 24 hours; the limit is ${max} (mcp.max_created_per_day). Nothing was created.`,
        { field: 'kind' },
      );
    }
  }

  private cronRef(f: Pick<ScheduleFields, 'id'>): string {
    if (f.id === undefined || f.id.trim() === '')
      throw new ScheduleInputError('A cron job is named by `id` (its id or name; list_schedules shows them).', { field: 'id' });
    return f.id.trim();
  }

  private refuseLoopFields(f: ScheduleFields): void {
    if (f.interval !== undefined)
      throw new ScheduleInputError('`interval` is for loops and heartbeats; a cron job takes `schedule` (e.g. "every 2h").', {
        field: 'interval',
      });
    if (f.until !== undefined) throw new ScheduleInputError('`until` is for loops; a cron job takes `times`.', { field: 'until' });
  }

  /** A loop's or heartbeat's spec from the fields, over `current` for an update (its other settings stay). */
  private loopSpec(kind: LoopKind, f: ScheduleFields, current: LoopRecord | undefined): LoopSpec {
    const { config } = this.deps;
    if (f.after !== undefined || f.after_all !== undefined)
      throw new ScheduleInputError(`\`after\` is for cron jobs; a ${kind} runs on its own cadence.`, { field: 'after' });
    if (f.schedule !== undefined || f.tz !== undefined)
      throw new ScheduleInputError(
        `\`${f.schedule !== undefined ? 'schedule' : 'tz'}\` is for cron jobs; a ${kind} takes \`interval\` (e.g. "10m").`,
        {
          field: f.schedule !== undefined ? 'schedule' : 'tz',
        },
      );
    if (kind === 'heartbeat' && (f.times !== undefined || f.until !== undefined))
      throw new ScheduleInputError(`A heartbeat takes no \`${f.times !== undefined ? 'times' : 'until'}\` (a loop does).`, {
        field: 'times',
      });
    let intervalSeconds: number | null;
    if (f.interval !== undefined) {
      intervalSeconds =
        kind === 'loop'
          ? parseLoopInterval(f.interval, { minIntervalSeconds: config.loops.min_interval_seconds })
          : parseHeartbeatInterval(f.interval, { minIntervalSeconds: config.heartbeat.min_interval_seconds });
    } else if (current) {
      intervalSeconds = current.intervalSeconds;
    } else if (kind === 'heartbeat') {
      throw new ScheduleInputError('A heartbeat needs an `interval`, e.g. "30m".', { field: 'interval' });
    } else {
      intervalSeconds = null; // self-paced
    }
    const prompt = f.prompt !== undefined ? f.prompt.trim() : current?.prompt;
    if (prompt === undefined || prompt === '')
      throw new ScheduleInputError(`A ${kind} needs a \`prompt\`: what each tick asks.`, { field: 'prompt' });
    if (prompt.length > config.agent.max_prompt_chars)
      throw new ScheduleInputError(`The prompt is ${prompt.length} characters; the limit is ${config.agent.max_prompt_chars}.`, {
        field: 'prompt',
      });
    if (f.times !== undefined && (!Number.isInteger(f.times) || f.times < 1 || f.times > MAX_TIMES))
      throw new ScheduleInputError(`\`times\` must be a whole number from 1 to ${MAX_TIMES}, got ${f.times}.`, { field: 'times' });
    const notify: NotifyMode | undefined = f.notify !== undefined ? parseNotify(f.notify, '`notify`') : current?.notify;
    const spec: LoopSpec = {
      prompt,
      intervalSeconds,
      times: f.times ?? current?.times ?? null,
      until: f.until?.trim() || (current?.until ?? null),
      notes: [],
      economy: {
        ...(notify ? { notify } : {}),
        ...(current?.watch ? { watch: current.watch } : {}),
        ...(current?.maxTokens ? { maxTokens: current.maxTokens } : {}),
        ...(current?.model ? { model: current.model } : {}),
      },
      name: f.name?.trim() || current?.name || defaultName(prompt, null),
    };
    const deliver = f.deliver !== undefined ? parseDeliverList(f.deliver) : current?.deliver;
    if (deliver) spec.deliver = deliver;
    return spec;
  }

  /** A `notice` on the session's event stream (see the top of this file). */
  private async tell(session: string, action: string, kind: McpScheduleKind, id: string, text: string): Promise<void> {
    await this.deps.sessions.appendEvent(session, 'notice', { text, by: 'mcp', action, schedule: { kind, id } });
  }
}

/** The last creation queued per ledger (see `ScheduleActions.create`). */
const CREATIONS = new WeakMap<object, Promise<unknown>>();

/** Where what an MCP client makes comes from. */
export const MCP_ORIGIN: Origin = { surface: 'mcp' };

/** Who made it: an agent (the MCP client), on surface `mcp`. */
const MCP_CREATOR = { by: 'agent', surface: 'mcp' } as const;

const VERB = { pause: 'Paused', resume: 'Resumed', remove: 'Removed' } as const;

/** `weekdays at 09:00 (Europe/Berlin), next 2026-03-09T08:00:00Z, delivered to local`. */
function describeJob(job: CronJob): string {
  const next = job.state === 'scheduled' && job.next_run_at !== null ? `next ${new Date(job.next_run_at).toISOString()}` : job.state;
  return `${job.schedule.display} (${job.tz}), ${next}, delivered to ${job.deliver.join(', ')}`;
}
