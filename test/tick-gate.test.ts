/**
 * The tick gate's decisions as pure functions (no Redis): what the gate read
 * decides (coalescing and state skip, user input first, goal first), what the
 * claim script's answer decides (session lock, in-flight order, a changing
 * record), how a turn that threw ends (drain hand-back, lock loss), and the
 * prefetch lead between a job's time and its occurrence's due time.
 */
import { describe, expect, it } from 'vitest';
import { decideFire } from '../scheduler/loop/loop-state.ts';
import { prefetchLead } from '../scheduler/loop/prefetch-lead.ts';
import {
  decideClaim,
  decideGate,
  decideTurnEnding,
  DRAIN_HAND_BACK,
  GOAL_DEFER_MIN_MS,
  MAX_CLAIM_ROUNDS,
} from '../worker/loop/tick-gate.ts';
import { loopFixture } from './support/record-fixtures.ts';
import type { Job } from 'bullmq';
import { earlierTickWaiting, type Tick } from '../worker/loop/tick-occurrence.ts';
import type { TickJobData } from '../scheduler/loop/tick-job.ts';
import type { WorkerDeps } from '../worker/worker-deps.ts';

const policy = { deferMs: 250 };
const fire = { fire: true } as const;

describe('decideGate', () => {
  it('fires when the record allows it and nothing holds the session', () => {
    expect(decideGate({ fire, inputPending: false, goalHoldsSession: false }, policy)).toEqual({ action: 'fire' });
  });

  it('skips an occurrence the record refuses (coalesced, paused, …), whatever holds the session', () => {
    const loop = loopFixture({ now: 1_000_000 }); // next due 1_060_000: not backing off at 1_990_000
    const coalesced = decideFire({ ...loop, lastTickStartedAt: 2_000_000 }, { loopId: 'L1', dueAt: 1_990_000, occurrenceId: 'o' });
    expect(coalesced).toEqual({ fire: false, reason: 'coalesced' });
    expect(decideGate({ fire: coalesced, inputPending: true, goalHoldsSession: true }, policy)).toEqual({
      action: 'skip',
      reason: 'coalesced',
    });
    expect(decideGate({ fire: { fire: false, reason: 'paused' }, inputPending: false, goalHoldsSession: false }, policy)).toEqual({
      action: 'skip',
      reason: 'paused',
    });
  });

  it('defers behind pending user input first, then behind an active goal', () => {
    expect(decideGate({ fire, inputPending: true, goalHoldsSession: true }, policy)).toEqual({
      action: 'defer',
      reason: 'input-pending',
      delayMs: 250,
    });
    expect(decideGate({ fire, inputPending: false, goalHoldsSession: true }, policy)).toEqual({
      action: 'defer',
      reason: 'goal-active',
      delayMs: GOAL_DEFER_MIN_MS,
    });
    expect(decideGate({ fire, inputPending: false, goalHoldsSession: true }, { deferMs: 5000 })).toEqual({
      action: 'defer',
      reason: 'goal-active',
      delayMs: 5000,
    });
  });
});

describe('decideClaim', () => {
  it('fires on ok; a busy session lock defers (never run in parallel)', () => {
    expect(decideClaim({ status: 'ok' }, 0, policy)).toEqual({ action: 'fire' });
    expect(decideClaim({ status: 'busy' }, 0, policy)).toEqual({ action: 'defer', reason: 'session-busy', delayMs: 250 });
  });

  it('waits for an earlier occurrence still in flight; a stale mark counts as a change', () => {
    expect(decideClaim({ status: 'inflight', earlierAlive: true }, 0, policy)).toEqual({
      action: 'defer',
      reason: 'earlier-tick-in-flight',
      delayMs: 250,
    });
    expect(decideClaim({ status: 'inflight', earlierAlive: false }, 0, policy)).toEqual({ action: 'again' });
  });

  it('decides again over a fresh read on a change, and defers once the record kept changing for every round', () => {
    for (let round = 0; round < MAX_CLAIM_ROUNDS - 1; round++)
      expect(decideClaim({ status: 'changed' }, round, policy)).toEqual({ action: 'again' });
    expect(decideClaim({ status: 'changed' }, MAX_CLAIM_ROUNDS - 1, policy)).toEqual({
      action: 'defer',
      reason: 'schedule-changing',
      delayMs: 250,
    });
    expect(decideClaim({ status: 'inflight', earlierAlive: false }, MAX_CLAIM_ROUNDS - 1, policy)).toEqual({
      action: 'defer',
      reason: 'schedule-changing',
      delayMs: 250,
    });
  });
});

