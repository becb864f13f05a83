/**
 * `schedules` (built in; `tools.schedules`): the agent schedules for the user.
 * "Remind me every weekday at 9" in a chat becomes a cron job delivered back
 * to that chat; "watch the deploy every 10 minutes" a loop in its session.
 *
 * Actions: `create`, `list`, `update`, `pause`, `resume`, `remove`, `run`
 * (cron jobs), and `next` (a self-paced loop's tick sets its next delay).
 * Kinds: `loop`, `heartbeat`, `cron`. The rules, once:
 *
 * - Where it acts. What a chat's turn creates belongs to that chat: loops and
 *   heartbeats go to the turn's session with the turn's origin (so ticks answer
 *   in the chat), a cron job records the session (`created_by`) and delivers to
 *   the chat's route by default (`local` without one); `deliver` may name only
 *   this chat (`origin`, its `telegram:`, `slack:` or `discord:` target) or `local`. `list` shows the
 *   session's loop and heartbeat and the cron jobs made in it or delivering to
 *   it; every other action finds its schedule among those only, so another
 *   chat's schedules are neither shown nor changed (nor named in an error).
 *   A command job (`--script`) or command loop is listed but never changed.
 * - Never a command turn: every schedule runs the agent; an argument naming a
 *   program (`script`, `command`, `run`, …) is refused, as is `model` (the
 *   operator's choice). The turns of what it creates answer to the creating
 *   surface's `tools.allow_from` (a loop's ticks to its origin; a cron job's
 *   runs to `cron` and that surface, `cronToolSurfaces`), never more.
 * - Who may use it (`tools.schedules.allow_from`): each surface the turn
 *   answers to, and for a tick, a goal turn or a cron run its kind too
 *   (`loop`, `heartbeat`, `goal`, `cron`); by default the chat surfaces and
 *   `cli`, so a scheduled turn cannot schedule more turns. A self-paced loop's
 *   tick is offered the tool for `next` alone. A `/v1` request, a judge and a
 *   `--watch` check never get it.
 * - Limits: `max_per_session` schedules active or paused in the chat's scope;
 *   `max_created_per_day` creations per session in any 24 hours
 *   (`AgentScheduleLedger`); `max_created_per_turn` creations per turn
 *   (`ToolTurn.schedulesCreated`). The creations and changes of one session run one
 *   after another in this process (`serial`); one turn per session across the
 *   fleet does the rest.
 * - Validation and errors are those of `/loop`, `/heartbeat` and
 *   `hermes cron add`/`/api` (the same parsers and services), returned to the
 *   model as the call's result so it can correct itself; nothing is written.
 * - Every creation and change is recorded (`createdBy`/`created_by` with the
 *   surface, shown by `/loop status`, `hermes status`, `cron list/show`, the
 *   console, `/api`) and announced by the product itself: a `notice` on the
 *   session's stream and a message to its route ("Scheduled: …", with how to
 *   undo it), whatever the model says. What a turn makes while its context holds
 *   a tool's output (`ToolTurn.toolOutput`) is marked `from_tool_output`, in the
 *   record and the announcement (`creatorOf`).
 */
import type { Logger } from 'pino';
import { ToolError } from '../../scheduler/errors/tool-error.ts';
import { isHermesError } from '../../scheduler/errors/hermes-error.ts';
import { SCHEDULE_TOOL_SURFACES, type HermesConfig } from '../../scheduler/config/config.ts';
import { parseHeartbeatInterval } from '../../scheduler/loop/heartbeat-command.ts';
import { parseIntervalField, parseLoopInterval } from '../../scheduler/loop/loop-command.ts';
import { cadence, statusLine, type LoopService, type LoopSpec } from '../../scheduler/loop/loop-service.ts';
import type { LoopRecord } from '../../scheduler/loop/loop-state.ts';
import { NOTIFY_MODES, parseNotify, type NotifyMode } from '../../scheduler/economy/notify.ts';
import { agentCreatorText, ORIGIN_SURFACES, type AgentCreator, type Origin } from '../../scheduler/session/origin.ts';
import type { LoopStore } from '../../scheduler/loop/loop-store.ts';
import { clampSelfPacedDelay } from '../../scheduler/loop/self-paced.ts';
import { defaultName, type CronJob, type CronJobCreator } from '../../scheduler/cron/cron-job.ts';
import type { CronService } from '../../scheduler/cron/cron-service.ts';
import { formatInZone } from '../../scheduler/cron/cron-engine.ts';
import { parseAfterSpecs } from '../../scheduler/cron/cron-after.ts';
import { formatDeliveryTarget, parseDeliveryTarget, targetOfRoute, type MessagingRoute } from '../../scheduler/delivery/delivery-target.ts';
import { formatSeconds, MAX_TIMES } from '../../scheduler/interval.ts';
import type { AgentScheduleLedger } from './agent-schedule-ledger.ts';
import type { LoopKind } from '../../scheduler/tick/tick-kind.ts';
import { SCHEDULES_TOOL, surfaceRefusal, type AgentTool, type ToolParameters, type ToolScope, type ToolTurn } from './tool.ts';
import { clip } from '../../scheduler/text/clip.ts';

export const SCHEDULE_ACTIONS = ['create', 'list', 'update', 'pause', 'resume', 'remove', 'run', 'next'] as const;
type Action = (typeof SCHEDULE_ACTIONS)[number];
export const SCHEDULE_KINDS = ['loop', 'heartbeat', 'cron'] as const;
type Kind = (typeof SCHEDULE_KINDS)[number];

