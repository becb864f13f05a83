/**
 * The schedule policy (docs/DESIGN.md, "One schedule policy"): the rules loops, heartbeats and cron
 * jobs share, pinned once on the policy and once on each record, so a record that stopped going
 * through it (or a rule changed in one place only) shows up here.
 */
import { describe, expect, it } from 'vitest';
import { configSchema } from '../scheduler/config/config.ts';
import { applyTick, resumeLoop, type LoopRecord } from '../scheduler/loop/loop-state.ts';
import { applyRun, resumeCronJob, type CronJob, type CronRun } from '../scheduler/cron/cron-job.ts';
import { failureRule, SCHEDULE_POLICY, type ScheduleLedger, type TurnEnd } from '../scheduler/schedule-policy/schedule-policy.ts';
import { NO_SPEND, type ModelSpend } from '../scheduler/model-spend.ts';
import { cronJobFixture, cronRunFixture, FIXTURE_T0, loopFixture } from './support/record-fixtures.ts';

const config = configSchema().parse({});
const T0 = FIXTURE_T0;
const MIN = 60_000;

const ledger = (over: Partial<ScheduleLedger> = {}): ScheduleLedger => ({
  failureStreak: 0,
  failingSince: null,
  lastError: null,
  maxTokens: null,
  budgetTokens: 0,
  spend: undefined,
  watch: null,
  watchDigest: null,
  unchangedTurns: 0,
  silentTurns: 0,
  ...over,
});
const spend = (tokens: number): ModelSpend => ({ ...NO_SPEND, calls: 1, inputTokens: tokens, outputTokens: 0 });
const turn = (n: number, over: Partial<TurnEnd> = {}): TurnEnd => ({
  status: 'ok',
  startedAt: T0 + n * MIN,
  finishedAt: T0 + n * MIN + 10,
  reply: 'done',
  ...over,
});
const failed = (n: number, error = 'model down'): TurnEnd => turn(n, { status: 'error', error, reply: '' });

