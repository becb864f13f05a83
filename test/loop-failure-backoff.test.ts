/**
 * A short model outage is ridden out (scheduler/loop/loop-state.ts, `FailurePolicy`): a failed tick is
 * tried again after 30 s, doubled after each further failure up to 15 min, whatever the cadence; a
 * success resumes the cadence; a loop or heartbeat pauses only after `max_consecutive_failures`
 * failures in a row that span `loops.failure_pause_after_seconds` (900). Notices say the upstream's
 * status once, with its own message.
 */
import { describe, expect, it } from 'vitest';
import { configSchema } from '../scheduler/config/config.ts';
import {
  applyTick,
  clipError,
  decideFire,
  failureBackoffSeconds,
  resumeLoop,
  tickFailureNotice,
  type FailurePolicy,
  type LoopRecord,
} from '../scheduler/loop/loop-state.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { loopFixture } from './support/record-fixtures.ts';
import { startWorkerStack, waitFor, waitForEvents } from './support/stack.ts';

const defaults = configSchema().parse({}).loops;
const POLICY: FailurePolicy = {
  backoffSeconds: defaults.failure_backoff_seconds,
  backoffMaxSeconds: defaults.failure_backoff_max_seconds,
  pauseAfterSeconds: defaults.failure_pause_after_seconds,
};
const pacing = { floorSeconds: defaults.self_paced_floor_seconds, ceilingSeconds: defaults.self_paced_ceiling_seconds };
const RAW_500 = 'The model endpoint answered 500: upstream exploded';

/** A heartbeat `H` every `intervalSeconds`, counted from 0. */
function heartbeat(intervalSeconds: number | null = 60): LoopRecord {
  return loopFixture({ kind: 'heartbeat', loopId: 'H', intervalSeconds, now: 0 });
}

/** Run one tick of `loop` starting at `at` (ms) that takes 2 s; failed when `failure` is given. */
function run(loop: LoopRecord, at: number, failure?: string, policy: FailurePolicy = POLICY) {
  return applyTick(loop, {
    loopId: loop.loopId,
    dueAt: at,
    occurrenceId: `o${at}`,
    startedAt: at,
    finishedAt: at + 2000,
    reply: failure ? '' : 'fine',
    pacing,
    maxConsecutiveFailures: defaults.max_consecutive_failures,
    failurePolicy: policy,
    ...(failure ? { failure } : {}),
  });
}

describe('the back-off of failed ticks (pure)', () => {
  it('waits 30 s, 1 m, 2 m, 4 m, 8 m, then 15 m between tries by default', () => {
    expect(defaults).toMatchObject({
      failure_backoff_seconds: 30,
      failure_backoff_max_seconds: 900,
      failure_pause_after_seconds: 900,
      max_consecutive_failures: 3,
    });
    expect([1, 2, 3, 4, 5, 6, 7, 50].map((k) => failureBackoffSeconds(k, POLICY))).toEqual([30, 60, 120, 240, 480, 900, 900, 900]);
  });

  it('a heartbeat every minute: a 2-minute outage never pauses it, the cadence resumes on success', () => {
    let hb = heartbeat(60);
    let at = 0;
    const dues: number[] = [];
    for (let i = 0; i < 3; i++) {
      const r = run(hb, at, RAW_500);
      expect(r.outcome).toEqual({ kind: 'continue' }); // 3 failures in 1.5 min: not long enough to pause
      hb = r.loop;
      dues.push(hb.nextDueAt! - (at + 2000));
      at = hb.nextDueAt!;
    }
    expect(dues).toEqual([30_000, 60_000, 120_000]);
    // The job scheduler's regular occurrences do not fire before the next try.
    expect(decideFire(hb, { loopId: 'H', dueAt: hb.nextDueAt! - 60_000, occurrenceId: 'early' })).toEqual({
      fire: false,
      reason: 'backing-off',
    });
    expect(decideFire(hb, { loopId: 'H', dueAt: hb.nextDueAt!, occurrenceId: 'retry' })).toEqual({ fire: true });
    expect(hb).toMatchObject({ failureStreak: 3, failingSince: 0, status: 'active' });
    const ok = run(hb, at);
    expect(ok.outcome).toEqual({ kind: 'continue' });
    expect(ok.loop).toMatchObject({ failureStreak: 0, failingSince: null, lastError: null, nextDueAt: null }); // the job scheduler's cadence again
  });

  it('a long outage pauses it after 3 failures in a row only once they span 15 min, naming the upstream error with its status once', () => {
    let hb = heartbeat(60);
    let at = 0;
    const outcomes: string[] = [];
    for (;;) {
      const r = run(hb, at, RAW_500);
      outcomes.push(r.outcome.kind);
      hb = r.loop;
      if (r.outcome.kind !== 'continue') break;
      at = hb.nextDueAt!;
    }
    // Tries at 0, 32 s, 1m34s, 3m36s, 7m38s, 15m40s: the sixth is the first whose streak spans 15 min.
    expect(outcomes).toEqual(['continue', 'continue', 'continue', 'continue', 'continue', 'paused']);
    expect(hb).toMatchObject({ status: 'paused', failureStreak: 6, nextDueAt: null });
    expect(hb.statusReason).toBe(
      '6 failed ticks in a row over 15m42s; last error: The model endpoint answered 500: upstream exploded. /heartbeat resume continues',
    );
    expect(hb.statusReason!.match(/500/g)).toHaveLength(1);
    // Resume: fresh tries, and the streak's start forgotten.
    expect(resumeLoop(hb, at + 10_000)).toMatchObject({ status: 'active', failureStreak: 0, failingSince: null });
  });

  it('the notice of a failed tick: the error, the next try, the pause rule', () => {
    const r = run(heartbeat(60), 0, RAW_500);
    expect(tickFailureNotice(r.loop, 1, RAW_500, 3, POLICY)).toBe(
      'Heartbeat tick #1 failed: The model endpoint answered 500: upstream exploded. Next try in 30s. It pauses after 3 failures in a row over at least 15m (1 so far).',
    );
    expect(clipError(`HTTP 500:\n  internal error ${'x'.repeat(400)}`)).toMatch(/^HTTP 500: internal error x{274}…$/);
  });

  it('a self-paced loop backs off the same way, then paces itself again; 0 pauses by the count alone', () => {
    const loop = loopFixture({ intervalSeconds: null, now: 0 }); // self-paced
    const failed = run({ ...loop, delaySeconds: 240 }, 0, 'boom').loop;
    expect(failed.nextDueAt).toBe(2000 + 30_000);
    const ok = run(failed, failed.nextDueAt!).loop;
    expect(ok.nextDueAt! - (failed.nextDueAt! + 2000)).toBe(ok.delaySeconds! * 1000);
    // failure_pause_after_seconds 0: three failures in a row pause, however close together.
    let hb = heartbeat(60);
    const countOnly = { ...POLICY, pauseAfterSeconds: 0 };
    hb = run(hb, 0, 'x', countOnly).loop;
    hb = run(hb, 1000, 'x', countOnly).loop;
    expect(run(hb, 2000, 'x', countOnly).outcome).toEqual({
      kind: 'paused',
      reason: '3 failed ticks in a row; last error: x. /heartbeat resume continues',
    });
  });
});