/** What the tool uses. */
export interface SchedulesToolDeps {
  config: Pick<HermesConfig, 'tools' | 'loops' | 'heartbeat' | 'agent'>;
  loops: LoopStore;
  schedules: LoopService;
  cron: CronService;
  ledger: AgentScheduleLedger;
  /** Tell the chat what the agent did: a `notice` on the session's stream and a message to its route. */
  announce(input: { sessionId: string; origin: Origin; text: string; action: Action; kind: Kind; id: string }): Promise<void>;
  log?: Logger;
  /** Epoch ms source (tests may pin it). */
  clock?: () => number;
}

/** The surfaces of a turn a schedule's record can name (a cron run's `cron` is always among a job's). */
function originSurfaces(surfaces: readonly string[]): Array<Origin['surface']> {
  return surfaces.filter((s): s is Origin['surface'] => (ORIGIN_SURFACES as readonly string[]).includes(s));
}

/** Arguments that would name a program: refused, with the reason, whatever their value. */
const PROGRAM_FIELDS = ['script', 'command', 'run', 'cmd', 'exec', 'shell', 'program', 'argv'];

const PARAMETERS: ToolParameters = {
  type: 'object',
  properties: {
    action: { type: 'string', enum: [...SCHEDULE_ACTIONS] },
    kind: { type: 'string', enum: [...SCHEDULE_KINDS], description: 'create: what to make; other actions: optional filter' },
    schedule: { type: 'string', description: 'cron: "weekdays at 9am", "every 2h", "0 9 * * 1-5", "in 30m" or an ISO time' },
    interval: { type: 'string', description: 'loop or heartbeat: "10m", "2h"; a loop without one paces itself' },
    prompt: { type: 'string', description: 'what each run asks the agent to do' },
    times: { type: 'integer', minimum: 1, description: 'loop: finish after this many ticks; cron: after this many runs' },
    until: { type: 'string', description: 'loop: a condition that finishes it when met' },
    name: { type: 'string' },
    tz: { type: 'string', description: 'cron: IANA zone, e.g. Europe/Berlin' },
    deliver: {
      type: 'string',
      description: '"origin" (this chat, the default) or "local" (a cron job: its own run stream; a loop or heartbeat: this session only)',
    },
    notify: {
      type: 'string',
      description: `which replies and notices reach the targets: ${NOTIFY_MODES.join('|')} (auto: all but [SILENT]; done: only the last)`,
    },
    id: { type: 'string', description: 'id or name of the schedule to act on' },
    after: {
      type: 'string',
      description:
        'cron: comma list of cron jobs of this chat (id or name) this one runs after, each "<job>" (its runs that end ok), "<job>:error" or "<job>:any"; `schedule` may then be left out; update: replaces the list, "none" clears it',
    },
    after_all: {
      type: 'boolean',
      description:
        'cron, with two `after` jobs or more: one run once every one of them has run, with the latest output of each, instead of one after each; update: false goes back to after each',
    },
    in: { type: 'string', description: 'next: delay to the next tick of this self-paced loop, e.g. "7m"' },
  },
  required: ['action'],
  additionalProperties: false,
};

const STRING_FIELDS = [
  'action',
  'kind',
  'schedule',
  'interval',
  'prompt',
  'until',
  'name',
  'tz',
  'deliver',
  'notify',
  'id',
  'in',
  'after',
] as const;
type Args = { action: Action; kind?: Kind; times?: number; after_all?: boolean } & Partial<
  Record<Exclude<(typeof STRING_FIELDS)[number], 'action' | 'kind'>, string>
>;

/** A schedule of the chat: its loop or heartbeat, or a cron job in its scope. */
type Found = { kind: LoopKind; loop: LoopRecord } | { kind: 'cron'; job: CronJob };

/** Whose schedules a call sees: the turn's session, and its route (cron jobs delivering there). */
interface ChatScope {
  sessionId: string;
  route: MessagingRoute | undefined;
}

