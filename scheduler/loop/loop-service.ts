/**
 * Applying `/loop` and `/heartbeat` commands to a session: the pure state
 * functions decide, the store persists. Shared by every surface (CLI, chat,
 * Telegram, `/api`), so the rules live in one place.
 *
 * No silent writes (docs/DESIGN.md §6): a reply that claims a change is only produced
 * after Redis confirmed it; a refused write surfaces as `StoreUnavailableError`
 * for the caller to report, and is logged at WARNING here.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { StoreUnavailableError } from '../errors/store-unavailable-error.ts';
import type { LoopKind } from '../tick/tick-kind.ts';
import { formatSeconds } from '../interval.ts';
import { createLoop, pauseLoop, resumeDueAt, resumeLoop, sameLoop, type LoopRecord } from './loop-state.ts';
import type { ScheduleEconomy } from '../economy/economy-flags.ts';
import type { LoopOverlap } from './loop-overlap.ts';
import { assertDeliverList, NO_WEBHOOK_ALLOW } from '../delivery/deliver-list.ts';
import type { WebhookAllowList } from '../delivery/webhook-policy.ts';
import { budgetSetWarning } from '../economy/token-budget.ts';
import { agentCreatorText, type AgentCreator, type Origin, type RunnerSpec } from '../session/origin.ts';
import { formatSpend } from '../model-spend.ts';
import type { LoopStore } from './loop-store.ts';
import { assertSessionId } from '../session/session-id.ts';
import { CONFLICT, retryOnConflict } from '../store/optimistic-retry.ts';
import { clip } from '../text/clip.ts';

/** What a `set` asks for (already parsed and validated). */
export interface LoopSpec {
  prompt: string;
  intervalSeconds: number | null;
  times: number | null;
  until: string | null;
  notes: string[];
  /** `--notify`, `--watch`, `--max-tokens`, `--model`; absent = none. */
  economy?: ScheduleEconomy;
  /** A name to refer to it by (the agent's `schedules` tool names what it makes). */
  name?: string;
  /** `--overlap` (`loop-overlap.ts`); absent = `queue`. */
  overlap?: LoopOverlap;
  /**
   * `--deliver`: where replies go besides the session, delivery targets in their text form
   * (`parseDeliverList`); absent = the route it is set from. Webhooks are checked here (`webhookAllow`).
   */
  deliver?: string[];
}

/** Settings the service needs (from `loops.*`). */
export interface LoopServiceSettings {
  maxTicks: number;
  selfPacedFloorSeconds: number;
  /** Checks the economy flags against the operator's config for a surface (`../economy/economy-check.ts`). @throws ScheduleInputError */
  checkEconomy?: (economy: ScheduleEconomy, surface: string) => void;
  /**
   * The warning for agent turns without a model (`agent-model.ts`) on `model` (`--model`), set from
   * `surface`, or `undefined` when they have one; the reply that sets an agent schedule ends with it.
   */
  noModelWarning?: (model: string | null | undefined, surface: string) => string | undefined;
  /** `delivery.webhook_allow`, parsed: a `--deliver` webhook must pass its rule (`../delivery/webhook-policy.ts`). Default: the strict rule. */
  webhookAllow?: WebhookAllowList;
  /**
   * Warnings for `--deliver` platform targets without a bot token in this configuration
   * (`../delivery/unconfigured-platform.ts`) set from `surface`; the reply ends with them.
   */
  deliveryWarnings?: (deliver: readonly string[], surface: string) => string[];
}

const LABEL: Record<LoopKind, string> = { loop: 'Loop', heartbeat: 'Heartbeat' };

/**
 * Set, pause, resume, stop and describe a session's loop or heartbeat.
 *
 * Concurrency: every change of one session's loop record runs under a short
 * mutation lock in Redis, so the record and its job scheduler are always
 * written by the same change (four processes replacing a loop at once end
 * with one loop whose job scheduler matches its record).
 */
export class LoopService {
  constructor(
    private readonly store: LoopStore,
    private readonly settings: LoopServiceSettings,
    private readonly log: Logger,
  ) {}

  private async exclusive<T>(sessionId: string, kind: LoopKind, fn: () => Promise<T>): Promise<T> {
    assertSessionId(sessionId);
    const release = await this.guard(kind, sessionId, () => this.store.lockMutation(sessionId, kind));
    try {
      return await fn();
    } finally {
      await release();
    }
  }

