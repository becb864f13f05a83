/**
 * Loop and heartbeat state and its transitions, as pure functions (no I/O).
 * The store persists a `LoopRecord`; the worker asks these functions whether a
 * tick may fire and what the record becomes after a tick.
 *
 * Policies decided here (docs/DESIGN.md §4–§5):
 * - A paused, finished, removed or replaced loop never fires (`decideFire`), nor a
 *   fixed one before the next try of its back-off (below).
 * - Coalescing: an occurrence due before the start of the last tick that ran is
 *   already covered by it and is skipped. So after downtime, or when a tick was
 *   deferred past the next occurrence, exactly one tick runs, never a burst.
 * - Stop order after a tick (`applyTick`): `LOOP_COMPLETE` line → finished;
 *   `--until` verdict → finished/paused; `--times` reached → finished;
 *   `loops.max_consecutive_failures` failed ticks in a row → paused, naming the
 *   last error; `loops.max_ticks` reached → paused (resumable).
 * - Failure streak (field report F19), spend, token budget and watch digest: the
 *   schedule policy every kind shares (`../schedule-policy/schedule-policy.ts`),
 *   with the loops' settings (`loops.max_consecutive_failures`,
 *   `loops.failure_*`): a failed tick still completes and counts against the
 *   budget; the next try comes after a back-off (30 s, doubled after each
 *   further failure, at most 15 min), a success resumes the cadence; the pause
 *   comes after the count of failures in a row once they span
 *   `loops.failure_pause_after_seconds`. `/loop resume` gives N fresh tries. An
 *   `--until` judge that cannot be reached fails open (the loop continues) and
 *   pauses after the same number of judge failures in a row.
 */
import type { LoopKind } from '../tick/tick-kind.ts';
import { clampSelfPacedDelay, nextSelfPacedDelay, replyDigest } from './self-paced.ts';
import type { AgentCreator, Origin, RunnerSpec } from '../session/origin.ts';
import type { ModelSpend, SpendTotals, TurnBudgetOverrun } from '../model-spend.ts';
import { formatSeconds } from '../interval.ts';
import type { ScheduleEconomy } from '../economy/economy-flags.ts';
import type { NotifyMode } from '../economy/notify.ts';
import type { LoopOverlap } from './loop-overlap.ts';
import { clipError, SCHEDULE_POLICY, type FailureRule, type ScheduleLedger, type TurnEnd } from '../schedule-policy/schedule-policy.ts';
import { resolveDeliverList } from '../delivery/deliver-list.ts';

export type LoopStatus = 'active' | 'paused' | 'finished';