/** Build the tool. */
export function schedulesTool(deps: SchedulesToolDeps): AgentTool {
  const settings = deps.config.tools.schedules;
  const now = deps.clock ?? Date.now;
  const chains = new Map<string, Promise<unknown>>();

  /** Run `fn` after the earlier changes of `sessionId` in this process (see the top of this file). */
  const serial = async <T>(sessionId: string, fn: () => Promise<T>): Promise<T> => {
    const before = chains.get(sessionId) ?? Promise.resolve();
    const run = before.then(fn, fn);
    const tail = run.catch(() => {});
    chains.set(sessionId, tail);
    try {
      return await run;
    } finally {
      if (chains.get(sessionId) === tail) chains.delete(sessionId);
    }
  };

  const tool: AgentTool = {
    name: SCHEDULES_TOOL,
    description:
      'Create and manage the schedules of this chat: a loop or heartbeat in this session (interval), or a cron job (schedule) that answers here. ' +
      'Use it when the user asks for something recurring or at a time. Every schedule runs you (the agent), never a command. ' +
      'Other actions act on a schedule by id or name (list shows them).',
    parameters: PARAMETERS,
    groups: [SCHEDULES_TOOL],
    refusal: (scope) => refusalFor(scope, settings.allow_from),
    promptNote(scope) {
      if (!scope.turn) return undefined;
      const pacing = scope.turn.selfPaced
        ? ' In this self-paced loop\'s tick, call it with action "next" and "in" (e.g. "7m") to set when the next tick comes.'
        : '';
      if (refusingSurface(scope, settings.allow_from) !== undefined) return pacing.trim() || undefined;
      return (
        'You can schedule for the user with the `schedules` tool: a loop or heartbeat in this chat, or a cron job such as "weekdays at 9am" that answers here. ' +
        'When the user asks for something recurring or at a later time, create it instead of answering once. ' +
        'The product tells the user what was scheduled; they undo it with /loop stop, /heartbeat clear, or by asking you to remove it.' +
        pacing
      );
    },
    async call(raw, ctx) {
      const turn = ctx.turn!; // `refusal` keeps the tool from calls outside a turn
      const args = parseArgs(raw);
      if (args.action === 'next') return next(args, turn);
      const refusing = refusingSurface({ surfaces: ctx.surfaces ?? [ctx.surface], turn }, settings.allow_from);
      if (refusing !== undefined) throw refused(notAllowed(refusing, settings.allow_from, ctx.surface));
      if (args.in !== undefined) throw refused('`in` belongs to action "next" (a self-paced loop\'s tick).');
      const scope: ChatScope = { sessionId: ctx.sessionId, route: turn.origin?.route };
      const origin: Origin = turn.origin ?? { surface: originSurfaces([ctx.surface])[0] ?? 'cli' };
      try {
        switch (args.action) {
          case 'list':
            return await list(scope, args.kind);
          case 'create':
            return await serial(scope.sessionId, () => create(args, scope, origin, ctx.surfaces ?? [ctx.surface], turn));
          default:
            return await serial(scope.sessionId, () => change(args, scope, origin, ctx.surfaces ?? [ctx.surface], turn));
        }
      } catch (err) {
        // Bad input and refused writes are told to the model in the services' own words; nothing was written.
        if (err instanceof ToolError) throw err;
        if (isHermesError(err)) throw refused(err.message);
        throw err;
      }
    },
  };

  /**
   * Tell the chat (`deps.announce`). The schedule is written already: a failure to tell is
   * logged and returned for the model to pass on, never taken for a failed change.
   */
  async function tell(input: Parameters<SchedulesToolDeps['announce']>[0]): Promise<string> {
    try {
      await deps.announce(input);
      return 'The user was told.';
    } catch (err) {
      deps.log?.warn({ sessionId: input.sessionId, err: (err as Error).message }, 'schedules: the announcement was not delivered');
      return `Telling the chat failed (${(err as Error).message}); tell the user yourself.`;
    }
  }

  /** `next`: the delay to this self-paced loop's next tick, committed with the tick (`applyTick` clamps it). */
  function next(args: Args, turn: ToolTurn): string {
    if (!turn.selfPaced) {
      throw refused(
        'Action "next" sets the delay to the next tick of a self-paced loop, from one of its ticks; this turn is not one. Use update to change a schedule.',
      );
    }
    if (args.in === undefined) throw refused('Action "next" needs `in`, the delay to the next tick, e.g. "7m".');
    const asked = inputError(() => parseIntervalField(args.in!, 'in'));
    const { self_paced_floor_seconds: floor, self_paced_ceiling_seconds: ceiling } = deps.config.loops;
    const seconds = clampSelfPacedDelay(asked, floor, ceiling);
    turn.nextTickSeconds = asked;
    const bound =
      seconds === asked
        ? ''
        : ` (${formatSeconds(asked)} is ${asked < floor ? 'below the floor' : 'above the ceiling'}: self-paced delays stay between ${formatSeconds(floor)} and ${formatSeconds(ceiling)}, loops.self_paced_floor_seconds and loops.self_paced_ceiling_seconds)`;
    return `The next tick comes ${formatSeconds(seconds)} after this one ends${bound}.`;
  }

  async function list(scope: ChatScope, kind: Kind | undefined): Promise<string> {
    const t = now();
    const all = await inScope(scope);
    const shown = kind ? all.filter((f) => f.kind === kind) : all;
    if (shown.length === 0) return `No ${kind ? `${kind} ` : ''}schedules in this chat. Create one with action "create".`;
    const lines = await Promise.all(
      shown.map(async (f) => {
        if (f.kind === 'cron') return `- ${cronLine(f.job)}`;
        const nextDue = f.loop.status === 'active' ? await deps.loops.nextDueAt(f.loop) : undefined;
        return `- ${f.kind} ${f.loop.loopId}${f.loop.name ? ` "${f.loop.name}"` : ''}: ${statusLine(f.loop, t, nextDue)}`;
      }),
    );
    return [`Schedules of this chat (${shown.length}):`, ...lines].join('\n');
  }

  /** The chat's loop and heartbeat (not finished) and its cron jobs (see the top of this file). */
  async function inScope(scope: ChatScope): Promise<Found[]> {
    const [loop, heartbeat, jobs] = await Promise.all([
      deps.loops.get(scope.sessionId, 'loop'),
      deps.loops.get(scope.sessionId, 'heartbeat'),
      deps.cron.list({ all: false }),
    ]);
    const out: Found[] = [];
    for (const r of [loop, heartbeat]) if (r && r.status !== 'finished') out.push({ kind: r.kind, loop: r });
    for (const job of jobs) if (cronJobInScope(job, scope)) out.push({ kind: 'cron', job });
    return out;
  }

  /** @param surfaces - every surface the creating turn answers to: a cron job's runs answer to them all */
  async function create(args: Args, scope: ChatScope, origin: Origin, surfaces: readonly string[], turn: ToolTurn): Promise<string> {
    if (args.kind === undefined) throw refused('Action "create" needs `kind`: loop, heartbeat or cron.');
    if (args.id !== undefined) throw refused('`id` names an existing schedule; action "create" makes a new one (give `name` to name it).');
    // Per turn: one answer, whatever text it read, makes at most a few schedules (creations of one session run one at a time, `serial`).
    const createdThisTurn = turn.schedulesCreated ?? 0;
    if (createdThisTurn >= settings.max_created_per_turn) {
      throw refused(
        `This turn already created ${createdThisTurn} schedules; the limit is ${settings.max_created_per_turn} per turn (tools.schedules.max_created_per_turn). Nothing was created: ask the user whether they want more.`,
      );
    }
    const creator = creatorOf(origin, turn);
    const counted = () => (turn.schedulesCreated = createdThisTurn + 1);
    if (args.kind === 'cron') {
      const input = { ...cronInput(args, scope, { creating: true }), after: (await chatAfter(args.after, scope)).after ?? undefined };
      await checkName(args.name, scope);
      await checkLimits(scope);
      const job = await deps.cron.add(input, {
        origin,
        trusted: false,
        createdBy: { ...creator, session_id: scope.sessionId } satisfies CronJobCreator,
        alsoFrom: originSurfaces(surfaces),
      });
      counted();
      await deps.ledger.record(scope.sessionId, job.id, now());
      const told = await tell({
        sessionId: scope.sessionId,
        origin,
        action: 'create',
        kind: 'cron',
        id: job.id,
        text: `Scheduled: ${describeCron(job)} · to undo, ask me to remove it (or hermes cron rm ${job.id})${markText(creator)}`,
      });
      return `Created cron job ${job.id} "${job.name}": ${job.schedule.display} (${job.tz}), next run ${job.next_run_at === null ? '—' : formatInZone(job.next_run_at, job.tz)}, delivered to ${job.deliver.join(', ')}. ${told}`;
    }
    const kind = args.kind;
    const spec = loopSpec(kind, args, undefined, scope);
    const existing = await deps.loops.get(scope.sessionId, kind);
    if (existing && existing.status !== 'finished') {
      throw refused(
        `This chat already has a ${kind} (${existing.loopId}: ${cadence(existing)}, “${clip(existing.prompt, 60)}”); use action "update" to change it, or remove it first.`,
      );
    }
    await checkLimits(scope);
    const reply = await deps.schedules.set(scope.sessionId, kind, spec, { origin, runner: { kind: 'agent' }, createdBy: creator });
    const record = await deps.loops.get(scope.sessionId, kind);
    let told = '';
    if (record && record.loopId !== existing?.loopId) {
      counted();
      await deps.ledger.record(scope.sessionId, record.loopId, now());
      told = ` ${await tell({ sessionId: scope.sessionId, origin, action: 'create', kind, id: record.loopId, text: `Scheduled: ${describeLoop(record)} · ${undo(kind)} to undo${markText(creator)}` })}`;
    }
    return `${reply}\nid ${record?.loopId ?? '?'}, name "${record?.name ?? spec.name}".${told}`;
  }

  /** `update`, `pause`, `resume`, `remove`, `run`: on one schedule of the chat (`surfaces` as for `create`). */
  async function change(args: Args, scope: ChatScope, origin: Origin, surfaces: readonly string[], turn: ToolTurn): Promise<string> {
    const ref = args.id ?? args.name;
    if (ref === undefined || ref.trim() === '')
      throw refused(`Action "${args.action}" needs \`id\` (or \`name\`) of the schedule; action "list" shows them.`);
    const found = await find(ref, args.kind, scope);
    if (found.kind === 'cron' && found.job.script !== null) {
      throw refused(`Cron job ${found.job.id} "${found.job.name}" runs a command (script); only the CLI changes it.`);
    }
    if (found.kind !== 'cron' && found.loop.runner.kind === 'command' && args.action === 'update') {
      throw refused(`The ${found.kind} runs a command; only the CLI changes it (pause, resume and remove work as /${found.kind} does).`);
    }
    const t = now();
    if (found.kind === 'cron') {
      const job = found.job;
      let after: CronJob;
      let text: string;
      switch (args.action) {
        case 'update': {
          const input = {
            ...cronInput({ ...args, ...(args.id === undefined ? { name: undefined } : {}) }, scope, { creating: false }),
            ...(await chatAfter(args.after, scope)),
          };
          if (Object.values(input).every((v) => v === undefined)) throw refused(nothingToChange('cron'));
          if (input.name !== undefined) await checkName(input.name, scope, job.id);
          after = await deps.cron.edit(job.id, input, { origin, trusted: false, alsoFrom: originSurfaces(surfaces) });
          text = `Changed: ${describeCron(after)}`;
          break;
        }
        case 'pause':
          after = (await deps.cron.pause(job.id)).job;
          text = `Paused: ${describeCron(after)} · ask me to resume it`;
          break;
        case 'resume':
          after = (await deps.cron.resume(job.id, { origin, trusted: false })).job;
          text = `Resumed: ${describeCron(after)}`;
          break;
        case 'remove':
          after = await deps.cron.remove(job.id);
          text = `Removed: cron job ${after.id} “${clip(after.prompt, 80)}”`;
          break;
        case 'run': {
          const r = await deps.cron.runNow(job.id, { origin, trusted: false });
          after = r.job;
          text = `Running now: cron job ${after.id} “${clip(after.prompt, 80)}” (outside its schedule)`;
          break;
        }
        default:
          throw refused(unknownAction(args.action));
      }
      return `${text}. ${await tell({ sessionId: scope.sessionId, origin, action: args.action, kind: 'cron', id: job.id, text })}`;
    }
    const kind = found.kind;
    const loop = found.loop;
    let reply: string;
    switch (args.action) {
      case 'update': {
        if (args.id !== undefined && args.name !== undefined) throw refused(`A ${kind} keeps its name; \`name\` only finds it.`);
        const spec = loopSpec(kind, { ...args, name: undefined }, loop, scope);
        // A loop set again from tool output keeps the mark, and one set again keeps the mark it had.
        reply = await deps.schedules.set(scope.sessionId, kind, spec, {
          origin,
          runner: { kind: 'agent' },
          createdBy: creatorOf(origin, turn, loop.createdBy),
        });
        break;
      }
      case 'pause':
        reply = await deps.schedules.pause(scope.sessionId, kind, t);
        break;
      case 'resume':
        reply = await deps.schedules.resume(scope.sessionId, kind, t);
        break;
      case 'remove':
        reply = await deps.schedules.stop(scope.sessionId, kind, t);
        break;
      case 'run':
        throw refused(`Action "run" is for cron jobs; a ${kind} runs on its own cadence (resume a paused one).`);
      default:
        throw refused(unknownAction(args.action));
    }
    const after = await deps.loops.get(scope.sessionId, kind);
    // The same loop sent again changes nothing (`LoopService.set`: "already set"): nothing to announce.
    if (args.action === 'update' && after?.loopId === loop.loopId) return reply;
    const verb = { update: 'Changed', pause: 'Paused', resume: 'Resumed', remove: 'Removed' }[args.action];
    const what = args.action === 'remove' || !after ? `${kind} “${clip(loop.prompt, 80)}”` : describeLoop(after);
    const hint = args.action === 'pause' ? ` · /${kind} resume continues it` : args.action === 'remove' ? '' : ` · ${undo(kind)} to undo`;
    return `${reply}\n${await tell({ sessionId: scope.sessionId, origin, action: args.action, kind, id: after?.loopId ?? loop.loopId, text: `${verb}: ${what}${hint}` })}`;
  }

  /** The schedule `ref` names among the chat's (its id, its name, or `loop`/`heartbeat`). @throws ToolError when none or several match */
  async function find(ref: string, kind: Kind | undefined, scope: ChatScope): Promise<Found> {
    const wanted = ref.trim().toLowerCase();
    const candidates = (await inScope(scope)).filter((f) => kind === undefined || f.kind === kind);
    const byId = candidates.filter((f) => (f.kind === 'cron' ? f.job.id : f.loop.loopId) === ref.trim());
    if (byId.length === 1) return byId[0]!;
    const byName = candidates.filter((f) =>
      f.kind === 'cron' ? f.job.name.toLowerCase() === wanted : f.kind === wanted || (f.loop.name ?? '').toLowerCase() === wanted,
    );
    if (byName.length === 1) return byName[0]!;
    if (byName.length > 1) {
      throw refused(
        `"${ref}" names ${byName.length} schedules of this chat: ${byName.map((f) => (f.kind === 'cron' ? `cron ${f.job.id}` : `${f.kind} ${f.loop.loopId}`)).join(', ')}. Use an id.`,
      );
    }
    throw refused(`No ${kind ?? 'schedule'} "${ref}" in this chat; action "list" shows them.`);
  }

  /** The limits of `tools.schedules` before a creation. @throws ToolError naming the limit */
  async function checkLimits(scope: ChatScope): Promise<void> {
    const active = (await inScope(scope)).filter((f) =>
      f.kind === 'cron' ? f.job.state === 'scheduled' || f.job.state === 'paused' : f.loop.status !== 'finished',
    );
    if (active.length >= settings.max_per_session) {
      throw refused(
        `This chat has ${active.length} schedules (active or paused); the limit is ${settings.max_per_session} (tools.schedules.max_per_session). Remove one first.`,
      );
    }
    const created = await deps.ledger.createdInWindow(scope.sessionId, now());
    if (created >= settings.max_created_per_day) {
      throw refused(
        `${created} schedules were created in this chat in the last 24 hours; the limit is ${settings.max_created_per_day} (tools.schedules.max_created_per_day).`,
      );
    }
  }

  /**
   * A cron job name must be unique among all jobs; a name taken outside the chat is refused
   * without naming that job (another chat's schedules stay invisible).
   */
  async function checkName(name: string | undefined, scope: ChatScope, selfId?: string): Promise<void> {
    if (name === undefined) return;
    const lower = name.trim().replace(/\s+/g, ' ').toLowerCase();
    const holder = (await deps.cron.list({ all: true })).find(
      (j) => j.id !== selfId && (j.name.toLowerCase() === lower || j.id === name.trim()),
    );
    if (!holder) return;
    if (cronJobInScope(holder, scope))
      throw refused(`Cron job ${holder.id} of this chat is already named "${holder.name}"; update it, or choose another \`name\`.`);
    throw refused(`The name "${name}" is taken; choose another \`name\`.`);
  }

  /**
   * `after` as the chat may give it: only cron jobs of this chat (a job after another's runs is offered their
   * output), named by id for the service; `none` clears the list.
   * @throws ToolError for a job not of this chat
   */
  async function chatAfter(after: string | undefined, scope: ChatScope): Promise<{ after?: string[] | null }> {
    if (after === undefined) return {};
    if (after.trim().toLowerCase() === 'none') return { after: null };
    const specs = inputError(() => parseAfterSpecs(after.split(',').filter((s) => s.trim() !== ''))) ?? [];
    const ids: string[] = [];
    for (const spec of specs) {
      const found = await find(spec.ref, 'cron', scope);
      if (found.kind === 'cron') ids.push(`${found.job.id}:${spec.on}`);
    }
    return { after: ids };
  }

  /** The fields of a cron job's add or edit, checked against what the chat may ask. */
  function cronInput(args: Args, scope: ChatScope, mode: { creating: boolean }) {
    if (args.interval !== undefined)
      throw refused('`interval` is for loops and heartbeats; a cron job takes `schedule` (e.g. "every 2h" or "weekdays at 9am").');
    if (args.until !== undefined) throw refused('`until` is for loops; a cron job takes `times` (runs before it completes).');
    if (mode.creating && args.schedule === undefined && args.after === undefined) {
      throw refused(
        'A cron job needs a `schedule`, e.g. "weekdays at 9am", "every 2h", "0 9 * * 1-5", "in 30m" or an ISO time (or `after`: the jobs of this chat it runs after).',
      );
    }
    if (mode.creating && args.prompt === undefined) throw refused('A cron job needs a `prompt`: what each run asks the agent to do.');
    return {
      schedule: args.schedule,
      prompt: args.prompt,
      name: args.name,
      tz: args.tz,
      notify: args.notify,
      repeat: args.times,
      after_all: args.after_all,
      deliver: args.deliver !== undefined ? chatDeliver(args.deliver, scope) : mode.creating ? defaultDeliver(scope) : undefined,
    };
  }

  /**
   * A loop's or heartbeat's `LoopSpec` from the arguments, over `current` for an update (its
   * fields stay unless given; its `--watch`, `--max-tokens` and `--model` stay as they were).
   */
  function loopSpec(kind: LoopKind, args: Args, current: LoopRecord | undefined, scope: ChatScope): LoopSpec {
    if (args.after !== undefined || args.after_all !== undefined)
      throw refused(`\`${args.after !== undefined ? 'after' : 'after_all'}\` is for cron jobs; a ${kind} runs on its own cadence.`);
    if (args.schedule !== undefined || args.tz !== undefined) {
      throw refused(`\`${args.schedule !== undefined ? 'schedule' : 'tz'}\` is for cron jobs; a ${kind} takes \`interval\` (e.g. "10m").`);
    }
    if (kind === 'heartbeat' && (args.times !== undefined || args.until !== undefined)) {
      throw refused(`A heartbeat takes no \`${args.times !== undefined ? 'times' : 'until'}\` (a loop does).`);
    }
    const min = kind === 'loop' ? deps.config.loops.min_interval_seconds : deps.config.heartbeat.min_interval_seconds;
    let intervalSeconds: number | null;
    if (args.interval !== undefined) {
      intervalSeconds = inputError(() =>
        kind === 'loop'
          ? parseLoopInterval(args.interval!, { minIntervalSeconds: min })
          : parseHeartbeatInterval(args.interval!, { minIntervalSeconds: min }),
      );
    } else if (current) {
      intervalSeconds = current.intervalSeconds;
    } else if (kind === 'heartbeat') {
      throw refused(`A heartbeat needs an \`interval\`, e.g. "30m" (at least ${formatSeconds(min)}, heartbeat.min_interval_seconds).`);
    } else {
      intervalSeconds = null; // self-paced
    }
    const prompt = args.prompt !== undefined ? args.prompt.trim() : current?.prompt;
    if (prompt === undefined || prompt === '') throw refused(`A ${kind} needs a \`prompt\`: what each tick asks the agent to do.`);
    const max = deps.config.agent.max_prompt_chars;
    if (prompt.length > max) throw refused(`The prompt is ${prompt.length} characters; the limit is ${max}.`);
    if (args.times !== undefined && args.times > MAX_TIMES)
      throw refused(`\`times\` must be a positive whole number up to ${MAX_TIMES}, got ${args.times}.`);
    if (args.until !== undefined && args.until.trim() === '') throw refused('`until` needs a condition, e.g. "the build is green".');
    let notify: NotifyMode | undefined = current?.notify;
    if (args.notify !== undefined) {
      try {
        notify = parseNotify(args.notify, '`notify`');
      } catch (err) {
        throw refused((err as Error).message);
      }
    }
    const spec: LoopSpec = {
      prompt,
      intervalSeconds,
      times: args.times ?? current?.times ?? null,
      until: args.until?.trim() ?? current?.until ?? null,
      notes: [],
      economy: {
        ...(notify ? { notify } : {}),
        ...(current?.watch ? { watch: current.watch } : {}),
        ...(current?.maxTokens ? { maxTokens: current.maxTokens } : {}),
        ...(current?.model ? { model: current.model } : {}),
      },
      name: cleanName(args.name) ?? current?.name ?? defaultName(prompt, null),
    };
    // The chat's rule for targets, as for a cron job's (`chatDeliver`): this chat, or the session only.
    const deliver = args.deliver !== undefined ? chatDeliver(args.deliver, scope).split(',') : current?.deliver;
    if (deliver) spec.deliver = deliver;
    if (current && !Object.entries(args).some(([k, v]) => v !== undefined && !['action', 'kind', 'id', 'name'].includes(k))) {
      throw refused(nothingToChange(kind));
    }
    return spec;
  }

  return tool;
}

