/** Pure loop state transitions (docs/DESIGN.md §4): fire decisions, stop order, self-paced cadence. */
import { describe, expect, it } from 'vitest';
import {
  applyTick,
  decideFire,
  earlierOpenSlot,
  hasLoopComplete,
  resumeDueAt,
  resumeLoop,
  pauseLoop,
  type LoopRecord,
  type NewLoop,
} from '../scheduler/loop/loop-state.ts';
import { nextSelfPacedDelay, normaliseReply, replyDigest } from '../scheduler/loop/self-paced.ts';
import { configSchema } from '../scheduler/config/config.ts';
import { loopFixture } from './support/record-fixtures.ts';

/** The fixture loop, counted from 0 (ticks are due at n × 60 s) and capped at 100 ticks. */
const base = (over: Partial<NewLoop> = {}): LoopRecord => loopFixture({ maxTicks: 100, now: 0, ...over });
const {
  self_paced_floor_seconds: floorSeconds,
  self_paced_ceiling_seconds: ceilingSeconds,
  max_consecutive_failures: maxConsecutiveFailures,
} = configSchema().parse({}).loops;
const tick = (n: number, reply = 'ok', extra = {}) => ({
  loopId: 'L1',
  dueAt: n * 60_000,
  occurrenceId: `o${n}`,
  startedAt: n * 60_000 + 5,
  finishedAt: n * 60_000 + 50,
  reply,
  pacing: { floorSeconds, ceilingSeconds },
  maxConsecutiveFailures,
  ...extra,
});

describe('decideFire', () => {
  it('fires an active loop', () => expect(decideFire(base(), tick(1))).toEqual({ fire: true }));
  it('never fires a removed, replaced, paused or finished loop', () => {
    expect(decideFire(null, tick(1))).toEqual({ fire: false, reason: 'removed' });
    expect(decideFire(base({ loopId: 'L2' }), tick(1))).toEqual({ fire: false, reason: 'replaced' });
    expect(decideFire(pauseLoop(base(), 1), tick(1))).toEqual({ fire: false, reason: 'paused' });
    expect(decideFire({ ...base(), status: 'finished' }, tick(1))).toEqual({ fire: false, reason: 'finished' });
  });
  it('coalesces an occurrence due before the last tick started', () => {
    const after = applyTick(base(), { ...tick(3), startedAt: 5 * 60_000 }).loop;
    expect(decideFire(after, tick(4))).toEqual({ fire: false, reason: 'coalesced' });
    expect(decideFire(after, tick(6))).toEqual({ fire: true });
  });
  it('after ten missed intervals exactly one tick fires, then the cadence: the first to start covers the rest', () => {
    // Workers stopped after tick 2 (due 2 min); restarted at 12.5 min with occurrences 3…12 overdue.
    const ran = applyTick(base(), tick(2)).loop;
    const restartAt = 12 * 60_000 + 30_000;
    const overdue = [3, 4, 5, 6, 7, 8, 9, 10, 11, 12].map((n) => tick(n));
    expect(decideFire(ran, overdue[0]!)).toEqual({ fire: true });
    const caughtUp = applyTick(ran, { ...overdue[0]!, startedAt: restartAt, finishedAt: restartAt + 50 }).loop;
    expect(overdue.slice(1).map((t) => decideFire(caughtUp, t))).toEqual(
      overdue.slice(1).map(() => ({ fire: false, reason: 'coalesced' })),
    );
    expect(decideFire(caughtUp, tick(13))).toEqual({ fire: true }); // due after the catch-up started: on cadence
  });
  it('does not apply the same occurrence twice', () => {
    const after = applyTick(base(), tick(1)).loop;
    expect(decideFire(after, tick(1))).toEqual({ fire: false, reason: 'already-applied' });
  });
});

