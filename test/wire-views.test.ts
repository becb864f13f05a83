/**
 * The views loops, heartbeats and cron jobs show on every wire (`/api`, the CLI's `--json`, MCP):
 * snake_case names at every depth (spend and event data included: docs/GATEWAY.md, "One casing"), and a
 * concept both records have spelled the same in both views, whatever the records call it inside
 * (`failureStreak` and `failure_streak`, `statusReason` and `paused_reason`); a count of occurrences
 * named by each record's noun (ticks, runs).
 */
import { describe, expect, it } from 'vitest';
import { applyTick, pauseLoop } from '../scheduler/loop/loop-state.ts';
import { scheduleObject } from '../scheduler/loop/schedule-view.ts';
import { applyRun, cronJobView, cronRunView, pauseCronJob } from '../scheduler/cron/cron-job.ts';
import { goalObject } from '../scheduler/loop/schedule-view.ts';
import { createGoal } from '../scheduler/goal/goal-state.ts';
import { NO_SPEND } from '../scheduler/model-spend.ts';
import { eventWire } from '../scheduler/session/event-wire.ts';
import { snakeCase, wireKeys } from '../scheduler/text/wire-case.ts';
import { cronJobFixture, cronRunFixture, FIXTURE_T0, loopFixture } from './support/record-fixtures.ts';
import { camelKeys } from './support/wire-case.ts';

const T0 = FIXTURE_T0;
const loop = applyTick(loopFixture({ economy: { maxTokens: 1000, watch: 'read_file:/a' } }), {
  loopId: 'L1',
  dueAt: T0,
  occurrenceId: 'o1',
  startedAt: T0,
  finishedAt: T0 + 10,
  reply: '',
  failure: 'model down',
  maxConsecutiveFailures: 3,
  pacing: { floorSeconds: 60, ceilingSeconds: 900 },
}).loop;
const job = applyRun(
  cronJobFixture({ economy: { max_tokens: 1000, watch: 'read_file:/a' } }),
  cronRunFixture('abcdefabcdef', T0, { occurrence_id: 'o1', status: 'error', output: null, error: 'model down' }),
  T0,
  T0 + 10,
  { maxConsecutiveFailures: 3 },
);

describe('the wire views', () => {
  const loopView = scheduleObject(pauseLoop(loop, T0 + 20, 'paused by user'), T0 + 20);
  const cronView = cronJobView({ ...pauseCronJob(job, T0 + 20)!, paused_reason: 'paused by user' });

  it('name every field in snake_case', () => {
    for (const view of [loopView, cronView]) {
      const bad = Object.keys(view).filter((k) => !/^[a-z][a-z0-9_]*$/.test(k));
      expect(bad).toEqual([]);
    }
  });

  it('spell what both records keep the same way, with the same values for the same history', () => {
    const shared = [
      'status_reason',
      'failure_streak',
      'last_error',
      'notify',
      'watch',
      'watch_digest',
      'model',
      'max_tokens',
      'budget_tokens',
      'spend',
      'created_by',
      'deliver',
    ];
    for (const key of shared) {
      expect(loopView, key).toHaveProperty(key);
      expect(cronView, key).toHaveProperty(key);
    }
    const pick = (v: Record<string, unknown>) =>
      Object.fromEntries(['status_reason', 'failure_streak', 'last_error', 'notify', 'max_tokens'].map((k) => [k, v[k]]));
    expect(pick(loopView)).toEqual({
      status_reason: 'paused by user',
      failure_streak: 1,
      last_error: 'model down',
      notify: 'auto',
      max_tokens: 1000,
    });
    expect(pick(cronView)).toEqual(pick(loopView));
    // The cron view's earlier name for the reason stays, with the same value.
    expect(cronView.paused_reason).toBe(cronView.status_reason);
  });
});