/** Whether a cron job is one of the chat's: made in its session, or delivering to its route. */
export function cronJobInScope(job: CronJob, scope: { sessionId: string; route: MessagingRoute | undefined }): boolean {
  if (job.created_by?.session_id === scope.sessionId) return true;
  const target = scope.route && targetOfRoute(scope.route);
  if (!target) return false;
  const mine = formatDeliveryTarget(target);
  const originIsMine = job.origin.route !== undefined && sameRoute(job.origin.route, scope.route!);
  return job.deliver.some((d) => d === mine || (d === 'origin' && originIsMine));
}

function sameRoute(a: MessagingRoute, b: MessagingRoute): boolean {
  return a.platform === b.platform && a.chatId === b.chatId && (a.threadId ?? '') === (b.threadId ?? '');
}

/** Where a new cron job delivers by default: this chat's route, else `local` (its own run stream). */
function defaultDeliver(scope: { route: MessagingRoute | undefined }): string {
  const target = scope.route && targetOfRoute(scope.route);
  return target ? formatDeliveryTarget(target) : 'local';
}

/** `deliver` as the chat may ask: this chat (`origin` or its own target) or `local`. @throws ToolError for anything else */
function chatDeliver(value: string, scope: { route: MessagingRoute | undefined }): string {
  const own = scope.route && targetOfRoute(scope.route);
  const out: string[] = [];
  for (const raw of value.split(',')) {
    if (raw.trim() === '') continue;
    const t = inputError(() => parseDeliveryTarget(raw));
    const text = formatDeliveryTarget(t);
    if (t.kind === 'local') out.push(text);
    else if (t.kind === 'origin') out.push(own ? formatDeliveryTarget(own) : 'local');
    else if (own && text === formatDeliveryTarget(own)) out.push(text);
    else
      throw refused(
        `A schedule made in a chat answers in that chat: \`deliver\` may be "origin" (this chat) or "local", not "${raw.trim()}".`,
      );
  }
  return out.length > 0 ? [...new Set(out)].join(',') : defaultDeliver(scope);
}