  /**
   * Create or replace the session's loop record of `kind`; its first tick is due now.
   * The same loop sent again while it is active changes nothing and fires
   * nothing: the reply says it is already set and when it fires next (F18).
   * @param ctx.createdBy - the agent made it (`schedules` tool): kept on the record, shown in status
   * @returns the reply for the user
   * @throws ScheduleInputError for a bad session id; StoreUnavailableError when Redis refused the write
   */
  async set(
    sessionId: string,
    kind: LoopKind,
    spec: LoopSpec,
    ctx: { origin: Origin; runner: RunnerSpec; now?: number; createdBy?: AgentCreator },
  ): Promise<string> {
    // Bad input changes nothing: the flags and the targets are checked before the lock and the write.
    if (spec.economy) this.settings.checkEconomy?.(spec.economy, ctx.origin.surface);
    if (spec.deliver) assertDeliverList(spec.deliver, this.settings.webhookAllow ?? NO_WEBHOOK_ALLOW);
    return await this.exclusive(sessionId, kind, async () => {
      const now = ctx.now ?? Date.now();
      const current = await this.guard(kind, sessionId, () => this.store.get(sessionId, kind));
      if (current && sameLoop(current, { kind, ...spec, ...spec.economy, runner: ctx.runner })) {
        const next = await this.guard(kind, sessionId, () => this.store.nextDueAt(current));
        const when =
          next === undefined ? 'next tick pending' : next <= now ? 'next tick due now' : `next in ${formatSeconds((next - now) / 1000)}`;
        this.log.info({ sessionId, kind, loopId: current.loopId }, `${kind} already set; unchanged`);
        return `${LABEL[kind]} already set: ${cadence(current)} · ${when}. Send a different prompt or interval to replace it.`;
      }
      const record = createLoop({
        kind,
        loopId: randomBytes(6).toString('hex'),
        sessionId,
        prompt: spec.prompt,
        intervalSeconds: spec.intervalSeconds,
        times: spec.times,
        until: spec.until,
        maxTicks: this.settings.maxTicks,
        selfPacedFloorSeconds: this.settings.selfPacedFloorSeconds,
        runner: ctx.runner,
        origin: ctx.origin,
        deliver: spec.deliver,
        now,
        economy: spec.economy,
        overlap: spec.overlap,
        createdBy: ctx.createdBy,
        name: spec.name,
      });
      const { previous, stored } = await this.write(sessionId, kind, () => record);
      if (previous?.watch) await this.guard(kind, sessionId, () => this.store.forgetWatch(sessionId, kind));
      await this.guard(kind, sessionId, () => this.store.arm(stored!, now));
      this.log.info({ sessionId, kind, loopId: record.loopId, intervalSeconds: record.intervalSeconds }, `${kind} set`);
      const lines = [...spec.notes];
      if (previous && previous.status !== 'finished') lines.push(`Replaced the previous ${kind} ("${clip(previous.prompt, 60)}").`);
      lines.push(`${LABEL[kind]} set: ${cadence(record)} · ${budget(record)} — first tick now.`);
      lines.push(`Prompt: ${clip(record.prompt, 200)}`);
      // An agent schedule without a model would fail every tick: said now, not at the first failure.
      const warning = ctx.runner.kind === 'agent' ? this.settings.noModelWarning?.(record.model, ctx.origin.surface) : undefined;
      if (warning) lines.push(warning);
      // And a platform target no gateway can send to: its replies would wait in the outbound queue.
      if (record.deliver)
        lines.push(...(this.settings.deliveryWarnings?.(record.deliver, ctx.origin.surface) ?? []).map((w) => `Warning: ${w}`));
      // So would a budget one tick uses up: the last tick of the schedule this one replaces says what one costs.
      const tooSmall = budgetSetWarning(record.maxTokens, previous?.spend, 'tick');
      if (tooSmall) lines.push(`Warning: ${tooSmall}`);
      return lines.join('\n');
    });
  }

  /** Pause; the job scheduler is removed so nothing fires. @returns the reply */
  async pause(sessionId: string, kind: LoopKind, now = Date.now()): Promise<string> {
    return await this.exclusive(sessionId, kind, async () => {
      const { previous, stored } = await this.write(sessionId, kind, (cur) =>
        cur && cur.status === 'active' ? pauseLoop(cur, now) : undefined,
      );
      if (!previous) return `No ${kind} in this session.`;
      if (!stored) return `${LABEL[kind]} is ${previous.status}; nothing to pause.`;
      await this.guard(kind, sessionId, () => this.store.removeScheduler(sessionId, kind));
      return `${LABEL[kind]} paused after ${await this.ticksSoFar(stored)}. /${kind} resume continues it.`;
    });
  }

