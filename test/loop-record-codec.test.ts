/**
 * The stored form of loop records and tick jobs (docs/BENCHMARKS.md, scale):
 * compact records that read back as the record they were written from, records
 * and jobs written by the previous version still read and tick, and a loop's
 * job scheduler hash keeps Redis's listpack encoding whatever its session id.
 */
import { describe, expect, it } from 'vitest';
import type { Job } from 'bullmq';
import { configDefaults } from '../scheduler/config/config.ts';
import { decodeLoopRecord, encodeLoopRecord } from '../scheduler/loop/loop-record-codec.ts';
import { applyTick, pauseLoop, resumeLoop, type LoopRecord, type NewLoop } from '../scheduler/loop/loop-state.ts';
import { TICK_JOB_NAME, tickJobData, type StoredTickJobData } from '../scheduler/loop/tick-job.ts';
import { JOB_RETENTION } from '../scheduler/store/queues.ts';
import { openTestClients, startWorker, waitForEvents } from './support/stack.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { loopFixture } from './support/record-fixtures.ts';

const cleanups = cleanupAfterEach();

const NOW = 1_800_000_000_000;
const PACING = { floorSeconds: 60, ceilingSeconds: 3600 };

/** A loop as a real one is stored: an id and a session id of their real length, a prompt of words, hourly, at most 100 ticks. */
function loop(overrides: Partial<NewLoop> = {}): LoopRecord {
  return {
    ...loopFixture({
      loopId: 'a1b2c3d4e5f6',
      sessionId: 'telegram:-1001234567890:42',
      prompt: 'check the deploy',
      intervalSeconds: 3600,
      maxTicks: 100,
      now: NOW,
      ...overrides,
    }),
    version: 1,
  };
}

function roundTrip(r: LoopRecord): LoopRecord {
  return decodeLoopRecord(encodeLoopRecord(r), { sessionId: r.sessionId, kind: r.kind });
}

describe('loop record codec', () => {
  it('stores a new loop without the fields its key names and without fields at their default', () => {
    const stored = JSON.parse(encodeLoopRecord(loop())) as Record<string, unknown>;
    expect(stored).toEqual({
      loopId: 'a1b2c3d4e5f6',
      prompt: 'check the deploy',
      intervalSeconds: 3600,
      maxTicks: 100,
      createdAt: NOW,
      version: 1,
    });
    expect(roundTrip(loop())).toEqual(loop());
    // Written once it differs from its default: a later change, another surface, a paused self-paced loop.
    const changed = { ...pauseLoop(loop({ intervalSeconds: null, origin: { surface: 'api' } }), NOW + 5) };
    expect(JSON.parse(encodeLoopRecord(changed))).toMatchObject({
      mode: 'self-paced',
      status: 'paused',
      origin: { surface: 'api' },
      updatedAt: NOW + 5,
    });
    expect(roundTrip(changed)).toEqual(changed);
  });

  it('reads back every state a record goes through as the record it was written from', () => {
    const tick = (r: LoopRecord, n: number, extra: { failure?: string; reply?: string } = {}) =>
      applyTick(r, {
        loopId: r.loopId,
        dueAt: NOW + n * 1000,
        occurrenceId: `occ-${n}`,
        startedAt: NOW + n * 1000 + 5,
        finishedAt: NOW + n * 1000 + 50,
        reply: extra.reply ?? `reply ${n}`,
        failure: extra.failure,
        pacing: PACING,
        maxConsecutiveFailures: configDefaults().loops.max_consecutive_failures,
      }).loop;
    const fixed = loop({
      times: 5,
      until: 'the deploy is green',
      runner: { kind: 'command', command: 'echo hi', timeoutSeconds: 10, name: 'probe' },
    });
    const ticked = tick(tick(fixed, 1), 2, { failure: 'model timed out' });
    const selfPaced = loop({
      intervalSeconds: null,
      origin: { surface: 'telegram', route: { platform: 'telegram', chatId: '-100123', threadId: '42' } },
    });
    const heartbeat = loop({ kind: 'heartbeat', maxTicks: 0 });
    const states = [
      fixed,
      ticked,
      pauseLoop(ticked, NOW + 9000),
      resumeLoop(pauseLoop(ticked, NOW + 9000), NOW + 10_000),
      selfPaced,
      tick(selfPaced, 1),
      heartbeat,
      tick(heartbeat, 3),
    ];
    for (const r of states) expect(roundTrip(r)).toEqual(r);
    // Values that equal a default only by accident are written: a 0 due time is not "no due time".
    expect(roundTrip({ ...selfPaced, nextDueAt: 0 }).nextDueAt).toBe(0);
  });

  it('reads a record in the full form earlier versions wrote (every field, nulls included) as the same record', () => {
    for (const r of [loop(), loop({ intervalSeconds: null, kind: 'heartbeat' }), pauseLoop(loop(), NOW + 1)]) {
      expect(decodeLoopRecord(JSON.stringify(r), { sessionId: r.sessionId, kind: r.kind })).toEqual(r);
    }
    // Written before the failure streak existed: the streak reads as 0 and the last error as none.
    const { failureStreak: _f, lastError: _e, ...older } = loop();
    expect(decodeLoopRecord(JSON.stringify(older), { sessionId: older.sessionId, kind: older.kind })).toEqual(loop());
  });
});