describe('earlierOpenSlot (earliest waiting tick first)', () => {
  it('names the first slot after the last tick that may still fire, when it comes before the tick asking', () => {
    const ran = applyTick(base(), tick(2)).loop; // tick 2 due at 2 min, started 5 ms after
    expect(earlierOpenSlot(ran, 3 * 60_000)).toBeUndefined(); // the next slot itself
    expect(earlierOpenSlot(ran, 4 * 60_000)).toBe(3 * 60_000);
    expect(earlierOpenSlot(ran, 9 * 60_000)).toBe(3 * 60_000);
  });
  it('skips the slots the last tick covers (due before it started) and those of a back-off', () => {
    const late = applyTick(base(), { ...tick(2), startedAt: 4 * 60_000 + 10 }).loop;
    expect(earlierOpenSlot(late, 6 * 60_000)).toBe(5 * 60_000); // 3 and 4 were covered
    expect(earlierOpenSlot(late, 5 * 60_000)).toBeUndefined();
    expect(earlierOpenSlot({ ...late, nextDueAt: 7 * 60_000 }, 9 * 60_000)).toBe(7 * 60_000);
  });
  it('none before a first tick, and none for a self-paced loop', () => {
    expect(earlierOpenSlot(base(), 9 * 60_000)).toBeUndefined();
    const ran = applyTick(base(), tick(2)).loop;
    expect(earlierOpenSlot({ ...ran, mode: 'self-paced' }, 9 * 60_000)).toBeUndefined();
  });
});

describe('applyTick stop order', () => {
  it('LOOP_COMPLETE on its own line finishes, before --times and budget', () => {
    const r = applyTick(base({ times: 1, maxTicks: 1 }), tick(1, 'done\n  LOOP_COMPLETE  \n'));
    expect(r.outcome).toEqual({ kind: 'finished', reason: 'the agent reported LOOP_COMPLETE' });
  });
  it('a heartbeat ignores LOOP_COMPLETE', () => {
    expect(applyTick(base({ kind: 'heartbeat' }), tick(1, 'LOOP_COMPLETE')).outcome).toEqual({ kind: 'continue' });
  });
  it('an --until verdict comes before --times', () => {
    expect(applyTick(base({ until: 'green', times: 1 }), tick(1, 'x', { until: { verdict: 'done' } })).outcome).toMatchObject({
      kind: 'finished',
      reason: 'condition met: green',
    });
    expect(applyTick(base({ until: 'green' }), tick(1, 'x', { until: { verdict: 'blocked', reason: 'needs a token' } })).outcome).toEqual({
      kind: 'paused',
      reason: 'blocked: needs a token',
    });
  });
  it('judge failures fail open, then pause after three in a row', () => {
    let loop = base({ until: 'green' });
    for (let i = 1; i <= 2; i++) {
      const r = applyTick(loop, tick(i, 'x', { until: { verdict: 'error', message: 'timeout' } }));
      expect(r.outcome).toEqual({ kind: 'continue' });
      loop = r.loop;
    }
    const r = applyTick(loop, tick(3, 'x', { until: { verdict: 'error', message: 'timeout' } }));
    expect(r.outcome).toMatchObject({ kind: 'paused' });
    expect(r.outcome.kind === 'paused' && r.outcome.reason).toMatch(/judge failed 3 times in a row/);
  });
  it('--times finishes; max_ticks pauses', () => {
    expect(applyTick({ ...base({ times: 2 }), ticksUsed: 1 }, tick(2)).outcome).toEqual({ kind: 'finished', reason: 'ran 2 times' });
    expect(applyTick({ ...base({ maxTicks: 2 }), ticksUsed: 1 }, tick(2)).outcome.kind).toBe('paused');
    expect(applyTick({ ...base({ maxTicks: 0 }), ticksUsed: 10_000 }, tick(2)).outcome.kind).toBe('continue');
  });
  it('an empty reply completes the tick', () => {
    const r = applyTick(base(), tick(1, ''));
    expect(r.loop.ticksUsed).toBe(1);
    expect(r.outcome.kind).toBe('continue');
  });
});