/**
 * The tool's arguments, checked: known fields of the right type only. A field naming a program
 * (`script`, `command`, …) and `model` are refused with the reason.
 * @throws ToolError
 */
function parseArgs(raw: Record<string, unknown>): Args {
  for (const key of Object.keys(raw)) {
    if (PROGRAM_FIELDS.includes(key.toLowerCase())) {
      throw refused(
        `\`${key}\` is not accepted: schedules the agent makes run the agent, never a command or script (only the operator's CLI and config make command turns). Nothing was created.`,
      );
    }
    if (key === 'model') throw refused('`model` is not accepted: the operator chooses models (hermes cron edit --model, /loop --model).');
    if (key !== 'times' && key !== 'after_all' && !(STRING_FIELDS as readonly string[]).includes(key)) {
      throw refused(`Unknown argument \`${key}\`; the arguments are ${[...STRING_FIELDS, 'times', 'after_all'].join(', ')}.`);
    }
  }
  const out: Record<string, unknown> = {};
  for (const key of STRING_FIELDS) {
    const v = raw[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string') throw refused(`\`${key}\` must be a string.`);
    out[key] = v;
  }
  if (raw.times !== undefined && raw.times !== null) {
    if (typeof raw.times !== 'number' || !Number.isInteger(raw.times) || raw.times < 1)
      throw refused(`\`times\` must be a positive whole number up to ${MAX_TIMES}.`);
    out.times = raw.times;
  }
  if (raw.after_all !== undefined && raw.after_all !== null) {
    if (typeof raw.after_all !== 'boolean') throw refused('`after_all` must be true or false.');
    out.after_all = raw.after_all;
  }
  if (out.action === undefined) throw refused(`\`action\` is required: one of ${SCHEDULE_ACTIONS.join(', ')}.`);
  if (!(SCHEDULE_ACTIONS as readonly string[]).includes(out.action as string)) throw refused(unknownAction(out.action as string));
  if (out.kind !== undefined && !(SCHEDULE_KINDS as readonly string[]).includes(out.kind as string)) {
    throw refused(`Unknown kind ${JSON.stringify(out.kind)}: use loop, heartbeat or cron.`);
  }
  return out as Args;
}

/** The surfaces (and turn kind) a turn asks with, for `tools.schedules.allow_from`. */
function scheduleSurfaces(scope: ToolScope): string[] {
  const kind = scope.turn?.kind;
  return [...new Set([...(kind !== undefined && kind !== 'message' ? [kind] : []), ...scope.surfaces])];
}

/** The first of a turn's surfaces (or its kind) `allow_from` does not list. */
function refusingSurface(scope: ToolScope, allow: readonly string[]): string | undefined {
  return scheduleSurfaces(scope).find((s) => !allow.includes(s));
}

/** Why the tool is not offered to a turn (`AgentTool.refusal`), or undefined. */
function refusalFor(scope: ToolScope, allow: readonly (typeof SCHEDULE_TOOL_SURFACES)[number][]): string | undefined {
  if (!scope.turn) return 'The schedules tool acts for a turn of a chat; this call belongs to none.';
  const refusing = refusingSurface(scope, allow);
  if (refusing === undefined || scope.turn.selfPaced) return undefined; // a self-paced tick may still pace itself
  return notAllowed(refusing, allow, scope.surfaces[0]);
}

const SURFACE_WORDS: Record<string, string> = {
  loop: 'loop ticks',
  heartbeat: 'heartbeat ticks',
  goal: 'goal turns',
  cron: 'cron runs',
  v1: '/v1 requests',
};

/**
 * Why the tool is refused: the turn's kind or its own surface is not listed, or (provenance) another
 * surface whose text is in the session's context is not (`own`: the turn's own surface).
 */
function notAllowed(surface: string, allow: readonly string[], own: string | undefined): string {
  const rule = `tools.schedules.allow_from: ${allow.join(', ') || 'none'}`;
  if (surface in SURFACE_WORDS) {
    return (
      `Refused: the schedules tool is not allowed from ${SURFACE_WORDS[surface]} (${rule}); ` +
      'a scheduled turn cannot schedule more turns unless the operator lists it.'
    );
  }
  if (surface === own) return `Refused: the schedules tool is not allowed from ${surface} (${rule}).`;
  return `Refused: ${surfaceRefusal(SCHEDULES_TOOL, surface, own ?? surface, rule)}`;
}

function unknownAction(action: string): string {
  return `Unknown action "${action}": use ${SCHEDULE_ACTIONS.join(', ')}.`;
}

function nothingToChange(kind: Kind): string {
  return kind === 'cron'
    ? 'Nothing to change: give at least one of `schedule`, `prompt`, `name` (with `id`), `tz`, `deliver`, `notify`, `times`.'
    : `Nothing to change: give at least one of \`interval\`, \`prompt\`, \`notify\`${kind === 'loop' ? ', `times`, `until`' : ''}.`;
}

function refused(message: string): ToolError {
  return new ToolError(message, { kind: 'refused', tool: SCHEDULES_TOOL });
}

/** Run a parser of the chat grammar; its input error becomes the call's refusal, in its own words. */
function inputError<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (isHermesError(err)) throw refused(err.message);
    throw err;
  }
}

