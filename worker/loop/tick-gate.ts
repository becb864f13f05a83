/**
 * The gate of a loop or heartbeat tick as pure decisions: whether an occurrence
 * fires now, waits (deferred, never dropped) or is skipped, first over what the
 * gate read (`decideGate`), then over what the claim script answered
 * (`decideClaim`). Each policy is decided here once, in the order written; the
 * tick's plan (`tick-processor.ts`) gathers the facts and the occurrence
 * pipeline (`occurrence/pipeline.ts`) carries the decision out. Policies:
 * docs/RELIABILITY.md, "Ticks fire on the record as it is at claim time" and
 * "A dead worker's work restarts within seconds".
 */
import type { FireDecision } from '../../scheduler/loop/loop-state.ts';
import type { OccurrenceDefer } from '../occurrence/defer-decision.ts';

/** Drain hand-back and how a turn that threw ends: decided once for ticks and cron runs. */
export { DRAIN_HAND_BACK } from '../occurrence/defer-decision.ts';
export { decideTurnEnding, type TurnEnding } from '../occurrence/turn-ending.ts';

/** Why a tick was deferred; also the `reason` label of `hermes_ticks_deferred_total`. */
export type TickDeferReason =
  'drain' | 'input-pending' | 'goal-active' | 'session-busy' | 'earlier-tick-in-flight' | 'earlier-tick-waiting' | 'schedule-changing';

/** A tick put back to run again after `delayMs`. */
export type TickDefer = OccurrenceDefer<TickDeferReason>;

/** What the gate says over one read of the record, the goal and the pending input. */
export type GateDecision = { action: 'fire' } | { action: 'skip'; reason: string } | TickDefer;

/** What the claim script's answer means for the tick. */
export type ClaimDecision = { action: 'fire' } | { action: 'again' } | TickDefer;

/** The settings the decisions use. */
export interface TickGatePolicy {
  /** `worker.defer_ms`: how long a deferred tick waits before it asks again, ms. */
  deferMs: number;
}

/** Gate and claim rounds before a tick whose record keeps changing is deferred. */
export const MAX_CLAIM_ROUNDS = 5;

/** The least wait of a tick deferred behind an active goal, ms (a goal turn takes seconds, not `defer_ms`). */
export const GOAL_DEFER_MIN_MS = 1000;

/**
 * Decide over one read of the schedule (a tick's gate, `occurrence/gate-and-claim.ts`), in this order:
 *  1. coalescing and the schedule's state (`decideFire`, `scheduler/loop/loop-state.ts`): an occurrence
 *     that may not fire (paused, finished, removed, replaced, covered by a later-started tick,
 *     applied already) is skipped, never deferred;
 *  2. user input first: while the session has pending user input, the tick waits `deferMs`;
 *  3. goal first: while an active, unparked goal holds the session, the tick waits at least
 *     {@link GOAL_DEFER_MIN_MS};
 *  4. otherwise it fires (the claim then checks all of this again atomically) — unless the job of an earlier
 *     occurrence that may still fire is waiting: the caller looks for one only when this says fire
 *     (`earlierTickWaiting`, tick-occurrence.ts) and then defers the tick, {@link yieldToEarlierTick}.
 * @param read.fire - the fire decision over the record read
 * @param read.inputPending - the session has pending, uncommitted user input (docs/DESIGN.md §4: user input, then goals, then ticks)
 * @param read.goalHoldsSession - `goalHoldsSession` of the goal read (`scheduler/goal/goal-state.ts`)
 */
export function decideGate(
  read: { fire: FireDecision; inputPending: boolean; goalHoldsSession: boolean },
  policy: TickGatePolicy,
): GateDecision {
  if (!read.fire.fire) return { action: 'skip', reason: read.fire.reason };
  if (read.inputPending) return { action: 'defer', reason: 'input-pending', delayMs: policy.deferMs };
  if (read.goalHoldsSession) return { action: 'defer', reason: 'goal-active', delayMs: Math.max(GOAL_DEFER_MIN_MS, policy.deferMs) };
  return { action: 'fire' };
}

/**
 * Earliest waiting tick first: a tick that would fire while the job of an earlier occurrence of its loop that
 * may still fire is still queued (held, or deferred behind the busy session) waits `deferMs` for it, within a bound
 * (`earlierTickWaiting`, tick-occurrence.ts); otherwise, when the session frees up, the later tick could claim
 * first and cover the earlier one (docs/RELIABILITY.md, "Earliest waiting tick first").
 */
export function yieldToEarlierTick(policy: TickGatePolicy): TickDefer {
  return { action: 'defer', reason: 'earlier-tick-waiting', delayMs: policy.deferMs };
}

/**
 * What the claim script's answer (`TickClaim.claimTick`; the claim rule: `claim-tick-8.lua`) means (a tick's claim, `occurrence/gate-and-claim.ts`):
 *  - `ok`: the occurrence is claimed; fire;
 *  - `busy` — session lock: another job holds the session's turn lock; wait `deferMs` (never run in parallel);
 *  - `inflight` — in-flight order: another occurrence of the loop record started and did not commit. While
 *    that one is alive (`earlierAlive`: its job is still queued or active and not committed), this one
 *    waits, so a tick whose worker died is completed before a later one overtakes it; a stale mark
 *    (cleared by the caller) counts as a change;
 *  - `changed`: the record, the goal or the pending input changed since the read; decide `again` over a
 *    fresh read, but after {@link MAX_CLAIM_ROUNDS} rounds wait `deferMs` instead of spinning.
 * @param round - the gate-and-claim round that got this answer, 0-based
 */
export function decideClaim(
  claim: { status: 'ok' } | { status: 'busy' } | { status: 'changed' } | { status: 'inflight'; earlierAlive: boolean },
  round: number,
  policy: TickGatePolicy,
): ClaimDecision {
  if (claim.status === 'ok') return { action: 'fire' };
  if (claim.status === 'busy') return { action: 'defer', reason: 'session-busy', delayMs: policy.deferMs };
  if (claim.status === 'inflight' && claim.earlierAlive)
    return { action: 'defer', reason: 'earlier-tick-in-flight', delayMs: policy.deferMs };
  if (round + 1 >= MAX_CLAIM_ROUNDS) return { action: 'defer', reason: 'schedule-changing', delayMs: policy.deferMs };
  return { action: 'again' };
}
