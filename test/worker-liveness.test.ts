/**
 * One definition of "a worker is alive" (`scheduler/worker-liveness.ts`):
 * `hermes status`, `hermes cron status`, the workers-alive gauge and
 * housekeeping all count the same workers at the same instant, and the
 * boundary is exactly three missed heartbeats.
 */
import { describe, expect, it } from 'vitest';
import { checkWorkerSet } from '../worker/runtime/housekeeping.ts';
import { fleetReadings } from '../scheduler/metrics.ts';
import { aliveWorkerIds, countAliveWorkers, WORKER_ALIVE_MS, WORKER_HEARTBEAT_MS } from '../scheduler/worker-liveness.ts';
import { openCronService } from './support/cron-worker.ts';
import { testEnv } from './support/env.ts';
import { memoryLogger } from './support/telegram-env.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const cleanups = cleanupAfterEach();

describe('worker liveness', () => {
  it('alive means a heartbeat younger than three beats, and every reader agrees', async () => {
    expect(WORKER_ALIVE_MS).toBe(3 * WORKER_HEARTBEAT_MS);
    const now = 1_800_000_000_000;
    const env = testEnv();
    const api = openCronService(env.config, () => now);
    cleanups.push(
      () => env.cleanup(),
      () => api.close(),
    );
    const key = api.keys.workers;
    await api.redis.zadd(key, now - WORKER_ALIVE_MS, 'at-the-edge', now - WORKER_ALIVE_MS - 1, 'one-ms-late', now - 10, 'fresh');

    expect(await countAliveWorkers(api.redis, key, now)).toBe(2);
    expect((await aliveWorkerIds(api.redis, key, now)).sort()).toEqual(['at-the-edge', 'fresh']);
    expect((await api.service.status()).workersAlive).toBe(2);
    expect(await fleetReadings({ redis: api.redis, workersKey: key, queues: [], now: () => now }).workersAlive()).toBe(2);
    const { log } = memoryLogger();
    expect(await checkWorkerSet({ redis: api.redis, workersKey: key, log, now: () => now }, 3600)).toEqual({ removed: 0, alive: 2 });
  });
});
