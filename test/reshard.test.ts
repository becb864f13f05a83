/**
 * `hermes admin reshard --to N`: moving a live store from one shard count to
 * another with the workers stopped, every schedule kept firing once per occurrence.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig, type HermesConfig } from '../scheduler/config/config.ts';
import { cronServiceFor } from '../scheduler/services.ts';
import { createLogger } from '../scheduler/logger.ts';
import { openRedisClient, topologyFromConfig } from '../scheduler/store/redis/connection-factory.ts';
import { reshard } from '../cli/reshard.ts';
import { Queue } from 'bullmq';
import { Keys, QUEUES } from '../scheduler/store/keys.ts';
import { enqueueInput, pendingInput } from '../scheduler/session/inbox.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { clients, events, runHermes, startWorker, waitFor } from './support/stack.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const cleanups = cleanupAfterEach();

/**
 * Loops moved in the first test. Sessions `rs-0` … `rs-11` fall on all four shards of the new layout
 * (4, 2, 2 and 4 of them: `shardOf` is a fixed hash of the id), so every shard receives sessions; each
 * loop runs a shell command per tick, so more loops only cost CPU (50 ran ~250 `sh` processes).
 */
const LOOPS = 12;
const cli = { origin: { surface: 'cli' as const }, trusted: true };

/** The config of `env` with another shard count (same Redis, same prefix). */
function withShards(env: TestEnv, shards: number): HermesConfig {
  return loadConfig({
    env: { HERMES_HOME: env.home },
    overrides: {
      'redis.url': env.redisUrl,
      'redis.prefix': env.prefix,
      log_level: 'silent',
      'loops.min_interval_seconds': 1,
      'worker.lock_duration_ms': 3000,
      'worker.stalled_interval_ms': 1000,
      'worker.defer_ms': 100,
      'redis.shards': shards,
    },
  });
}

/** Tick numbers of a session's replies, in order. */
async function ticksOf(c: ReturnType<typeof clients>, sessionId: string): Promise<number[]> {
  return (await events(c, sessionId, 'reply')).map((e) => Number(String(e.data.text).replace('tick ', '')));
}