/** Persisted state of a session's loop or heartbeat. Times are epoch milliseconds. */
export interface LoopRecord {
  kind: LoopKind;
  /** Random id of this loop; a replaced loop gets a new one, so old ticks are recognised. */
  loopId: string;
  sessionId: string;
  prompt: string;
  mode: 'fixed' | 'self-paced';
  /** Fixed cadence in seconds (fixed mode). */
  intervalSeconds: number | null;
  /** Current delay in seconds (self-paced mode). */
  delaySeconds: number | null;
  times: number | null;
  until: string | null;
  status: LoopStatus;
  /** Why the loop is paused or finished, for the status line. */
  statusReason: string | null;
  ticksUsed: number;
  /** Tick budget snapshot of `loops.max_ticks`; 0 = unlimited. */
  maxTicks: number;
  runner: RunnerSpec;
  origin: Origin;
  /**
   * Where replies and notices go besides the session (`--deliver`), delivery targets in their text
   * form as a cron job keeps them (`scheduler/delivery/deliver-list.ts`); absent = `origin`, the route
   * it was set from, if any (`loopTargets`).
   */
  deliver?: string[];
  createdAt: number;
  updatedAt: number;
  lastTickDueAt: number | null;
  lastTickStartedAt: number | null;
  lastTickFinishedAt: number | null;
  /** Occurrence id of the last tick applied (makes `applyTick` idempotent). */
  lastOccurrenceId: string | null;
  /** Digest of the last normalised reply (self-paced mode). */
  lastDigest: string | null;
  /**
   * Self-paced mode: the due time (epoch ms) of the one tick that may fire
   * next. A tick job due at any other time belongs to a superseded chain
   * (e.g. armed before a pause) and never fires. `null` while paused.
   */
  nextDueAt: number | null;
  /** Consecutive `--until` judge failures. */
  judgeFailures: number;
  /** Consecutive failed ticks (records written before this field existed read as 0). */
  failureStreak?: number;
  /** Error of the last failed tick, cleared by a successful one. */
  lastError?: string | null;
  /** When the first failed tick of the current streak started (epoch ms); absent or `null` while none failed. */
  failingSince?: number | null;
  /** Which replies and notices reach the targets (`--notify`: `../economy/notify.ts`). Absent = `auto`. */
  notify?: NotifyMode;
  /** The check run before the model (`--watch`: `read_file:<path>`, `http_get:<url>` or a command tool's name). */
  watch?: string | null;
  /** Digest of the watch's output at the last tick that ran it. */
  watchDigest?: string | null;
  /** `--max-tokens`: input plus output tokens allowed until the next resume; absent = no limit. */
  maxTokens?: number | null;
  /** Tokens counted against `maxTokens` since it was set or last resumed. */
  budgetTokens?: number;
  /** `--model`: a model the operator declared (`agent.models.<name>`); absent = the primary. */
  model?: string | null;
  /** Model calls and tokens over the schedule's life (`scheduler/model-spend.ts`). */
  spend?: SpendTotals;
  /** Ticks whose reply was quiet (`[SILENT]`: `../economy/silent-reply.ts`). */
  silentTicks?: number;
  /** Ticks that ended without a model call because the watch's output had not changed. */
  unchangedTicks?: number;
  /** `--overlap`: what a tick due while the previous one runs does (`loop-overlap.ts`). Absent = `queue`. */
  overlap?: LoopOverlap;
  /** Set when the agent made it (`schedules` tool); absent = a person did (`/loop`, `hermes loop`, `/api`). */
  createdBy?: AgentCreator;
  /** The name the agent gave it, by which the `schedules` tool refers to it (agent-made schedules only). */
  name?: string;
  /** Incremented on every write; the store writes only over the version it read. */
  version: number;
}

/** The marker an agent prints on its own line when a loop's task is done. */
export const LOOP_COMPLETE = 'LOOP_COMPLETE';

/** True when `reply` has a line that is exactly `LOOP_COMPLETE` (surrounding spaces ignored). */
export function hasLoopComplete(reply: string): boolean {
  return reply.split(/\r?\n/).some((line) => line.trim() === LOOP_COMPLETE);
}

/** Input to `createLoop`. */
export interface NewLoop {
  kind: LoopKind;
  loopId: string;
  sessionId: string;
  prompt: string;
  intervalSeconds: number | null;
  times: number | null;
  until: string | null;
  maxTicks: number;
  /** Self-paced starting delay (`loops.self_paced_floor_seconds`). */
  selfPacedFloorSeconds: number;
  runner: RunnerSpec;
  origin: Origin;
  /** `--deliver`, already checked; absent = the origin's route. */
  deliver?: string[];
  now: number;
  economy?: ScheduleEconomy;
  /** `--overlap`; absent or `queue` = the default. */
  overlap?: LoopOverlap;
  /** The agent made it (`schedules` tool). */
  createdBy?: AgentCreator;
  name?: string;
}