describe('decideTurnEnding', () => {
  it('hands a drained turn back at once, abandons one whose lock was lost, records any other failure', () => {
    expect(decideTurnEnding({ abortedByDrain: true, lockLost: true })).toBe('hand-back');
    expect(decideTurnEnding({ abortedByDrain: false, lockLost: true })).toBe('abandon');
    expect(decideTurnEnding({ abortedByDrain: false, lockLost: false })).toBe('failed');
    expect(DRAIN_HAND_BACK).toEqual({ action: 'defer', reason: 'drain', delayMs: 0 });
  });
});

describe('prefetchLead', () => {
  it('releases the job the lead before the due time, and gives back the due time of a job', () => {
    const lead = prefetchLead(200);
    expect(lead.jobAt(10_000)).toBe(9_800);
    expect(lead.dueAt(9_800)).toBe(10_000);
    for (const due of [0, 1, 1_700_000_000_123]) expect(lead.dueAt(lead.jobAt(due))).toBe(due);
    expect(prefetchLead(0).jobAt(5)).toBe(5);
  });
});

describe('earlierTickWaiting (docs/RELIABILITY.md, "Earliest waiting tick first")', () => {
  // A 1 s loop whose last tick was due at 10 s; this tick is due at 14 s, its job time (the lead of 1 s off) 13 s.
  const loop = { ...loopFixture({ intervalSeconds: 1 }), lastTickDueAt: 10_000, lastTickStartedAt: 10_200 };
  const tick = { sessionId: 's', dueAt: 14_000 } as Tick;
  const job = { id: 'repeat:loop:s:13000' } as Job<TickJobData>;
  /** Deps whose tick queue answers `states` by job id (anything else: no such job), with the ids asked. */
  const deps = (states: Record<string, string>) => {
    const asked: string[] = [];
    const getJobState = (id: string) => (asked.push(id), Promise.resolve(states[id] ?? 'unknown'));
    const d = { config: { worker: { defer_ms: 2500 } }, queues: { forSession: () => ({ ticks: { getJobState } }) } };
    return { d: d as unknown as WorkerDeps, asked };
  };

  it('yields to the job of the first open slot still queued', async () => {
    const { d } = deps({ 'repeat:loop:s:10000': 'delayed' });
    expect(await earlierTickWaiting(d, job, tick, loop, 14_000)).toBe(true);
  });

  it('yields to the job of a slot after one left out by the job scheduler (no job there), and looks no further than its own', async () => {
    const { d, asked } = deps({ 'repeat:loop:s:11000': 'delayed' });
    expect(await earlierTickWaiting(d, job, tick, loop, 14_000)).toBe(true);
    const none = deps({});
    expect(await earlierTickWaiting(none.d, job, tick, loop, 14_000)).toBe(false);
    expect(none.asked).toEqual(['repeat:loop:s:10000', 'repeat:loop:s:11000', 'repeat:loop:s:12000']);
    expect(asked).toContain('repeat:loop:s:11000');
  });

  it('does not yield past its bound (two intervals or four deferrals, the longer), nor to a job that completed', async () => {
    expect(await earlierTickWaiting(deps({ 'repeat:loop:s:10000': 'delayed' }).d, job, tick, loop, 24_001)).toBe(false);
    expect(await earlierTickWaiting(deps({ 'repeat:loop:s:10000': 'completed' }).d, job, tick, loop, 14_000)).toBe(false);
  });
});