describe('one casing at every depth', () => {
  const spent = { ...NO_SPEND, calls: 2, inputTokens: 1200, outputTokens: 80, cachedTokens: 1024, lastInputTokens: 700 };
  const ticked = applyTick(loopFixture({ economy: { maxTokens: 5000 } }), {
    loopId: 'L1',
    dueAt: T0,
    occurrenceId: 'o2',
    startedAt: T0,
    finishedAt: T0 + 10,
    reply: 'done',
    spend: spent,
    maxConsecutiveFailures: 3,
    pacing: { floorSeconds: 60, ceilingSeconds: 900 },
  }).loop;
  const run = cronRunFixture('abcdefabcdef', T0, { occurrence_id: 'o2', spend: spent });
  const ran = applyRun(cronJobFixture({ economy: { max_tokens: 5000 } }), run, T0, T0 + 10, { maxConsecutiveFailures: 3 });
  const goal = {
    ...createGoal({ goalId: 'G1', sessionId: 's', text: 't', maxTurns: 5, origin: { surface: 'cli' }, now: T0 }),
    spend: ticked.spend,
  };

  it('names no field of a view in camelCase, spend included', () => {
    const views = {
      loop: scheduleObject(ticked, T0 + 20, T0 + 60_000),
      cron: cronJobView(ran),
      run: cronRunView(run),
      goal: goalObject(goal),
    };
    expect(camelKeys(views)).toEqual([]);
    const wire = { calls: 2, input_tokens: 1200, output_tokens: 80, cached_tokens: 1024, last_input_tokens: 700 };
    expect(views.loop.spend).toMatchObject({ ...wire, last_turn_tokens: 1280, estimated: false });
    expect(views.cron.spend).toEqual(views.loop.spend);
    expect(views.goal.spend).toEqual(views.loop.spend);
    expect(views.run.spend).toEqual({ ...wire, estimated: false });
    // A run without model calls shows zeros, in the same names.
    expect(cronRunView(cronRunFixture('abcdefabcdef', T0)).spend).toEqual({
      calls: 0,
      input_tokens: 0,
      output_tokens: 0,
      cached_tokens: 0,
      last_input_tokens: 0,
      estimated: false,
    });
  });

  it('hands events out with snake_case data at every depth, the stored event unchanged', () => {
    const stored = {
      id: '1700000000000-0',
      type: 'reply',
      data: {
        text: 'the build is green, see camelCase and fooBar: in text',
        source: 'tick',
        occurrenceId: 'loop:s:L1:1700000000000',
        dueAt: T0,
        latenessMs: 41,
        claimedAhead: true,
        spend: { calls: 1, inputTokens: 10, outputTokens: 2, cachedTokens: 0, lastInputTokens: 10, estimated: false },
        parts: [{ messageId: 7, chatId: 'c1' }],
        job_id: 'abcdefabcdef',
        arguments: '{"branchName":"main"}',
      },
    };
    const before = structuredClone(stored);
    const wire = eventWire(stored);
    expect(camelKeys(wire)).toEqual([]);
    expect(wire).toEqual({
      id: stored.id,
      type: 'reply',
      data: {
        text: stored.data.text,
        source: 'tick',
        occurrence_id: stored.data.occurrenceId,
        due_at: T0,
        lateness_ms: 41,
        claimed_ahead: true,
        spend: { calls: 1, input_tokens: 10, output_tokens: 2, cached_tokens: 0, last_input_tokens: 10, estimated: false },
        parts: [{ message_id: 7, chat_id: 'c1' }],
        job_id: 'abcdefabcdef',
        // Strings are data, never looked into: a tool's JSON arguments stay as the model wrote them.
        arguments: '{"branchName":"main"}',
      },
    });
    expect(stored).toEqual(before);
  });

  it('spells a name once: camelCase to snake_case, snake_case as it is', () => {
    expect(['occurrenceId', 'lastTurnTokens', 'job_id', 'pid', 'tool_calls', 'p95Ms'].map(snakeCase)).toEqual([
      'occurrence_id',
      'last_turn_tokens',
      'job_id',
      'pid',
      'tool_calls',
      'p95_ms',
    ]);
    expect(wireKeys([{ aB: [{ cD: null }] }, 'xY', 3])).toEqual([{ a_b: [{ c_d: null }] }, 'xY', 3]);
  });

  it('shows no budget (null) without max_tokens in both views, and the tokens used with it', () => {
    const plainLoop = scheduleObject(loopFixture(), T0);
    const plainJob = cronJobView(cronJobFixture());
    expect([plainLoop.budget_tokens, plainJob.budget_tokens]).toEqual([null, null]);
    expect([plainLoop.max_tokens, plainJob.max_tokens]).toEqual([null, null]);
    const budgetLoop = scheduleObject(ticked, T0);
    const budgetJob = cronJobView(ran);
    expect(budgetLoop.budget_tokens).toBe(1280);
    expect(budgetJob.budget_tokens).toBe(budgetLoop.budget_tokens);
  });

  it('names a count of occurrences by its record’s noun: ticks for loops, runs for cron jobs, the same count', () => {
    const unchangedTick = applyTick(loopFixture({ economy: { watch: 'read_file:/a' } }), {
      loopId: 'L1',
      dueAt: T0,
      occurrenceId: 'o3',
      startedAt: T0,
      finishedAt: T0 + 10,
      reply: '',
      unchanged: true,
      maxConsecutiveFailures: 3,
      pacing: { floorSeconds: 60, ceilingSeconds: 900 },
    }).loop;
    const unchangedRun = applyRun(
      cronJobFixture({ economy: { watch: 'read_file:/a' } }),
      cronRunFixture('abcdefabcdef', T0, { occurrence_id: 'o3', output: null, unchanged: true }),
      T0,
      T0 + 10,
      { maxConsecutiveFailures: 3 },
    );
    const loopView = scheduleObject(unchangedTick, T0 + 20);
    const cronView = cronJobView(unchangedRun);
    expect(loopView).toMatchObject({ unchanged_ticks: 1, silent_ticks: 0 });
    expect(cronView).toMatchObject({ unchanged_runs: 1 });
    expect(Object.keys(loopView).filter((k) => k.endsWith('_runs'))).toEqual([]);
    expect(Object.keys(cronView).filter((k) => k.endsWith('_ticks'))).toEqual([]);
  });
});