/** A fresh active loop. */
export function createLoop(input: NewLoop): LoopRecord {
  const selfPaced = input.intervalSeconds === null;
  const economy = input.economy ?? {};
  return {
    ...(economy.notify && economy.notify !== 'auto' ? { notify: economy.notify } : {}),
    ...(economy.watch ? { watch: economy.watch } : {}),
    ...(economy.maxTokens ? { maxTokens: economy.maxTokens } : {}),
    ...(economy.model ? { model: economy.model } : {}),
    ...(input.overlap && input.overlap !== 'queue' ? { overlap: input.overlap } : {}),
    ...(input.createdBy ? { createdBy: input.createdBy } : {}),
    ...(input.name ? { name: input.name } : {}),
    ...(input.deliver ? { deliver: input.deliver } : {}),
    kind: input.kind,
    loopId: input.loopId,
    sessionId: input.sessionId,
    prompt: input.prompt,
    mode: selfPaced ? 'self-paced' : 'fixed',
    intervalSeconds: input.intervalSeconds,
    delaySeconds: selfPaced ? input.selfPacedFloorSeconds : null,
    times: input.times,
    until: input.until,
    status: 'active',
    statusReason: null,
    ticksUsed: 0,
    maxTicks: input.kind === 'heartbeat' ? 0 : input.maxTicks,
    runner: input.runner,
    origin: input.origin,
    createdAt: input.now,
    updatedAt: input.now,
    lastTickDueAt: null,
    lastTickStartedAt: null,
    lastTickFinishedAt: null,
    lastOccurrenceId: null,
    lastDigest: null,
    nextDueAt: selfPaced ? input.now : null,
    judgeFailures: 0,
    failureStreak: 0,
    lastError: null,
    failingSince: null,
    version: 0,
  };
}

/**
 * True when `loop` is active and already is exactly the schedule `wanted`
 * describes (same prompt, cadence, `--times`, `--until`, runner, economy flags
 * and `--deliver` targets). Sending
 * the same `/loop` or `/heartbeat` again is then a no-op: it must not fire an
 * extra turn (field report F18). A changed field, or a paused or finished
 * loop, is a new schedule that replaces it and fires now.
 */
export function sameLoop(
  loop: LoopRecord | null,
  wanted: {
    kind: LoopKind;
    prompt: string;
    intervalSeconds: number | null;
    times: number | null;
    until: string | null;
    runner: RunnerSpec;
    deliver?: string[];
    overlap?: LoopOverlap;
  } & ScheduleEconomy,
): boolean {
  return (
    loop !== null &&
    loop.status === 'active' &&
    loop.kind === wanted.kind &&
    loop.prompt === wanted.prompt &&
    loop.intervalSeconds === wanted.intervalSeconds &&
    loop.times === wanted.times &&
    loop.until === wanted.until &&
    JSON.stringify(loop.runner) === JSON.stringify(wanted.runner) &&
    JSON.stringify(loop.deliver ?? null) === JSON.stringify(wanted.deliver ?? null) &&
    (loop.notify ?? 'auto') === (wanted.notify ?? 'auto') &&
    (loop.watch ?? null) === (wanted.watch ?? null) &&
    (loop.maxTokens ?? null) === (wanted.maxTokens ?? null) &&
    (loop.model ?? null) === (wanted.model ?? null) &&
    (loop.overlap ?? 'queue') === (wanted.overlap ?? 'queue')
  );
}

/**
 * Where a loop's replies and notices go besides its session: its `deliver` targets (`--deliver`) with
 * `origin` resolved to the route it was set from, or without `deliver` that route; `local` is the
 * session itself and is left out. Text forms, as `parseDeliveryTarget` reads them.
 */
export function loopTargets(loop: Pick<LoopRecord, 'deliver' | 'origin'>): string[] {
  return resolveDeliverList(loop.deliver ?? ['origin'], loop.origin.route).filter((t) => t !== 'local');
}

/** One due tick as the worker sees it. */
export interface TickRef {
  loopId: string;
  /** When the occurrence was due (epoch ms). */
  dueAt: number;
  occurrenceId: string;
}

export type FireDecision =
  | { fire: true }
  | {
      fire: false;
      reason: 'removed' | 'replaced' | 'paused' | 'finished' | 'coalesced' | 'superseded' | 'backing-off' | 'already-applied';
    };