describe('the shared rules', () => {
  it('a failure adds one to the streak and keeps when it began; a success resets it; a skip leaves it', () => {
    let l = SCHEDULE_POLICY.afterTurn(ledger(), failed(1));
    l = SCHEDULE_POLICY.afterTurn(l, failed(2, 'still down'));
    expect(l).toMatchObject({ failureStreak: 2, failingSince: T0 + MIN, lastError: 'still down' });
    expect(SCHEDULE_POLICY.afterTurn(l, turn(3, { status: 'skipped', reply: '' }))).toMatchObject({ failureStreak: 2 });
    expect(SCHEDULE_POLICY.afterTurn(l, turn(3))).toMatchObject({ failureStreak: 0, failingSince: null, lastError: null });
  });

  it('spend joins the totals; only a schedule with --max-tokens counts it against the budget, a failed turn too', () => {
    const none = SCHEDULE_POLICY.afterTurn(ledger(), turn(1, { spend: spend(40) }));
    expect(none.spend?.inputTokens).toBe(40);
    expect(none.budgetTokens).toBe(0);
    const capped = SCHEDULE_POLICY.afterTurn(ledger({ maxTokens: 100, budgetTokens: 30 }), { ...failed(1), spend: spend(40) });
    expect(capped.budgetTokens).toBe(70);
  });

  it('the watch digest is kept after a successful turn of the same watch only', () => {
    const l = ledger({ watch: 'read_file:/a', watchDigest: 'old' });
    expect(SCHEDULE_POLICY.afterTurn(l, turn(1, { watch: { spec: 'read_file:/a', digest: 'new' } })).watchDigest).toBe('new');
    expect(SCHEDULE_POLICY.afterTurn(l, { ...failed(1), watch: { spec: 'read_file:/a', digest: 'new' } }).watchDigest).toBe('old');
    expect(SCHEDULE_POLICY.afterTurn(l, turn(1, { watch: { spec: 'read_file:/b', digest: 'new' } })).watchDigest).toBe('old');
  });

  it('an unchanged check counts as unchanged, a quiet reply as silent', () => {
    expect(SCHEDULE_POLICY.afterTurn(ledger(), turn(1, { unchanged: true, reply: '' })).unchangedTurns).toBe(1);
    expect(SCHEDULE_POLICY.afterTurn(ledger(), turn(1, { reply: '[SILENT]' })).silentTurns).toBe(1);
    expect(SCHEDULE_POLICY.afterTurn(ledger(), { ...failed(1), reply: '[SILENT]' }).silentTurns).toBe(0);
  });

  it('pauses at the count once the failures span pauseAfterSeconds; 0 failures allowed means never', () => {
    const rule = { maxConsecutive: 3, backoffSeconds: 30, backoffMaxSeconds: 900, pauseAfterSeconds: 120 };
    const l = ledger({ failureStreak: 3, failingSince: T0, lastError: 'x' });
    // Three failures within 61 s: not long enough; at 121 s: paused, the span named.
    expect(SCHEDULE_POLICY.pauseAfter(l, failed(1), rule, 'tick')).toBeUndefined();
    expect(SCHEDULE_POLICY.pauseAfter(l, { ...failed(2), finishedAt: T0 + 2 * MIN + 1000 }, rule, 'tick')).toEqual({
      cause: 'failures',
      reason: '3 failed ticks in a row over 2m1s; last error: x',
    });
    expect(SCHEDULE_POLICY.pauseAfter(l, failed(9), { ...rule, maxConsecutive: 0 }, 'tick')).toBeUndefined();
    // One fewer than the count never pauses.
    expect(SCHEDULE_POLICY.pauseAfter({ ...l, failureStreak: 2 }, failed(9), rule, 'run')).toBeUndefined();
  });

  it('the budget pause comes before the failure streak', () => {
    const rule = failureRule({ max_consecutive_failures: 1 });
    const l = ledger({ failureStreak: 1, lastError: 'x', maxTokens: 100, budgetTokens: 100 });
    expect(SCHEDULE_POLICY.pauseAfter(l, failed(1), rule, 'run')?.cause).toBe('budget');
  });

  it('reads each kind from its config section: loops back off and wait out a span, cron jobs count alone', () => {
    const loops = failureRule(config.loops);
    expect(loops).toEqual({
      maxConsecutive: config.loops.max_consecutive_failures,
      backoffSeconds: config.loops.failure_backoff_seconds,
      backoffMaxSeconds: config.loops.failure_backoff_max_seconds,
      pauseAfterSeconds: config.loops.failure_pause_after_seconds,
    });
    const cron = failureRule(config.cron);
    expect(cron).toEqual({
      maxConsecutive: config.cron.max_consecutive_failures,
      backoffSeconds: 0,
      backoffMaxSeconds: 0,
      pauseAfterSeconds: 0,
    });
    const streak = ledger({ failureStreak: 3 });
    expect(SCHEDULE_POLICY.retryAt(streak, T0, loops)).toBe(T0 + Math.min(loops.backoffMaxSeconds, loops.backoffSeconds * 4) * 1000);
    expect(SCHEDULE_POLICY.retryAt(streak, T0, cron)).toBeNull();
    expect(SCHEDULE_POLICY.retryAt(ledger(), T0, loops)).toBeNull();
  });

  it('resume gives fresh tries and, under --max-tokens, a fresh allowance', () => {
    expect(SCHEDULE_POLICY.resume(ledger({ failureStreak: 3, failingSince: T0, maxTokens: 10, budgetTokens: 12 }))).toMatchObject({
      failureStreak: 0,
      failingSince: null,
      budgetTokens: 0,
    });
  });
});

