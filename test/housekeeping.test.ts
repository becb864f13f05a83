/**
 * Housekeeping (croner timers): each process checks the worker liveness set on an
 * operator-settable cron expression, forgets workers whose heartbeat stopped
 * long ago, and warns while none is alive.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../scheduler/config/config.ts';
import { ConfigError } from '../scheduler/errors/config-error.ts';
import { checkWorkerSet } from '../worker/runtime/housekeeping.ts';
import { Keys } from '../scheduler/store/keys.ts';
import { testEnv } from './support/env.ts';
import { memoryLogger } from './support/telegram-env.ts';
import { startWorker, waitFor } from './support/stack.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const cleanups = cleanupAfterEach();

describe('worker set housekeeping', () => {
  it('forgets entries older than worker_forget_seconds, keeps the others, and warns while no worker is alive', async () => {
    const env = testEnv();
    cleanups.push(() => env.cleanup());
    const redis = new Redis(env.redisUrl);
    cleanups.push(() => redis.disconnect());
    const key = new Keys(env.prefix).workers;
    const now = 1_800_000_000_000;
    await redis.zadd(key, now - 2 * 3600_000, 'dead-long-ago', now - 60_000, 'dead-recently');
    const { log, lines } = memoryLogger();
    expect(await checkWorkerSet({ redis, workersKey: key, log, now: () => now }, 3600)).toEqual({ removed: 1, alive: 0 });
    expect(await redis.zrange(key, 0, -1)).toEqual(['dead-recently']);
    expect(lines.some((l) => l.level === 40 && /no worker is alive/.test(String(l.msg)))).toBe(true);

    await redis.zadd(key, now - 1000, 'alive');
    lines.length = 0;
    expect(await checkWorkerSet({ redis, workersKey: key, log, now: () => now }, 3600)).toEqual({ removed: 0, alive: 1 });
    expect(lines.some((l) => /no worker is alive/.test(String(l.msg)))).toBe(false);
  });

  it('runs in every worker process on housekeeping.workers_cron', async () => {
    const env = testEnv({ 'housekeeping.workers_cron': '* * * * * *', 'housekeeping.worker_forget_seconds': 60 });
    cleanups.push(() => env.cleanup());
    const redis = new Redis(env.redisUrl);
    cleanups.push(() => redis.disconnect());
    const key = new Keys(env.prefix).workers;
    await redis.zadd(key, Date.now() - 3600_000, 'killed-worker');
    const w = await startWorker(env);
    cleanups.push(() => w.drain());
    await waitFor(async () => (await redis.zscore(key, 'killed-worker')) === null, 10_000, 'the dead worker forgotten');
    expect(await redis.zscore(key, w.deps.workerId)).not.toBeNull();
  });

  it('a bad expression stops the process with a message naming the key', () => {
    const load = () =>
      loadConfig({ env: { HERMES_HOME: '/nonexistent-hermes-home', HERMES_HOUSEKEEPING_WORKERS_CRON: 'every five minutes' } });
    expect(load).toThrow(ConfigError);
    expect(load).toThrow(/housekeeping\.workers_cron|HERMES_HOUSEKEEPING_WORKERS_CRON/);
  });
});