/** May this tick fire now? (pure; see the policies at the top of this file) */
export function decideFire(loop: LoopRecord | null, tick: TickRef): FireDecision {
  if (!loop) return { fire: false, reason: 'removed' };
  if (loop.loopId !== tick.loopId) return { fire: false, reason: 'replaced' };
  if (loop.lastOccurrenceId === tick.occurrenceId) return { fire: false, reason: 'already-applied' };
  if (loop.status === 'paused') return { fire: false, reason: 'paused' };
  if (loop.status === 'finished') return { fire: false, reason: 'finished' };
  if (loop.mode === 'self-paced' && loop.nextDueAt !== tick.dueAt) return { fire: false, reason: 'superseded' };
  // A fixed loop backing off after a failed tick: nothing fires before the next try (`FailurePolicy`).
  if (loop.mode === 'fixed' && loop.nextDueAt !== null && tick.dueAt < loop.nextDueAt) return { fire: false, reason: 'backing-off' };
  if (loop.lastTickStartedAt !== null && tick.dueAt < loop.lastTickStartedAt) {
    return { fire: false, reason: 'coalesced' };
  }
  return { fire: true };
}

/**
 * The earliest occurrence of a fixed loop, on the cadence of its last tick, that is due before `dueAt` and
 * that `decideFire` would still let fire (not covered by the last tick, not backing off), or `undefined`
 * when there is none or the loop is self-paced or has not ticked yet (pure). A tick due at `dueAt` that
 * finds one yields to it while its job waits (docs/RELIABILITY.md, "Earliest waiting tick first").
 */
export function earlierOpenSlot(loop: LoopRecord, dueAt: number): number | undefined {
  if (loop.mode !== 'fixed' || !loop.intervalSeconds || loop.lastTickDueAt === null) return undefined;
  const intervalMs = loop.intervalSeconds * 1000;
  const from = Math.max(loop.lastTickDueAt + intervalMs, loop.lastTickStartedAt ?? 0, loop.nextDueAt ?? 0);
  const slot = loop.lastTickDueAt + intervalMs * Math.max(1, Math.ceil((from - loop.lastTickDueAt) / intervalMs));
  return slot < dueAt ? slot : undefined;
}

/** Verdict of an `--until` judge (issue: full /loop). `error` = the judge call failed. */
export type UntilVerdict =
  { verdict: 'done' | 'continue' } | { verdict: 'blocked'; reason: string } | { verdict: 'error'; message: string };

/** What happened to the loop after a tick. */
export type TickOutcome = { kind: 'continue' } | { kind: 'finished'; reason: string } | { kind: 'paused'; reason: string };

/**
 * How a failing loop or heartbeat waits and when it gives up (`loops.failure_*`, read by
 * `failureRule`; the rule itself is the schedule policy's: `../schedule-policy/schedule-policy.ts`).
 */
export type FailurePolicy = Omit<FailureRule, 'maxConsecutive'>;

/** Seconds before the next try after the `streak`-th failed tick in a row (`FailurePolicy`). */
export function failureBackoffSeconds(streak: number, policy: FailurePolicy): number {
  return SCHEDULE_POLICY.backoffSeconds(streak, { maxConsecutive: 0, ...policy });
}

/** A loop's share of state under the shared rules (`ScheduleLedger`). */
export function loopLedger(loop: LoopRecord): ScheduleLedger {
  return {
    failureStreak: loop.failureStreak ?? 0,
    failingSince: loop.failingSince ?? null,
    lastError: loop.lastError ?? null,
    maxTokens: loop.maxTokens ?? null,
    budgetTokens: loop.budgetTokens ?? 0,
    spend: loop.spend,
    watch: loop.watch ?? null,
    watchDigest: loop.watchDigest ?? null,
    unchangedTurns: loop.unchangedTicks ?? 0,
    silentTurns: loop.silentTicks ?? 0,
  };
}

