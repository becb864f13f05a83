/**
 * A session's standing goal (docs/DESIGN.md §6), as pure functions.
 *
 * `/goal <text>` sets it and starts a turn. After each goal turn an auxiliary
 * judge answers `done | blocked | continue | wait`:
 * - `continue` → another continuation turn is queued (behind real user input);
 * - `done` → "Goal achieved";
 * - `blocked` → paused with the judge's reason;
 * - `wait` → parked: no continuation until the user writes or resumes it;
 * - budget (`goals.max_turns`) used → paused;
 * - no valid verdict (the turn failed, or the judge call failed or answered
 *   something that is not a verdict) → fail open: another turn within the
 *   budget, but after `goals.max_consecutive_failures` such turns in a row
 *   (0 = never) → paused with the last error, as loops pause after repeated
 *   failed ticks. A valid verdict resets the count, and so does
 *   `/goal resume` (N fresh tries).
 * While a goal is active and not parked, loop and heartbeat ticks of the
 * session wait (deferred, never dropped).
 */
import type { ScheduleEconomy } from '../economy/economy-flags.ts';
import type { Origin } from '../session/origin.ts';
import { addToTotals, totalTokens, type ModelSpend, type SpendTotals, type TurnBudgetOverrun } from '../model-spend.ts';
import { budgetPauseReason } from '../economy/token-budget.ts';

export type GoalStatus = 'active' | 'paused' | 'achieved' | 'cleared';
export type GoalVerdict = 'done' | 'blocked' | 'continue' | 'wait';

/** Persisted goal state. Times are epoch ms. */
export interface GoalRecord {
  goalId: string;
  sessionId: string;
  text: string;
  status: GoalStatus;
  statusReason: string | null;
  /** Judge said `wait`: active, but nothing queued and ticks may run. */
  parked: boolean;
  turnsUsed: number;
  /** Budget window: the goal pauses when `turnsUsed` reaches it. */
  maxTurns: number;
  origin: Origin;
  createdAt: number;
  updatedAt: number;
  lastVerdict: GoalVerdict | null;
  /** Occurrence id of the last goal turn applied (makes `applyGoalTurn` idempotent). */
  lastTurnId: string | null;
  /** Goal turns in a row without a valid verdict (turn or judge failed); absent in records stored before it. */
  failures?: number;
  /** `--model`: a declared model (`agent.models.<name>`); absent = the primary. */
  model?: string | null;
  /** `--max-tokens`: input plus output tokens allowed until the next resume; absent = no limit. */
  maxTokens?: number | null;
  /** Tokens counted against `maxTokens` since it was set or last resumed. */
  budgetTokens?: number;
  /** Model calls and tokens over the goal's life (`scheduler/model-spend.ts`). */
  spend?: SpendTotals;
  version: number;
}

/** A new active goal. */
export function createGoal(input: {
  goalId: string;
  sessionId: string;
  text: string;
  maxTurns: number;
  origin: Origin;
  now: number;
  economy?: ScheduleEconomy;
}): GoalRecord {
  return {
    ...(input.economy?.model ? { model: input.economy.model } : {}),
    ...(input.economy?.maxTokens ? { maxTokens: input.economy.maxTokens, budgetTokens: 0 } : {}),
    goalId: input.goalId,
    sessionId: input.sessionId,
    text: input.text,
    status: 'active',
    statusReason: null,
    parked: false,
    turnsUsed: 0,
    maxTurns: input.maxTurns,
    origin: input.origin,
    createdAt: input.now,
    updatedAt: input.now,
    lastVerdict: null,
    lastTurnId: null,
    failures: 0,
    version: 0,
  };
}

/** True when the goal owns the session's idle time: loop ticks wait. */
export function goalHoldsSession(goal: GoalRecord | null): boolean {
  return goal !== null && goal.status === 'active' && !goal.parked;
}

/** What to do after a goal turn. */
export type GoalOutcome =
  { kind: 'continue' } | { kind: 'achieved' } | { kind: 'paused'; reason: string } | { kind: 'parked'; reason: string };

/**
 * The goal after one of its turns and the judge's verdict (pure).
 * `verdict: undefined` means no valid verdict (the turn or the judge failed;
 * `reason` is the error): fail open (continue) within the budget, until
 * `maxConsecutiveFailures` in a row pause the goal (0 = never).
 */