function cleanName(name: string | undefined): string | undefined {
  if (name === undefined) return undefined;
  const n = name.trim().replace(/\s+/g, ' ');
  if (n === '') throw refused('`name` must not be empty.');
  if (n.length > 80) throw refused(`\`name\` has ${n.length} characters; the limit is 80.`);
  return n;
}

/** `loop every 10m — “check the CI”` (self-paced: `loop, self-paced`). */
function describeLoop(r: LoopRecord): string {
  const when = r.mode === 'fixed' ? `every ${formatSeconds(r.intervalSeconds ?? 0)}` : 'self-paced';
  const times = r.times !== null ? `, ${r.times} times` : '';
  const until = r.until ? `, until ${clip(r.until, 60)}` : '';
  return `${r.kind} ${when}${times}${until} — “${clip(r.prompt, 80)}”`;
}

/** `weekdays at 09:00 Europe/Berlin — “what's new in the repo” · next 2026-03-09 09:00 CET · cron job a1b2…`. */
function describeCron(job: CronJob): string {
  const zone = job.schedule.kind === 'cron' ? ` ${job.tz}` : '';
  const next =
    job.state === 'scheduled' && job.next_run_at !== null
      ? ` · next ${formatInZone(job.next_run_at, job.tz)}`
      : job.state !== 'scheduled'
        ? ` · ${job.state}`
        : '';
  return `${job.schedule.display}${zone} — “${clip(job.prompt, 80)}”${next} · cron job ${job.id}`;
}