/** The loop with its share of state set from `ledger` (fields it never had stay absent while zero). */
function withLedger(loop: LoopRecord, ledger: ScheduleLedger): LoopRecord {
  const next: LoopRecord = {
    ...loop,
    failureStreak: ledger.failureStreak,
    failingSince: ledger.failingSince,
    lastError: ledger.lastError,
  };
  if (ledger.spend !== loop.spend && ledger.spend) next.spend = ledger.spend;
  if (loop.maxTokens) next.budgetTokens = ledger.budgetTokens;
  if (ledger.unchangedTurns !== (loop.unchangedTicks ?? 0)) next.unchangedTicks = ledger.unchangedTurns;
  if (ledger.silentTurns !== (loop.silentTicks ?? 0)) next.silentTicks = ledger.silentTurns;
  if (ledger.watchDigest !== (loop.watchDigest ?? null)) next.watchDigest = ledger.watchDigest;
  return next;
}

/**
 * The record after a tick completed (pure). Applies the stop order of docs/DESIGN.md §4.
 *
 * @param tick.reply - the turn's reply text (may be empty: the tick still completes)
 * @param tick.until - the `--until` verdict when the loop has a condition
 */
export function applyTick(
  loop: LoopRecord,
  tick: TickRef & {
    startedAt: number;
    finishedAt: number;
    reply: string;
    until?: UntilVerdict;
    /** The turn's error when it failed (the tick still completes). */
    failure?: string;
    /**
     * The tick ended with no outcome of its own: its turn was cancelled for a newer tick (`--overlap
     * cancel_other`, `loop-overlap.ts`), or its command is in doubt and was not run again
     * (`worker.command_turn_on_doubt: report`). It counts as a tick, but as no failure: the streak, the
     * back-off and the last error stay as they were (the cadence goes on).
     */
    noOutcome?: boolean;
    /** `loops.max_consecutive_failures`: failed ticks or judge failures in a row before a pause; 0 = never. */
    maxConsecutiveFailures: number;
    /**
     * Self-paced floor and ceiling in seconds (`loops.self_paced_*`; the config is their only source),
     * and the delay the tick's agent asked for (the `schedules` tool's `next`), if it did.
     */
    pacing: { floorSeconds: number; ceilingSeconds: number; requestedSeconds?: number };
    /** What the tick's model calls cost (turn, judge, compaction). */
    spend?: ModelSpend;
    /** The watch's output had not changed: the tick ended without a model call. */
    unchanged?: boolean;
    /** Digest of the watch's output this tick (kept for the next). */
    watchDigest?: string | null;
    /** The turn passed `agent.max_tokens_per_turn` (its answer kept, or it failed there): the schedule pauses at once. */
    overTurnBudget?: TurnBudgetOverrun;
    /** Back-off and pause rule of failed ticks; absent = no back-off, the count alone pauses. */
    failurePolicy?: FailurePolicy;
  },
): { loop: LoopRecord; outcome: TickOutcome } {
  // An unchanged watch counts as "nothing changed" for self-paced pacing (the delay doubles).
  const digest = tick.unchanged ? (loop.lastDigest ?? replyDigest('')) : replyDigest(tick.reply);
  const { pacing } = tick;
  const maxFailures = tick.maxConsecutiveFailures;
  const rule: FailureRule = {
    maxConsecutive: maxFailures,
    ...(tick.failurePolicy ?? { backoffSeconds: 0, backoffMaxSeconds: 0, pauseAfterSeconds: 0 }),
  };
  // Spend, budget, watch digest, counts and the failure streak: the schedule policy's shared rules.
  const failed = tick.failure !== undefined && !tick.noOutcome;
  const turn: TurnEnd = {
    status: tick.noOutcome ? 'skipped' : failed ? 'error' : 'ok',
    error: tick.failure ?? null,
    startedAt: tick.startedAt,
    finishedAt: tick.finishedAt,
    reply: tick.reply,
    ...(tick.spend ? { spend: tick.spend } : {}),
    ...(tick.unchanged ? { unchanged: true } : {}),
    ...(tick.watchDigest !== undefined && loop.watch ? { watch: { spec: loop.watch, digest: tick.watchDigest } } : {}),
    ...(tick.overTurnBudget ? { overTurnBudget: tick.overTurnBudget } : {}),
  };
  const ledger = SCHEDULE_POLICY.afterTurn(loopLedger(loop), turn);
  const next: LoopRecord = {
    ...withLedger(loop, ledger),
    ticksUsed: loop.ticksUsed + 1,
    lastTickDueAt: tick.dueAt,
    lastTickStartedAt: tick.startedAt,
    lastTickFinishedAt: tick.finishedAt,
    lastOccurrenceId: tick.occurrenceId,
    lastDigest: tick.failure === undefined ? digest : loop.lastDigest,
    // Self-paced: the delay the agent asked for in this tick, clamped to the floor and ceiling; else the digest rule.
    delaySeconds:
      loop.mode === 'self-paced' && pacing.requestedSeconds !== undefined && tick.failure === undefined
        ? clampSelfPacedDelay(pacing.requestedSeconds, pacing.floorSeconds, pacing.ceilingSeconds)
        : loop.mode === 'self-paced'
          ? nextSelfPacedDelay({
              currentDelaySeconds: loop.delaySeconds ?? pacing.floorSeconds,
              previousDigest: loop.lastDigest,
              digest,
              floorSeconds: pacing.floorSeconds,
              ceilingSeconds: pacing.ceilingSeconds,
            })
          : loop.delaySeconds,
    updatedAt: tick.finishedAt,
  };
  if (next.mode === 'self-paced') next.nextDueAt = tick.finishedAt + (next.delaySeconds ?? pacing.floorSeconds) * 1000;
  // Back-off: a failed tick's next try comes after the policy's wait, in either mode (a fixed loop's job
  // scheduler is re-armed there); the first success resumes the cadence (`nextDueAt` back to `null`).
  else next.nextDueAt = null;
  const retry = failed ? SCHEDULE_POLICY.retryAt(ledger, tick.finishedAt, rule) : null;
  if (retry !== null) next.nextDueAt = retry;
  // A loop paused or stopped while this tick ran keeps that state: the user's word wins.
  if (loop.status !== 'active') return { loop: { ...next, nextDueAt: null }, outcome: { kind: 'continue' } };
  const finish = (reason: string) => ({
    loop: { ...next, status: 'finished' as const, statusReason: reason },
    outcome: { kind: 'finished' as const, reason },
  });
  const pause = (reason: string) => ({
    loop: { ...next, status: 'paused' as const, statusReason: reason, nextDueAt: null },
    outcome: { kind: 'paused' as const, reason },
  });
  if (loop.kind === 'loop' && hasLoopComplete(tick.reply)) return finish('the agent reported LOOP_COMPLETE');
  if (loop.until && tick.until) {
    const v = tick.until;
    if (v.verdict === 'done') return finish(`condition met: ${loop.until}`);
    if (v.verdict === 'blocked') return pause(`blocked: ${v.reason}`);
    if (v.verdict === 'error') {
      next.judgeFailures = loop.judgeFailures + 1;
      if (maxFailures > 0 && next.judgeFailures >= maxFailures) {
        return pause(`the --until judge failed ${next.judgeFailures} times in a row (${v.message})`);
      }
    } else {
      next.judgeFailures = 0;
    }
  }
  if (loop.times !== null && next.ticksUsed >= loop.times) return finish(`ran ${loop.times} times`);
  // Token budgets and the failure streak; `/loop resume` gives a fresh allowance and fresh tries.
  const policyPause = SCHEDULE_POLICY.pauseAfter(ledger, turn, rule, 'tick');
  if (policyPause) {
    const fresh = policyPause.cause === 'budget' && !tick.overTurnBudget ? 'gives a fresh allowance' : 'continues';
    return pause(`${policyPause.reason}. /${loop.kind} resume ${fresh}`);
  }
  if (loop.maxTicks > 0 && next.ticksUsed >= loop.maxTicks) {
    return pause(`tick budget of ${loop.maxTicks} used (loops.max_ticks); /loop resume continues`);
  }
  return { loop: next, outcome: { kind: 'continue' } };
}

