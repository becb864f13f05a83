/**
 * The views loops, heartbeats and cron jobs show on every wire (`/api`, the CLI's `--json`, MCP):
 * snake_case names, and a concept both records have spelled the same in both views, whatever the
 * records call it inside (`failureStreak` and `failure_streak`, `statusReason` and `paused_reason`).
 */
import { describe, expect, it } from 'vitest';
import { applyTick, pauseLoop } from '../scheduler/loop/loop-state.ts';
import { scheduleObject } from '../scheduler/loop/schedule-view.ts';
import { applyRun, cronJobView, pauseCronJob } from '../scheduler/cron/cron-job.ts';
import { cronJobFixture, cronRunFixture, FIXTURE_T0, loopFixture } from './support/record-fixtures.ts';

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