/** A cron job's line in `list`. */
function cronLine(job: CronJob): string {
  const by = job.created_by ? ` · made by ${agentCreatorText(job.created_by)}` : '';
  return (
    `cron ${job.id} "${job.name}": ${job.schedule.display} (${job.tz}) · ${job.state}${job.state === 'scheduled' && job.next_run_at !== null ? ` · next ${formatInZone(job.next_run_at, job.tz)}` : ''}` +
    ` · deliver ${job.deliver.join(', ')}${job.script !== null ? ' · runs a command (CLI only)' : ''}${by} · “${clip(job.prompt || job.script || '', 60)}”`
  );
}

/**
 * Who made a schedule: the agent, in a turn from `origin`; marked `from_tool_output` when the turn's
 * context held text a tool brought in (`ToolTurn.toolOutput`), or when `before` (the record it
 * replaces) was marked.
 */
function creatorOf(origin: Origin, turn: ToolTurn, before?: AgentCreator): AgentCreator {
  const marked = turn.toolOutput === true || before?.from_tool_output === true;
  return { by: 'agent', surface: origin.surface, ...(marked ? { from_tool_output: true as const } : {}) };
}

/** What an announcement adds for a schedule made after reading tool output. */
function markText(creator: AgentCreator): string {
  return creator.from_tool_output ? ` · made after reading a tool's output: remove it if you did not ask for it` : '';
}

function undo(kind: LoopKind): string {
  return kind === 'loop' ? '/loop stop' : '/heartbeat clear';
}