describe('failure streak (loops.max_consecutive_failures)', () => {
  it('F19: three failed ticks in a row pause the loop naming the last error; a success resets the count; resume gives fresh tries', () => {
    let loop = base();
    const failed = (n: number, message = 'The model endpoint answered 500: boom') =>
      applyTick(loop, tick(n, '', { failure: message, maxConsecutiveFailures: 3 }));
    let r = failed(1);
    expect(r.outcome).toEqual({ kind: 'continue' });
    expect(r.loop).toMatchObject({ failureStreak: 1, lastError: 'The model endpoint answered 500: boom', ticksUsed: 1 });
    loop = applyTick(r.loop, tick(2, 'fine', { maxConsecutiveFailures: 3 })).loop; // a success resets
    expect(loop).toMatchObject({ failureStreak: 0, lastError: null });
    for (let i = 3; i <= 4; i++) loop = failed(i).loop;
    r = failed(5, 'The model endpoint answered 500: still down');
    expect(r.outcome).toEqual({
      kind: 'paused',
      reason: '3 failed ticks in a row; last error: The model endpoint answered 500: still down. /loop resume continues',
    });
    expect(r.loop).toMatchObject({ status: 'paused', failureStreak: 3 });
    const resumed = resumeLoop(r.loop, 10 * 60_000);
    expect(resumed).toMatchObject({ status: 'active', failureStreak: 0 });
    loop = resumed;
    expect(failed(6).outcome.kind).toBe('continue');
  });

  it('0 never pauses; a heartbeat pauses like a loop; --times still finishes first', () => {
    const long = { ...base(), failureStreak: 50 };
    expect(applyTick(long, tick(1, '', { failure: 'x', maxConsecutiveFailures: 0 })).outcome.kind).toBe('continue');
    const hb = { ...base({ kind: 'heartbeat' }), failureStreak: 2 };
    expect(applyTick(hb, tick(1, '', { failure: 'x', maxConsecutiveFailures: 3 })).outcome).toMatchObject({
      kind: 'paused',
      reason: expect.stringMatching(/\/heartbeat resume continues$/),
    });
    const last = { ...base({ times: 3 }), ticksUsed: 2, failureStreak: 2 };
    expect(applyTick(last, tick(3, '', { failure: 'x', maxConsecutiveFailures: 3 })).outcome).toEqual({
      kind: 'finished',
      reason: 'ran 3 times',
    });
  });

  it('records written before the streak existed count from zero', () => {
    const old = base() as Partial<LoopRecord>;
    delete old.failureStreak;
    expect(applyTick(old as LoopRecord, tick(1, '', { failure: 'x', maxConsecutiveFailures: 3 })).loop.failureStreak).toBe(1);
  });

  it('judge failures pause after loops.max_consecutive_failures in a row', () => {
    const loop = { ...base({ until: 'green' }), judgeFailures: 1 };
    expect(applyTick(loop, tick(1, 'x', { until: { verdict: 'error', message: 't' }, maxConsecutiveFailures: 2 })).outcome.kind).toBe(
      'paused',
    );
  });
});

describe('resume', () => {
  it('a budget pause gets a fresh budget window', () => {
    const paused = applyTick({ ...base({ maxTicks: 2 }), ticksUsed: 1 }, tick(2)).loop;
    const resumed = resumeLoop(paused, 1);
    expect(resumed).toMatchObject({ status: 'active', maxTicks: 4, ticksUsed: 2 });
  });
  it('the first tick after a resume is one interval after the last start at most, never in the past', () => {
    const ran = applyTick(base(), tick(1)).loop;
    expect(resumeDueAt(ran, 60_000 + 10)).toBe(60_000 + 5 + 60_000);
    expect(resumeDueAt(ran, 10 * 60_000)).toBe(10 * 60_000);
  });
});