describe('stored loops in Redis', () => {
  it('a worker ticks a loop stored by the previous version (full record, job data with type and session) and stores it compact', async () => {
    const { env, c } = openTestClients(cleanups);
    const sessionId = 'telegram:-1001234567890:7';
    const record = {
      ...loop({ sessionId, runner: { kind: 'command', command: 'echo "old record ticked"', timeoutSeconds: 10 } }),
      createdAt: Date.now(),
    };
    // Exactly what the previous version wrote: the record as JSON, and a job scheduler whose template holds
    // `type` and `sessionId` and the queue's retention options.
    await c.redis.set(c.keys.schedule(sessionId, 'loop'), JSON.stringify(record));
    await c.redis.sadd(c.keys.forSession(sessionId).scheduleIndex, c.keys.scheduleIndexMember(sessionId, 'loop'));
    await c.queues
      .forSession(sessionId)
      .ticks.upsertJobScheduler(
        c.keys.loopSchedulerId(sessionId, 'loop'),
        { every: 3_600_000, startDate: Date.now() },
        { name: TICK_JOB_NAME, data: { type: 'schedule-tick', kind: 'loop', sessionId, loopId: record.loopId }, opts: JOB_RETENTION },
      );
    const w = await startWorker(env);
    cleanups.push(() => w.drain());
    const [reply] = await waitForEvents(c, sessionId, 'reply', 1, 20_000);
    expect(reply!.data.text).toContain('old record ticked');
    expect(reply!.data.tick).toBe(1);
    const raw = JSON.parse((await c.redis.get(c.keys.schedule(sessionId, 'loop')))!) as Record<string, unknown>;
    expect(raw).not.toHaveProperty('sessionId');
    expect(raw).not.toHaveProperty('lastError');
    expect(raw).toMatchObject({ loopId: record.loopId, ticksUsed: 1, version: 2 });
    expect(await c.loops.get(sessionId, 'loop')).toMatchObject({
      sessionId,
      kind: 'loop',
      ticksUsed: 1,
      lastError: null,
      judgeFailures: 0,
      version: 2,
    });
  }, 40_000);

  it("keeps a loop's job scheduler hash listpack-encoded for a 128-character session id, and its jobs name the session", async () => {
    const { c } = openTestClients(cleanups);
    const sessionId = `telegram:-1001234567890:${'9'.repeat(128 - 24)}`;
    expect(sessionId).toHaveLength(128);
    const stored = (await c.loops.put(loop({ sessionId, kind: 'heartbeat' }), 'absent'))!;
    await c.loops.arm(stored, Date.now() + 3_600_000);
    const ticks = c.queues.forSession(sessionId).ticks;
    const schedulerKey = ticks.toKey(`repeat:${c.keys.loopSchedulerId(sessionId, 'heartbeat')}`);
    expect(await c.redis.object('ENCODING', schedulerKey)).toBe('listpack');
    expect(JSON.parse((await c.redis.hget(schedulerKey, 'data'))!)).toEqual({ loopId: stored.loopId });
    expect(await c.redis.hget(schedulerKey, 'opts')).toBeNull();
    const [job] = (await ticks.getJobs(['delayed'])) as Array<Job<StoredTickJobData>>;
    expect(job!.data).toEqual({ loopId: stored.loopId });
    expect(tickJobData(job!)).toEqual({ kind: 'heartbeat', loopId: stored.loopId, sessionId });
    // A job of an earlier version's scheduler holds its kind as well.
    expect(tickJobData({ ...job!, data: { kind: 'heartbeat', loopId: stored.loopId } })).toEqual(tickJobData(job!));
    // Without `repeatJobKey`, the job id names the scheduler too.
    expect(tickJobData({ data: job!.data, id: job!.id, repeatJobKey: undefined }).sessionId).toBe(sessionId);
    expect(() => tickJobData({ data: job!.data, id: 'other', repeatJobKey: undefined })).toThrow(/names no session/);
  });

  it('a self-paced tick job keeps its session in its data', async () => {
    const { c } = openTestClients(cleanups);
    const stored = (await c.loops.put(loop({ sessionId: 'sp-1', intervalSeconds: null }), 'absent'))!;
    await c.loops.arm(stored, Date.now() + 3_600_000);
    const [job] = (await c.queues.forSession('sp-1').ticks.getJobs(['delayed'])) as Array<Job<StoredTickJobData>>;
    expect(job!.data).toEqual({ kind: 'loop', loopId: stored.loopId, sessionId: 'sp-1' });
    expect(job!.opts.removeOnComplete).toBeUndefined();
  });
});