describe('a fixed loop whose model is down for a while (worker, Redis, local model)', () => {
  const cleanups = cleanupAfterEach();

  it('backs off 1 s, 2 s, 4 s (the ticks due that far after the failed ones), rides out the outage, then keeps its 1 s cadence', async () => {
    const model = await startFakeOpenAI();
    let calls = 0;
    model.respond(() => (++calls <= 3 ? { status: 500, message: 'upstream exploded' } : 'all green'));
    cleanups.push(() => model.close());
    const { c } = await startWorkerStack(cleanups, {
      'agent.base_url': model.baseUrl,
      'agent.api_key': 'k',
      'loops.failure_backoff_seconds': 1,
      'loops.failure_backoff_max_seconds': 60,
      'loops.failure_pause_after_seconds': 60,
    });
    await c.schedules.set(
      'outage',
      'loop',
      { prompt: 'check the build', intervalSeconds: 1, times: null, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: { kind: 'agent' },
      },
    );
    const failed = await waitForEvents(c, 'outage', 'tick.failed', 3, 20_000);
    const replies = await waitForEvents(c, 'outage', 'reply', 3, 20_000);
    const ticks = [...failed.slice(0, 3), ...replies.slice(0, 3)].map((e) => e.data);
    // Each try is due its back-off after the failed tick ended (3 failures in a row, but not over 60 s: no pause):
    // never sooner, and later only by the re-arm (the commit, then a first job released `FIRST_RELEASE_MS` after
    // arming: scheduler/loop/prefetch-lead.ts), well under the next doubling.
    const gaps = ticks.slice(1, 4).map((t, i) => Number(t.dueAt) - Number(ticks[i]!.finishedAt));
    const backoffs = [1000, 2000, 4000];
    expect(
      gaps.map((g, i) => g >= backoffs[i]! && g < backoffs[i]! + 1000),
      `gaps ${gaps.join(', ')} ms`,
    ).toEqual([true, true, true]);
    // After the first success, the 1 s cadence: due 1 s apart again.
    expect(Number(ticks[5]!.dueAt) - Number(ticks[4]!.dueAt)).toBe(1000);
    await waitFor(async () => ((await c.loops.get('outage', 'loop'))?.failureStreak === 0 ? true : undefined), 5_000, 'streak reset');
    const after = (await c.loops.get('outage', 'loop'))!;
    expect(after).toMatchObject({ status: 'active', lastError: null, nextDueAt: null });
    expect(after.failingSince ?? null).toBeNull();
  }, 60_000);
});