describe('both records go through it', () => {
  const loop = (): LoopRecord => loopFixture({ economy: { maxTokens: 1000, watch: 'read_file:/a' } });
  const job = (): CronJob => cronJobFixture({ economy: { max_tokens: 1000, watch: 'read_file:/a' } });
  const tick = (n: number, over: Record<string, unknown> = {}) => ({
    loopId: 'L1',
    dueAt: T0 + n * MIN,
    occurrenceId: `o${n}`,
    startedAt: T0 + n * MIN,
    finishedAt: T0 + n * MIN + 10,
    reply: 'done',
    pacing: { floorSeconds: 60, ceilingSeconds: 900 },
    maxConsecutiveFailures: 3,
    ...over,
  });
  const run = (n: number, over: Partial<CronRun> = {}): CronRun =>
    cronRunFixture('abcdefabcdef', T0 + n * MIN, { occurrence_id: `o${n}`, ...over });

  it('the same turns leave a loop and a cron job with the same spend, budget, digest and streak', () => {
    let l = loop();
    let j = job();
    const turns: Array<{ spend: ModelSpend; error?: string; digest: string }> = [
      { spend: spend(100), digest: 'd1' },
      { spend: spend(200), error: 'boom', digest: 'd2' },
      { spend: spend(50), error: 'boom again', digest: 'd3' },
    ];
    turns.forEach((t, i) => {
      l = applyTick(l, tick(i + 1, { spend: t.spend, watchDigest: t.digest, ...(t.error ? { failure: t.error } : {}) })).loop;
      j = applyRun(
        j,
        run(i + 1, { spend: t.spend, ...(t.error ? { status: 'error', error: t.error, output: null } : {}) }),
        T0 + (i + 1) * MIN,
        T0 + (i + 1) * MIN + 10,
        { maxConsecutiveFailures: 3, watch: { spec: 'read_file:/a', digest: t.digest } },
      );
    });
    expect({
      streak: l.failureStreak,
      budget: l.budgetTokens,
      digest: l.watchDigest,
      tokens: l.spend?.inputTokens,
      error: l.lastError,
    }).toEqual({
      streak: 2,
      budget: 350,
      digest: 'd1',
      tokens: 350,
      error: 'boom again',
    });
    expect({
      streak: j.failure_streak,
      budget: j.budget_tokens,
      digest: j.watch_digest,
      tokens: j.spend?.inputTokens,
      error: j.last_error,
    }).toEqual({
      streak: 2,
      budget: 350,
      digest: 'd1',
      tokens: 350,
      error: 'boom again',
    });
    // The third failure pauses both (the count alone: no span set), with the same reason in each one's noun.
    l = applyTick(l, tick(4, { failure: 'x' })).loop;
    j = applyRun(j, run(4, { status: 'error', error: 'x', output: null }), T0 + 4 * MIN, T0 + 4 * MIN + 10, { maxConsecutiveFailures: 3 });
    expect(l.statusReason).toBe('3 failed ticks in a row; last error: x. /loop resume continues');
    expect(j.paused_reason).toBe('3 failed runs in a row; last error: x');
    // Resume: fresh tries and a fresh allowance for both.
    expect(resumeLoop(l, T0 + 5 * MIN)).toMatchObject({ failureStreak: 0, budgetTokens: 0 });
    expect(resumeCronJob(j, T0 + 5 * MIN)).toMatchObject({ failure_streak: 0, budget_tokens: 0 });
  });

  it('a turn that reaches --max-tokens pauses either with the spend named', () => {
    const l = applyTick(loop(), tick(1, { spend: spend(1000) }));
    const j = applyRun(job(), run(1, { spend: spend(1000) }), T0 + MIN, T0 + MIN + 10, { maxConsecutiveFailures: 3 });
    expect(l.outcome.kind).toBe('paused');
    expect(l.loop.statusReason).toMatch(/^token budget of 1,000 reached \(--max-tokens\): 1,000 tokens since it was set or resumed/);
    expect(j.state).toBe('paused');
    expect(j.paused_reason).toMatch(/^token budget of 1,000 reached \(--max-tokens\): 1,000 tokens since it was set or resumed/);
  });
});