describe('self-paced cadence', () => {
  it('doubles while the reply is unchanged: 60, 120, 240, 480, 900 (ceiling), then snaps back on change', () => {
    let loop = base({ intervalSeconds: null });
    const pacing = { floorSeconds: 60, ceilingSeconds: 900 };
    const delays: number[] = [];
    const replies = ['build running', 'build running', 'Build  running', 'build running', 'build running', 'build running', 'build GREEN'];
    replies.forEach((reply, i) => {
      loop = applyTick(loop, { ...tick(i + 1, reply), pacing }).loop;
      delays.push(loop.delaySeconds!);
    });
    expect(delays).toEqual([60, 120, 240, 480, 900, 900, 60]);
  });
  it('times, dates and durations do not count as a change', () => {
    expect(replyDigest('Checked at 10:35 on 2026-11-29: queue empty, took 3s')).toBe(
      replyDigest('checked at 11:05 on 2026-11-30: Queue empty, took 12 seconds'),
    );
    expect(normaliseReply('  Two   spaces\nand a newline ')).toBe('two spaces and a newline');
    expect(replyDigest('queue empty')).not.toBe(replyDigest('queue has 3 jobs'));
  });
  it('a delay the agent asked for (schedules `next`) wins over the digest rule, clamped to the floor and ceiling; a failed tick keeps the rule', () => {
    const pacing = (requestedSeconds?: number) => ({
      floorSeconds: 60,
      ceilingSeconds: 900,
      ...(requestedSeconds === undefined ? {} : { requestedSeconds }),
    });
    const after = (requestedSeconds: number | undefined, extra = {}) =>
      applyTick(base({ intervalSeconds: null }), { ...tick(1, 'same'), ...extra, pacing: pacing(requestedSeconds) }).loop;
    expect(after(420)).toMatchObject({ delaySeconds: 420, nextDueAt: tick(1).finishedAt + 420_000 });
    expect(after(15).delaySeconds).toBe(60);
    expect(after(3 * 3600).delaySeconds).toBe(900);
    expect(after(undefined).delaySeconds).toBe(60);
    expect(after(420, { failure: 'model down' }).delaySeconds).toBe(60);
    // a fixed loop has no delay to set
    expect(applyTick(base(), { ...tick(1), pacing: pacing(420) }).loop.delaySeconds).toBeNull();
  });
  it('nextSelfPacedDelay starts at the floor', () => {
    expect(nextSelfPacedDelay({ currentDelaySeconds: 60, previousDigest: null, digest: 'a', floorSeconds: 60, ceilingSeconds: 900 })).toBe(
      60,
    );
  });
  it('hasLoopComplete needs the marker alone on a line', () => {
    expect(hasLoopComplete('x\nLOOP_COMPLETE')).toBe(true);
    expect(hasLoopComplete('LOOP_COMPLETE.')).toBe(false);
  });
});