/** An error message for a one-line notice, at most 300 characters (the schedule policy's `clipError`). */
export { clipError };

/**
 * The notice a failed tick sends to the loop's route (issue: failure
 * notices), unless the failure paused the loop (the pause notice says it):
 * the error, when the next try comes (the back-off) and when it would pause.
 * @param loop - the record after the failed tick (its streak, `nextDueAt`, `lastTickFinishedAt`)
 */
export function tickFailureNotice(
  loop: LoopRecord,
  tickNumber: number,
  error: string,
  maxConsecutiveFailures: number,
  policy?: FailurePolicy,
): string {
  const label = loop.kind === 'loop' ? 'Loop' : 'Heartbeat';
  const streak = loop.failureStreak ?? 1;
  const retry =
    policy && loop.nextDueAt !== null && loop.lastTickFinishedAt !== null
      ? ` Next try in ${formatSeconds(Math.round((loop.nextDueAt - loop.lastTickFinishedAt) / 1000))}.`
      : '';
  const ruleText = SCHEDULE_POLICY.failureRuleText(
    { maxConsecutive: maxConsecutiveFailures, ...(policy ?? { backoffSeconds: 0, backoffMaxSeconds: 0, pauseAfterSeconds: 0 }) },
    streak,
  );
  const rule = ruleText ? ` ${ruleText}` : '';
  return `${label} tick #${tickNumber} failed: ${clipError(error).replace(/\.$/, '')}.${retry}${rule}`;
}