  /** Resume a paused loop or heartbeat: one tick at the next point of its cadence, never a burst. @returns the reply */
  async resume(sessionId: string, kind: LoopKind, now = Date.now()): Promise<string> {
    return await this.exclusive(sessionId, kind, async () => {
      const { previous, stored } = await this.write(sessionId, kind, (cur) =>
        cur && cur.status === 'paused' ? resumeLoop(cur, now) : undefined,
      );
      if (!previous) return `No ${kind} in this session.`;
      if (!stored) return `${LABEL[kind]} is ${previous.status}; nothing to resume.`;
      const due = resumeDueAt(stored, now);
      await this.guard(kind, sessionId, () => this.store.arm(stored, due));
      return `${LABEL[kind]} resumed: ${cadence(stored)} · next tick ${due <= now ? 'now' : `in ${formatSeconds((due - now) / 1000)}`}.`;
    });
  }

  /**
   * Wake an active loop or heartbeat: its next tick is due now (a signed webhook's `wake_loop`). A
   * fixed schedule's cadence continues from this tick, a failed tick's back-off wait ends (the failure
   * streak stays), a self-paced loop's next delay is chosen after this tick as after any. Nothing fires
   * for a paused or finished one. A tick that is running when the wake comes: a fixed schedule's woken
   * tick runs after it; a self-paced loop's running tick chooses the next due time when it commits,
   * so it stands for the wake. Two wakes before the woken tick starts make one tick.
   * @returns the record woken and when its tick is due, or the record found (`null`: none) when it is not active
   * @throws ScheduleInputError for a bad session id; StoreUnavailableError when Redis refused the write
   */
  async wake(
    sessionId: string,
    kind: LoopKind,
    now = Date.now(),
  ): Promise<{ woken: true; record: LoopRecord; dueAt: number } | { woken: false; record: LoopRecord | null }> {
    return await this.exclusive(sessionId, kind, async () => {
      const { previous, stored } = await this.write(sessionId, kind, (cur) => {
        if (!cur || cur.status !== 'active') return undefined;
        const nextDueAt = cur.mode === 'self-paced' ? now : null;
        return cur.nextDueAt === nextDueAt ? undefined : { ...cur, nextDueAt, updatedAt: now };
      });
      const record = stored ?? previous;
      if (!record || record.status !== 'active') return { woken: false, record };
      await this.guard(kind, sessionId, () => this.store.arm(record, now));
      this.log.info({ sessionId, kind, loopId: record.loopId }, `${kind} woken: next tick now`);
      return { woken: true, record, dueAt: now };
    });
  }

  /** Stop for good (the record is kept as finished for status). @returns the reply */
  async stop(sessionId: string, kind: LoopKind, now = Date.now()): Promise<string> {
    return await this.exclusive(sessionId, kind, async () => {
      const { previous, stored } = await this.write(sessionId, kind, (cur) =>
        cur && cur.status !== 'finished' ? { ...cur, status: 'finished', statusReason: 'stopped by user', updatedAt: now } : undefined,
      );
      if (!previous) return `No ${kind} in this session.`;
      await this.guard(kind, sessionId, () => this.store.removeScheduler(sessionId, kind));
      if (previous.watch) await this.guard(kind, sessionId, () => this.store.forgetWatch(sessionId, kind));
      if (!stored) return `${LABEL[kind]} was already finished.`;
      return `${LABEL[kind]} stopped after ${await this.ticksSoFar(stored)}.`;
    });
  }

  /**
   * `N tick(s)` for a pause or stop reply. A tick claimed before the pause or stop runs to its
   * end and its reply still comes (docs/RELIABILITY.md, "Ticks fire on the record as it is at
   * claim time"), so it is counted and the reply says so (field report F29).
   */
  private async ticksSoFar(record: LoopRecord): Promise<string> {
    const running = await this.guard(record.kind, record.sessionId, () => this.store.getInflight(record.sessionId, record.kind));
    if (!running) return `${record.ticksUsed} tick(s)`;
    return `${record.ticksUsed + 1} tick(s): tick #${running.tick} is still running, and its reply will still come`;
  }

  /** One status line. */
  async status(sessionId: string, kind: LoopKind, now = Date.now()): Promise<string> {
    assertSessionId(sessionId);
    const record = await this.store.get(sessionId, kind);
    if (!record) return `No ${kind} in this session.`;
    const next = record.status === 'active' ? await this.store.nextDueAt(record) : undefined;
    return statusLine(record, now, next);
  }