describe('economy in the loop record (docs/CONTEXT.md)', () => {
  const spend = (inputTokens: number, outputTokens: number, cachedTokens = 0) => ({
    calls: 2,
    inputTokens,
    outputTokens,
    cachedTokens,
    lastInputTokens: inputTokens / 2,
    estimated: false,
  });

  it("adds each tick's spend to the totals, counts silent and unchanged ticks, keeps the watch digest only from a tick that ran well", () => {
    let loop = base({ economy: { watch: 'read_file:/x' } });
    loop = applyTick(loop, tick(1, 'first', { spend: spend(1000, 10), watchDigest: 'd1' })).loop;
    loop = applyTick(loop, tick(2, '[SILENT]', { spend: spend(1200, 2, 1024), watchDigest: 'd2' })).loop;
    loop = applyTick(loop, tick(3, '', { unchanged: true, watchDigest: 'd2' })).loop;
    expect(loop.spend).toEqual({
      calls: 4,
      inputTokens: 2200,
      outputTokens: 12,
      cachedTokens: 1024,
      lastInputTokens: 600,
      lastTurnTokens: 1202,
      estimated: false,
    });
    expect([loop.silentTicks, loop.unchangedTicks, loop.watchDigest]).toEqual([1, 1, 'd2']);
    const failed = applyTick(loop, tick(4, '', { failure: 'model down', watchDigest: 'd3' })).loop;
    expect(failed.watchDigest).toBe('d2'); // retried at the next tick even if the check stays the same
  });

  it('--max-tokens pauses with the spend named once reached; resume gives a fresh allowance', () => {
    let loop = base({ economy: { maxTokens: 2000 } });
    let r = applyTick(loop, tick(1, 'a', { spend: spend(1500, 100) }));
    expect(r.outcome.kind).toBe('continue');
    r = applyTick(r.loop, tick(2, 'b', { spend: spend(390, 10) }));
    expect(r.outcome).toEqual({
      kind: 'paused',
      reason: expect.stringMatching(
        /^token budget of 2,000 reached \(--max-tokens\): 2,000 tokens since it was set or resumed; in all 4 model calls, 1,890 tokens in, 110 out/,
      ),
    });
    loop = resumeLoop(r.loop, 0);
    expect([loop.status, loop.budgetTokens, loop.spend!.inputTokens]).toEqual(['active', 0, 1890]);
  });

  it('a turn stopped at agent.max_tokens_per_turn pauses at once, whatever the failure streak', () => {
    const r = applyTick(
      base(),
      tick(1, '', {
        failure: 'This turn used 41,230 tokens, over agent.max_tokens_per_turn (40,000).',
        overTurnBudget: { usedTokens: 41_230, limitTokens: 40_000 },
        spend: spend(41000, 230),
      }),
    );
    expect(r.outcome).toEqual({
      kind: 'paused',
      reason: 'one tick used 41,230 tokens, over agent.max_tokens_per_turn (40,000). /loop resume continues',
    });
  });

  it('the answer that passed agent.max_tokens_per_turn is kept: the tick succeeds, then the loop pauses naming the spend', () => {
    const r = applyTick(
      base(),
      tick(1, 'The build is green.', { overTurnBudget: { usedTokens: 873, limitTokens: 500 }, spend: spend(800, 73) }),
    );
    expect(r.outcome).toEqual({
      kind: 'paused',
      reason: 'one tick used 873 tokens, over agent.max_tokens_per_turn (500). /loop resume continues',
    });
    expect(r.loop).toMatchObject({ status: 'paused', failureStreak: 0, lastError: null, ticksUsed: 1 });
    // Without the overrun the same tick goes on: the pause is the budget's, not the reply's.
    expect(applyTick(base(), tick(1, 'The build is green.', { spend: spend(800, 73) })).outcome).toEqual({ kind: 'continue' });
  });

  it('--max-tokens reached by one tick alone says that one tick costs more than the whole budget', () => {
    const r = applyTick(base({ economy: { maxTokens: 500 } }), tick(1, 'a', { spend: spend(800, 73) }));
    expect(r.outcome).toMatchObject({
      kind: 'paused',
      reason: expect.stringMatching(
        /^token budget of 500 reached \(--max-tokens\): 873 tokens since it was set or resumed; in all 2 model calls, 800 tokens in, 73 out \(last input 400\); one tick alone costs about 873 tokens, more than the whole budget\. \/loop resume gives a fresh allowance$/,
      ),
    });
    // Two ticks that reach it together: no such words.
    let two = applyTick(base({ economy: { maxTokens: 500 } }), tick(1, 'a', { spend: spend(300, 10) }));
    two = applyTick(two.loop, tick(2, 'b', { spend: spend(300, 10) }));
    expect(two.outcome.kind).toBe('paused');
    expect((two.outcome as { reason: string }).reason).not.toContain('alone');
  });
});
