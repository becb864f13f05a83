/**
 * A Sentinel-managed primary (docs/DESIGN.md §2): one primary, one replica and one
 * sentinel started by this file. The primary is killed; the sentinel promotes
 * the replica and the fleet follows it, with no setting changed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisSentinel, sentinelEnv, type TestSentinel } from './support/redis-sentinel.ts';
import { clients, events, startWorker, waitFor, waitForEvents } from './support/stack.ts';

let sentinel: TestSentinel;
beforeAll(async () => {
  sentinel = await startRedisSentinel();
}, 60_000);
afterAll(async () => {
  await sentinel?.stop();
});

describe('Sentinel', () => {
  it('the primary is killed: the sentinel promotes the replica and the worker keeps firing the loop on it', async () => {
    const env = sentinelEnv(sentinel);
    const c = clients(env);
    const w = await startWorker(env);
    try {
      await c.schedules.set(
        'sentinel-loop',
        'loop',
        { prompt: 'report', intervalSeconds: 1, times: null, until: null, notes: [] },
        {
          origin: { surface: 'cli' },
          runner: { kind: 'command', command: 'echo "tick $HERMES_TICK"', timeoutSeconds: 10 },
        },
      );
      await waitForEvents(c, 'sentinel-loop', 'reply', 2);
      await sentinel.killPrimary();
      const promotedAt = Date.now();
      expect(await sentinel.currentPrimaryPort()).toBe(sentinel.replicaPort);
      // Ticks due after the failover run and commit on the new primary.
      await waitFor(
        async () => (await events(c, 'sentinel-loop', 'reply')).filter((e) => Number(e.data.dueAt) > promotedAt).length >= 2 || undefined,
        30_000,
        'two ticks after the failover',
      );
      expect((await c.loops.get('sentinel-loop', 'loop'))!.status).toBe('active');
    } finally {
      await w.drain();
      await c.close();
      env.cleanup();
    }
  }, 90_000);
});