/** Pause (pure). A finished loop stays finished. */
export function pauseLoop(loop: LoopRecord, now: number, reason = 'paused by user'): LoopRecord {
  if (loop.status !== 'active') return loop;
  return { ...loop, status: 'paused', statusReason: reason, nextDueAt: null, updatedAt: now };
}

/**
 * Resume (pure). A loop paused by its budget gets a fresh budget window
 * (`ticksUsed` counts on; the budget is raised by `maxTicks`), and a fresh
 * `--max-tokens` allowance.
 */
export function resumeLoop(loop: LoopRecord, now: number): LoopRecord {
  if (loop.status !== 'paused') return loop;
  const budgetHit = loop.maxTicks > 0 && loop.ticksUsed >= loop.maxTicks;
  const resumed: LoopRecord = {
    ...withLedger(loop, SCHEDULE_POLICY.resume(loopLedger(loop))),
    status: 'active',
    statusReason: null,
    judgeFailures: 0,
    maxTicks: budgetHit ? loop.ticksUsed + loop.maxTicks : loop.maxTicks,
    updatedAt: now,
  };
  return { ...resumed, nextDueAt: resumed.mode === 'self-paced' ? resumeDueAt(resumed, now) : null };
}

/**
 * When the first tick after a resume is due: the next point on the old cadence
 * that is not in the past, at most one interval away — never a burst of
 * missed ticks (docs/DESIGN.md §4). The one rule for re-arming a loop whose next
 * occurrence is unknown: `/loop resume`, a worker's reconcile of a missing job
 * scheduler, and a reshard that finds none. Fixed mode: from the last tick's
 * start (`intervalSeconds`); self-paced: from the last tick's end (`delaySeconds`).
 * @returns epoch ms, never before `now`
 */
export function resumeDueAt(loop: LoopRecord, now: number): number {
  if (loop.mode === 'self-paced') {
    const delayMs = (loop.delaySeconds ?? 0) * 1000;
    return loop.lastTickFinishedAt === null ? now : Math.max(now, loop.lastTickFinishedAt + delayMs);
  }
  const periodMs = (loop.intervalSeconds ?? 0) * 1000;
  if (loop.lastTickStartedAt === null || periodMs === 0) return now;
  return Math.max(now, loop.lastTickStartedAt + periodMs);
}
