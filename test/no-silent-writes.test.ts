/**
 * No silent writes (docs/DESIGN.md §6): a state change is confirmed by Redis before the
 * reply claims it. A read-only replica or a stopped server gives the user an
 * error and a WARNING in the log, never a confirmation, and changes nothing.
 */
import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { Keys } from '../scheduler/store/keys.ts';
import { openQueues } from '../scheduler/services.ts';
import { LoopStore } from '../scheduler/loop/loop-store.ts';
import { configDefaults } from '../scheduler/config/config.ts';
import { LoopService } from '../scheduler/loop/loop-service.ts';
import { GoalService } from '../scheduler/goal/goal-service.ts';
import { StoreUnavailableError } from '../scheduler/errors/store-unavailable-error.ts';
import { startEmbeddedRedis } from '../scheduler/store/redis/embedded-redis.ts';
import { testEnv } from './support/env.ts';
import { clients } from './support/stack.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { captureLog } from './support/log-capture.ts';
import { refusedPort } from './support/refused-port.ts';

const cleanups = cleanupAfterEach();

function services(url: string, prefix: string, log: Logger, options: { offline?: boolean } = {}) {
  const opts = options.offline
    ? { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true }
    : { maxRetriesPerRequest: 1 };
  const redis = new Redis(url, opts);
  const bull = new Redis(url, { ...opts, maxRetriesPerRequest: null });
  redis.on('error', () => {});
  bull.on('error', () => {});
  const keys = new Keys(prefix);
  const queues = openQueues(keys, bull);
  cleanups.push(async () => {
    await queues.close().catch(() => {});
    redis.disconnect();
    bull.disconnect();
  });
  return {
    schedules: new LoopService(
      new LoopStore(redis, keys, queues, 200, configDefaults().worker.events_max_entries),
      { maxTicks: 100, selfPacedFloorSeconds: 60 },
      log,
    ),
    goals: new GoalService(redis, keys, queues, 20, log),
  };
}

describe('a write Redis does not take is never confirmed', () => {
  it('read-only replica: /goal and /loop answer with an error, log a WARNING, and nothing is stored', async () => {
    const env = testEnv();
    const primary = clients(env);
    cleanups.push(
      () => env.cleanup(),
      () => primary.close(),
    );
    const dir = mkdtempSync(join(tmpdir(), 'hermes-replica-'));
    const replica = await startEmbeddedRedis({ dir, appendonly: false });
    cleanups.push(async () => {
      await replica.stop();
      rmSync(dir, { recursive: true, force: true });
    });
    const r = new Redis(replica.url);
    const [host, port] = env.redisUrl.replace('redis://', '').split(':');
    await r.replicaof(host!, Number(port));
    r.disconnect();
    const { log, warnings } = captureLog();
    const s = services(replica.url, env.prefix, log);

    const goal = await s.goals.set('ro', 'ship it', { surface: 'chat' }).catch((e: unknown) => e);
    expect(goal).toBeInstanceOf(StoreUnavailableError);
    expect((goal as Error).message).toMatch(/^The goal was not saved: Redis refused the write \(.*READONLY.*\)\. Nothing changed\.$/);
    expect(warnings().some((l) => l.includes('goal write not confirmed by Redis'))).toBe(true);

    const loop = await s.schedules
      .set(
        'ro',
        'loop',
        { prompt: 'p', intervalSeconds: 60, times: null, until: null, notes: [] },
        { origin: { surface: 'chat' }, runner: { kind: 'agent' } },
      )
      .catch((e: unknown) => e);
    expect(loop).toBeInstanceOf(StoreUnavailableError);
    expect(String((loop as Error).message)).not.toMatch(/Loop set/);
    expect(warnings().some((l) => l.includes('loop write not confirmed by Redis'))).toBe(true);

    expect(await primary.redis.get(primary.keys.goal('ro'))).toBeNull();
    expect(await primary.loops.get('ro', 'loop')).toBeNull();
  });

  it('stopped server: the user gets an error, not a confirmation', async () => {
    const env = testEnv();
    cleanups.push(() => env.cleanup());
    const port = await refusedPort();
    const { log, warnings } = captureLog();
    const s = services(`redis://127.0.0.1:${port}`, env.prefix, log, { offline: true });
    const goal = await s.goals.set('down', 'ship it', { surface: 'chat' }).catch((e: unknown) => e);
    expect(goal).toBeInstanceOf(StoreUnavailableError);
    expect((goal as Error).message).toMatch(/The goal was not saved/);
    const pause = await s.schedules.pause('down', 'loop').catch((e: unknown) => e);
    expect(pause).toBeInstanceOf(StoreUnavailableError);
    expect(warnings().length).toBeGreaterThanOrEqual(2);
  });
});