describe('hermes admin reshard', () => {
  it(`moves ${LOOPS} active loops and a cron job from 1 to 4 shards, each shard receiving some; each loop keeps firing once per occurrence`, async () => {
    const env = testEnv();
    cleanups.push(() => env.cleanup());
    const c1 = clients(env);
    cleanups.push(() => c1.close());
    const sessions = Array.from({ length: LOOPS }, (_, i) => `rs-${i}`);
    const w1 = await startWorker(env);
    let w1Drained = false;
    cleanups.push(async () => {
      if (!w1Drained) await w1.drain();
    });
    for (const s of sessions) {
      await c1.schedules.set(
        s,
        'loop',
        { prompt: 'count', intervalSeconds: 1, times: null, until: null, notes: [] },
        {
          origin: { surface: 'cli' },
          runner: { kind: 'command', command: 'echo "tick $HERMES_TICK"', timeoutSeconds: 10 },
        },
      );
    }
    const cron = cronServiceFor(env.config, c1, createLogger({ level: 'silent' }));
    const job = await cron.add({ schedule: '0 0 1 1 *', prompt: 'new year report' }, cli);
    for (const s of sessions) await waitFor(async () => ((await ticksOf(c1, s)).length >= 2 ? true : undefined), 30_000, `2 ticks of ${s}`);

    // A live worker is refused, and nothing is written.
    const redis = openRedisClient(topologyFromConfig(env.config), 'commands');
    const queueConn = openRedisClient(topologyFromConfig(env.config), 'bullmq');
    cleanups.push(() => {
      redis.disconnect();
      queueConn.disconnect();
    });
    await expect(reshard(redis, queueConn, env.config, 4)).rejects.toThrow(/Stop every worker before resharding: 1 worker/);
    expect(await redis.get(c1.keys.reshardTarget)).toBeNull();

    await w1.drain();
    w1Drained = true;
    const before = new Map<string, { ticks: number[]; transcript: unknown[] }>();
    for (const s of sessions) before.set(s, { ticks: await ticksOf(c1, s), transcript: await c1.sessions.transcript(s) });

    const report = await reshard(redis, queueConn, env.config, 4);
    expect(report).toMatchObject({ from: 1, to: 4, sessionsMoved: LOOPS, cronJobsMoved: 1 });
    expect(report.schedulesVerified).toBe(LOOPS + 1);
    expect(await redis.get(c1.keys.shardCountMarker)).toBe('4');
    // Nothing is left under the one-shard layout: no index, no job scheduler.
    for (const k of c1.keys.unshardedIndexes) expect(await redis.exists(k)).toBe(0);
    expect(await c1.queues.ticks.getJobSchedulers(0, -1)).toEqual([]);
    // Running it again is a no-op.
    expect(await reshard(redis, queueConn, env.config, 4)).toMatchObject({ sessionsMoved: 0, cronJobsMoved: 0 });

    // A process with the old count is refused; one with the new count starts.
    const old = await runHermes(env, ['status']);
    expect(old.code).toBe(2);
    expect(old.stderr).toMatch(/written with 4 shard\(s\), not 1/);

    const config4 = withShards(env, 4);
    const c4 = clients(env, config4);
    cleanups.push(() => c4.close());
    const used = new Set(sessions.map((s) => c4.keys.shardOfSession(s)));
    expect(used.size).toBe(4);
    for (const s of sessions) {
      expect(await c4.sessions.transcript(s)).toEqual(before.get(s)!.transcript);
      expect(await ticksOf(c4, s)).toEqual(before.get(s)!.ticks);
    }
    const w4 = await startWorker(env, { config: config4 });
    cleanups.push(() => w4.drain());
    for (const s of sessions) {
      const n = before.get(s)!.ticks.length;
      await waitFor(async () => ((await ticksOf(c4, s)).length >= n + 3 ? true : undefined), 30_000, `3 more ticks of ${s}`);
    }
    await w4.drain();
    for (const s of sessions) {
      const ticks = await ticksOf(c4, s);
      // Once per occurrence: tick numbers 1, 2, 3, … with none repeated and none skipped.
      expect(ticks).toEqual(ticks.map((_, i) => i + 1));
      const dues = (await events(c4, s, 'reply')).map((e) => Number(e.data.dueAt));
      for (let i = 1; i < dues.length; i++) expect(dues[i]! - dues[i - 1]!).toBeGreaterThanOrEqual(1000);
      const transcript = await c4.sessions.transcript(s);
      expect(transcript.slice(0, before.get(s)!.transcript.length)).toEqual(before.get(s)!.transcript);
    }
    // The cron job is still scheduled, once, on its new shard.
    const cron4 = cronServiceFor(config4, c4, createLogger({ level: 'silent' }));
    expect((await cron4.list()).map((j) => j.id)).toEqual([job.id]);
    const ticks4 = c4.queues.forCronJob(job.id).ticks;
    const cronSchedulers = (await Promise.all(c4.queues.shards().map((q) => q.ticks.getJobSchedulers(0, -1))))
      .flat()
      .filter((s) => s.key.startsWith('cron:'));
    expect(cronSchedulers.map((s) => s.key)).toEqual([c4.keys.cronSchedulerId(job.id)]);
    expect((await ticks4.getJobSchedulers(0, -1)).map((s) => s.key)).toContain(c4.keys.cronSchedulerId(job.id));
  }, 180_000);

  it('finishes an interrupted reshard when run again, and nothing starts while one is under way', async () => {
    const env = testEnv();
    cleanups.push(() => env.cleanup());
    const c1 = clients(env);
    cleanups.push(() => c1.close());
    for (const s of ['a', 'b', 'c', 'd', 'e', 'f']) {
      await c1.schedules.set(
        s,
        'loop',
        { prompt: 'count', intervalSeconds: 60, times: null, until: null, notes: [] },
        {
          origin: { surface: 'cli' },
          runner: { kind: 'command', command: 'echo hi', timeoutSeconds: 10 },
        },
      );
    }
    // Pending input of a session with a loop and of one without, waiting for a worker.
    const inputIds: Record<string, string> = {};
    for (const s of ['b', 'm']) {
      inputIds[s] = await enqueueInput(
        { ...c1, maxChars: 10_000 },
        { sessionId: s, text: `hello ${s}`, messageId: `msg-${s}`, origin: { surface: 'cli' } },
      );
    }
    const redis = openRedisClient(topologyFromConfig(env.config), 'commands');
    const queueConn = openRedisClient(topologyFromConfig(env.config), 'bullmq');
    cleanups.push(() => {
      redis.disconnect();
      queueConn.disconnect();
    });
    await redis.set(c1.keys.shardCountMarker, '1');
    // Interrupted after its first session: the marker is set and session `a` is copied but not yet removed.
    const keys3 = new Keys(env.prefix, { shards: 3 });
    await redis.set(c1.keys.reshardTarget, '3');
    const a = c1.keys.sessionKeys('a');
    const a3 = keys3.sessionKeys('a');
    for (let i = 0; i < a.length; i++) {
      const d = await redis.dumpBuffer(a[i]!);
      if (d) await redis.restore(a3[i]!, 0, d, 'REPLACE');
    }
    // While it is under way, every process refuses to start, with either count.
    const refused = await Promise.all(['1', '3'].map((shards) => runHermes(env, ['status'], { HERMES_REDIS_SHARDS: shards })));
    for (const r of refused) {
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/being moved to 3 shard\(s\).*hermes admin reshard --to 3/);
    }
    // Another target is refused until this one is finished.
    await expect(reshard(redis, queueConn, env.config, 2)).rejects.toThrow(/interrupted; finish it first: hermes admin reshard --to 3/);
    const reshardStartedAt = Date.now();
    const done = await runHermes(env, ['admin', 'reshard', '--to', '3']);
    expect(done.stderr).toBe('');
    expect(done.code).toBe(0);
    expect(done.stdout).toMatch(/Resharded 1 → 3 shard\(s\)/);
    expect(await redis.get(c1.keys.reshardTarget)).toBeNull();
    const c3 = clients(env, withShards(env, 3));
    cleanups.push(() => c3.close());
    const records = await c3.loops.list();
    expect(records.map((r) => r.sessionId).sort()).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    // Re-armed on the new shard: a loop that never ticked is due again from the reshard on (its first
    // tick was due already, so "now" at the re-arm; a loaded machine may have passed that by now).
    for (const r of records) expect(await c3.loops.nextDueAt(r)).toBeGreaterThanOrEqual(reshardStartedAt);
    const schedulers = (await Promise.all(c3.queues.shards().map((q) => q.ticks.getJobSchedulers(0, -1)))).flat();
    expect(schedulers.length).toBe(6);
    // The pending input moved with its session: the inbox job (same id, same priority) and the pending mark.
    for (const s of ['b', 'm']) {
      const moved = await c3.queues.forSession(s).inbox.getJob(inputIds[s]!);
      expect(moved?.data).toMatchObject({ sessionId: s, text: `hello ${s}` });
      expect(moved?.opts.priority).toBeGreaterThan(0);
      expect(await pendingInput(c3.redis, c3.keys, s)).toHaveLength(1);
      expect(await c1.queues.inbox.getJob(inputIds[s]!)).toBeUndefined();
    }
  }, 60_000);

  it('refuses while shard 0 changes prefix and its outbound queue holds replies; not when shard 0 stays', async () => {
    const env = testEnv();
    cleanups.push(() => env.cleanup());
    const redis = openRedisClient(topologyFromConfig(env.config), 'commands');
    const queueConn = openRedisClient(topologyFromConfig(env.config), 'bullmq');
    cleanups.push(() => {
      redis.disconnect();
      queueConn.disconnect();
    });
    const keys = new Keys(env.prefix);
    const outbound1 = new Queue(QUEUES.outboundTelegram, { connection: queueConn, prefix: keys.bullPrefix });
    cleanups.push(() => outbound1.close());
    const reply = await outbound1.add('reply', { text: 'waiting to be sent' }, { delay: 60_000 });
    // 1 → 2 moves shard 0 from {p} to {p:0}: refused, nothing written.
    await expect(reshard(redis, queueConn, env.config, 2)).rejects.toThrow(/outbound-telegram queue still holds 1 job/);
    expect(await redis.get(keys.reshardTarget)).toBeNull();
    expect(await redis.get(keys.shardCountMarker)).toBeNull();
    await reply.remove();
    expect(await reshard(redis, queueConn, env.config, 2)).toMatchObject({ from: 1, to: 2 });
    // 2 → 3 keeps shard 0's prefix: its queues stay where they are, pending or not.
    const outbound2 = new Queue(QUEUES.outboundTelegram, { connection: queueConn, prefix: new Keys(env.prefix, { shards: 2 }).bullPrefix });
    cleanups.push(() => outbound2.close());
    await outbound2.add('reply', { text: 'waiting to be sent' }, { delay: 60_000 });
    expect(await reshard(redis, queueConn, env.config, 3)).toMatchObject({ from: 2, to: 3 });
    expect(await redis.get(keys.shardCountMarker)).toBe('3');
  }, 60_000);
});