export function applyGoalTurn(
  goal: GoalRecord,
  turn: {
    turnId: string;
    now: number;
    verdict: GoalVerdict | undefined;
    reason: string;
    maxConsecutiveFailures: number;
    /** What the turn's model calls cost (compaction, turn, judge). */
    spend?: ModelSpend;
    /** The turn passed `agent.max_tokens_per_turn` (its answer kept, or it failed there): the goal pauses at once. */
    overTurnBudget?: TurnBudgetOverrun;
  },
): { goal: GoalRecord; outcome: GoalOutcome } {
  const failures = turn.verdict === undefined ? (goal.failures ?? 0) + 1 : 0;
  const next: GoalRecord = {
    ...goal,
    turnsUsed: goal.turnsUsed + 1,
    lastTurnId: turn.turnId,
    updatedAt: turn.now,
    lastVerdict: turn.verdict ?? null,
    failures,
    ...(turn.spend && turn.spend.calls > 0 ? { spend: addToTotals(goal.spend, turn.spend) } : {}),
    ...(goal.maxTokens ? { budgetTokens: (goal.budgetTokens ?? 0) + (turn.spend ? totalTokens(turn.spend) : 0) } : {}),
  };
  // Token budgets (`../economy/token-budget.ts`); `/goal resume` gives a fresh allowance.
  const overBudget = budgetPauseReason(next, turn.overTurnBudget, 'turn');
  if (overBudget) {
    const reason = `${overBudget}. /goal resume ${turn.overTurnBudget ? 'continues' : 'gives a fresh allowance'}`;
    return { goal: { ...next, status: 'paused', statusReason: reason }, outcome: { kind: 'paused', reason } };
  }
  if (turn.maxConsecutiveFailures > 0 && failures >= turn.maxConsecutiveFailures) {
    const reason = `${failures} goal turns in a row got no verdict (last error: ${turn.reason || 'unknown'}); /goal resume tries again`;
    return { goal: { ...next, status: 'paused', statusReason: reason }, outcome: { kind: 'paused', reason } };
  }
  if (turn.verdict === 'done')
    return { goal: { ...next, status: 'achieved', statusReason: turn.reason || null, parked: false }, outcome: { kind: 'achieved' } };
  if (turn.verdict === 'blocked') {
    const reason = `blocked: ${turn.reason || 'the judge gave no reason'}`;
    return { goal: { ...next, status: 'paused', statusReason: reason }, outcome: { kind: 'paused', reason } };
  }
  if (next.turnsUsed >= next.maxTurns) {
    const reason = `turn budget of ${goal.maxTurns} used (goals.max_turns); /goal resume continues`;
    return { goal: { ...next, status: 'paused', statusReason: reason }, outcome: { kind: 'paused', reason } };
  }
  if (turn.verdict === 'wait') {
    const reason = turn.reason || 'waiting for something outside the agent';
    return { goal: { ...next, parked: true, statusReason: `parked: ${reason}` }, outcome: { kind: 'parked', reason } };
  }
  return { goal: { ...next, parked: false, statusReason: null }, outcome: { kind: 'continue' } };
}

/**
 * Resume (pure): active again and unparked; a goal paused by its budget gets a
 * fresh window of `budget` turns. Resuming must queue the next turn (F6).
 */
export function resumeGoal(goal: GoalRecord, now: number, budget: number): GoalRecord {
  const exhausted = goal.turnsUsed >= goal.maxTurns;
  return {
    ...goal,
    status: 'active',
    parked: false,
    statusReason: null,
    updatedAt: now,
    failures: 0,
    maxTurns: exhausted ? goal.turnsUsed + budget : goal.maxTurns,
    ...(goal.maxTokens ? { budgetTokens: 0 } : {}),
  };
}

/** The input of goal turn number `n` (1-based). */
export function buildGoalInput(goal: GoalRecord, n: number): string {
  return [
    `[Goal turn #${n} of at most ${goal.maxTurns}] This is a continuation toward the standing goal, not a new message from the user.`,
    `Goal: ${goal.text}`,
    'Take the next concrete step, check the current state, and say briefly what you did and what is left.',
  ].join('\n');
}

/** One status line for `/goal status`. */
export function goalStatusLine(goal: GoalRecord | null): string {
  if (!goal || goal.status === 'cleared') return 'No goal in this session.';
  const state = goal.parked && goal.status === 'active' ? 'active, parked' : goal.status;
  return `goal: ${state}${goal.statusReason ? ` (${goal.statusReason})` : ''} · turns ${goal.turnsUsed}/${goal.maxTurns} · “${goal.text.length > 80 ? `${goal.text.slice(0, 79)}…` : goal.text}”`;
}