describe('the shared rules at their edges', () => {
  const rule = { maxConsecutive: 3, backoffSeconds: 0, backoffMaxSeconds: 0, pauseAfterSeconds: 120 };

  it('a failure without a message is an unknown error, in the ledger and in the pause reason', () => {
    const l = ledger({ failureStreak: 3, failingSince: T0, lastError: null });
    expect(SCHEDULE_POLICY.afterTurn(ledger(), turn(1, { status: 'error', error: null, reply: '' })).lastError).toBe('unknown error');
    const pause = SCHEDULE_POLICY.pauseAfter(l, turn(3, { status: 'error', reply: '' }), { ...rule, pauseAfterSeconds: 0 }, 'tick');
    expect(pause).toEqual({ cause: 'failures', reason: '3 failed ticks in a row; last error: unknown error' });
  });

  it('spend of a turn without a model call leaves the totals as they were', () => {
    expect(SCHEDULE_POLICY.afterTurn(ledger(), turn(1, { spend: NO_SPEND })).spend).toBeUndefined();
  });

  it('the failure pause waits for the streak and for exactly pauseAfterSeconds since the first failure; a success never pauses', () => {
    const l = ledger({ failureStreak: 3, failingSince: T0, lastError: 'down' });
    const endingAt = (ms: number): TurnEnd => ({ status: 'error', error: 'down', startedAt: T0 + ms - 10, finishedAt: T0 + ms, reply: '' });
    expect(SCHEDULE_POLICY.pauseAfter(l, endingAt(120_000 - 1), rule, 'run')).toBeUndefined();
    expect(SCHEDULE_POLICY.pauseAfter(l, endingAt(120_000), rule, 'run')).toEqual({
      cause: 'failures',
      reason: '3 failed runs in a row over 2m; last error: down',
    });
    expect(SCHEDULE_POLICY.pauseAfter({ ...l, failureStreak: 2 }, endingAt(600_000), rule, 'run')).toBeUndefined();
    expect(SCHEDULE_POLICY.pauseAfter(l, { ...endingAt(600_000), status: 'ok', reply: 'ok' }, rule, 'run')).toBeUndefined();
    expect(SCHEDULE_POLICY.pauseAfter(l, endingAt(600_000), { ...rule, maxConsecutive: 0 }, 'run')).toBeUndefined();
  });

  it('no back-off when the rule has none, whatever the streak; doubling from the first failure up to the cap', () => {
    expect(SCHEDULE_POLICY.backoffSeconds(4, { ...rule, backoffSeconds: 0, backoffMaxSeconds: 600 })).toBe(0);
    expect(SCHEDULE_POLICY.backoffSeconds(1, { ...rule, backoffSeconds: 10, backoffMaxSeconds: 600 })).toBe(10);
    expect(SCHEDULE_POLICY.backoffSeconds(3, { ...rule, backoffSeconds: 10, backoffMaxSeconds: 600 })).toBe(40);
    expect(SCHEDULE_POLICY.backoffSeconds(9, { ...rule, backoffSeconds: 10, backoffMaxSeconds: 600 })).toBe(600);
  });

  it("a pause reason is the failure streak's only when it names that streak", () => {
    expect(SCHEDULE_POLICY.pausedByFailures('3 failed ticks in a row; last error: x', 3)).toBe(true);
    expect(SCHEDULE_POLICY.pausedByFailures('3 failed runs in a row over 2m; last error: x', 3)).toBe(true);
    expect(SCHEDULE_POLICY.pausedByFailures('3 failed ticks in a row; last error: x', 2)).toBe(false);
    expect(SCHEDULE_POLICY.pausedByFailures('0 failed ticks in a row', 0)).toBe(false);
    expect(SCHEDULE_POLICY.pausedByFailures('paused by the operator', 3)).toBe(false);
    expect(SCHEDULE_POLICY.pausedByFailures('x 3 failed ticks in a row', 3)).toBe(false);
    expect(SCHEDULE_POLICY.pausedByFailures(null, 3)).toBe(false);
  });

  it("a failing schedule's notice states the rule, with its span when it has one, and nothing without a rule", () => {
    expect(SCHEDULE_POLICY.failureRuleText(rule, 2)).toBe('It pauses after 3 failures in a row over at least 2m (2 so far).');
    expect(SCHEDULE_POLICY.failureRuleText({ ...rule, pauseAfterSeconds: 0 }, 1)).toBe('It pauses after 3 failures in a row (1 so far).');
    expect(SCHEDULE_POLICY.failureRuleText({ ...rule, maxConsecutive: 0 }, 5)).toBe('');
  });
});
