/**
 * How a loop, a heartbeat, a goal and their spend look on every wire (snake_case, times in epoch ms):
 * one shape for `/api/schedules`, `/api/sessions`, MCP and the CLI's `--json` (`hermes status`, `hermes
 * loop|heartbeat|goal`), as `cronJobView` is for cron jobs. Every wire format is snake_case, nested
 * objects (`spend`) and event data included; what is stored in Redis is no wire format and keeps its
 * own names (the rule and `wireKeys`: scheduler/text/wire-case.ts; events: `eventWire`,
 * scheduler/session/event-wire.ts).
 *
 * A concept both records have is spelled the same in both views (`status_reason`, `failure_streak`,
 * `last_error`, `watch`, `watch_digest`, `model`, `max_tokens`, `budget_tokens` — null without a
 * `max_tokens` —, `spend`, `notify`, `created_by`, `deliver`). A count of occurrences is named by the
 * record's own noun: a loop's ticks (`ticks_used`, `silent_ticks`, `unchanged_ticks`), a cron job's runs
 * (`repeat.completed`, `unchanged_runs`). The test of the views pins both rules (test/wire-views.test.ts).
 */
import type { GoalRecord } from '../goal/goal-state.ts';
import { statusLine } from './loop-service.ts';
import { loopTargets, type LoopRecord } from './loop-state.ts';
import { spendWire, type SpendTotals, type SpendWire } from '../model-spend.ts';

/** Spend totals on the wire, as cron jobs show theirs (`SpendWire`: snake_case; zeros before the first model call, and for a count kept since). */
export function spendObject(t: SpendTotals | undefined): SpendWire {
  return spendWire(t);
}

/** The API shape of a loop or heartbeat. */
export function scheduleObject(r: LoopRecord, now: number, nextDueAt?: number) {
  return {
    session_id: r.sessionId,
    kind: r.kind,
    loop_id: r.loopId,
    status: r.status,
    status_reason: r.statusReason,
    failure_streak: r.failureStreak ?? 0,
    last_error: r.lastError ?? null,
    mode: r.mode,
    interval_seconds: r.intervalSeconds,
    prompt: r.prompt,
    times: r.times,
    until: r.until,
    overlap: r.overlap ?? 'queue',
    ticks_used: r.ticksUsed,
    max_ticks: r.maxTicks,
    created_at: r.createdAt,
    updated_at: r.updatedAt,
    last_tick_started_at: r.lastTickStartedAt,
    next_due_at: nextDueAt ?? null,
    notify: r.notify ?? 'auto',
    watch: r.watch ?? null,
    watch_digest: r.watchDigest ?? null,
    model: r.model ?? null,
    max_tokens: r.maxTokens ?? null,
    budget_tokens: r.maxTokens ? (r.budgetTokens ?? 0) : null,
    silent_ticks: r.silentTicks ?? 0,
    unchanged_ticks: r.unchangedTicks ?? 0,
    spend: spendObject(r.spend),
    created_by: r.createdBy ?? null,
    // Where replies also go (`--deliver`, else the route it was set from), as delivery targets; [] = the session only.
    deliver: loopTargets(r),
    status_line: statusLine(r, now, nextDueAt),
  };
}

/** The API shape of a goal. */
export function goalObject(g: GoalRecord) {
  return {
    session_id: g.sessionId,
    goal_id: g.goalId,
    text: g.text,
    status: g.status,
    status_reason: g.statusReason,
    parked: g.parked,
    turns_used: g.turnsUsed,
    max_turns: g.maxTurns,
    last_verdict: g.lastVerdict,
    created_at: g.createdAt,
    updated_at: g.updatedAt,
    model: g.model ?? null,
    spend: spendObject(g.spend),
  };
}