  /**
   * Read-modify-write with the store's version check, retried on a concurrent
   * write. `change` returns the new record or `undefined` for "no change".
   */
  private async write(
    sessionId: string,
    kind: LoopKind,
    change: (cur: LoopRecord | null) => LoopRecord | undefined,
  ): Promise<{ previous: LoopRecord | null; stored: LoopRecord | null }> {
    assertSessionId(sessionId);
    return await retryOnConflict(
      async () => {
        const previous = await this.guard(kind, sessionId, () => this.store.get(sessionId, kind));
        const next = change(previous);
        if (!next) return { previous, stored: null };
        const expected = previous ? previous.version : 'absent';
        const stored = await this.guard(kind, sessionId, () => this.store.put({ ...next, version: previous?.version ?? 0 }, expected));
        return stored ? { previous, stored } : CONFLICT;
      },
      () => new StoreUnavailableError(`The ${kind} of session ${sessionId} kept changing; try again.`),
    );
  }

  /** Run a store call; a failure is logged at WARNING and rethrown as StoreUnavailableError. */
  private async guard<T>(kind: LoopKind, sessionId: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      this.log.warn({ sessionId, kind, err: (err as Error).message }, `${kind} write not confirmed by Redis`);
      if (err instanceof StoreUnavailableError) throw err;
      throw new StoreUnavailableError(`Redis did not confirm the ${kind} change: ${(err as Error).message}`, { cause: err });
    }
  }
}

/** `every 10m` or `self-paced (now 2m)`. */
export function cadence(r: LoopRecord): string {
  return r.mode === 'fixed' ? `every ${formatSeconds(r.intervalSeconds ?? 0)}` : `self-paced (now ${formatSeconds(r.delaySeconds ?? 0)})`;
}

function budget(r: LoopRecord): string {
  const parts: string[] = [];
  if (r.times !== null) parts.push(`${r.times} times`);
  parts.push(r.maxTicks > 0 ? `budget ${r.maxTicks} ticks` : 'no tick budget');
  if (r.until) parts.push(`until ${clip(r.until, 80)}`);
  if (r.overlap) parts.push(`overlap ${r.overlap}`);
  parts.push(...economyParts(r));
  return parts.join(' · ');
}

/** `--notify done`, `watch ci`, `model cheap`, `max 200,000 tokens` as shown in replies and status. */
function economyParts(r: LoopRecord): string[] {
  const parts: string[] = [];
  if (r.notify && r.notify !== 'auto') parts.push(`notify ${r.notify}`);
  if (r.watch) parts.push(`watch ${clip(r.watch, 60)}`);
  if (r.model) parts.push(`model ${r.model}`);
  if (r.maxTokens) parts.push(`max ${r.maxTokens.toLocaleString('en-US')} tokens (${(r.budgetTokens ?? 0).toLocaleString('en-US')} used)`);
  return parts;
}

/**
 * The status line of docs/DESIGN.md §4: state, cadence, ticks used/budget, next due, prompt.
 * @param nextDueAt - epoch ms of the next tick when known
 */
export function statusLine(r: LoopRecord, now: number, nextDueAt?: number): string {
  const used = r.maxTicks > 0 ? `${r.ticksUsed}/${r.maxTicks}` : `${r.ticksUsed}`;
  const parts = [`${r.kind}: ${r.status}${r.statusReason ? ` (${r.statusReason})` : ''}`, cadence(r), `ticks ${used}`];
  if (r.times !== null) parts.push(`times ${r.ticksUsed}/${r.times}`);
  if (r.status === 'active') {
    parts.push(
      nextDueAt === undefined ? 'next: pending' : nextDueAt <= now ? 'next: due now' : `next in ${formatSeconds((nextDueAt - now) / 1000)}`,
    );
  }
  if (r.silentTicks) parts.push(`${r.silentTicks} silent`);
  if (r.unchangedTicks) parts.push(`${r.unchangedTicks} unchanged`);
  parts.push(...economyParts(r));
  if (r.spend) parts.push(formatSpend(r.spend));
  if (r.createdBy) parts.push(createdByText(r.createdBy));
  parts.push(`“${clip(r.prompt, 60)}”`);
  return parts.join(' · ');
}

/** `made by the agent (telegram)` (`, after reading a tool's output` when marked): who made an agent-made schedule, as status lines show it. */
export function createdByText(c: AgentCreator): string {
  return `made by ${agentCreatorText(c)}`;
}
