/**
 * The once-per-occurrence record is bounded per session and per cron job: one
 * small structure each, trimmed to `worker.occurrence_window_seconds`, never a
 * key per tick — while a retried occurrence is still refused.
 */
import { describe } from 'vitest';
import type { RedisClient } from '../scheduler/store/redis/connection-factory.ts';
import { Keys } from '../scheduler/store/keys.ts';
import { SessionStore } from '../scheduler/session/session-store.ts';
import { sessionStoreFor } from '../scheduler/services.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { redisTestEnv } from './support/redis-env.ts';
import { startWorkerStack, waitFor, waitForEvents } from './support/stack.ts';
import { openCronService, startCronWorker } from './support/cron-worker.ts';
import { it } from './support/cleanup.ts';

/** The product's own keys (BullMQ's queue keys left out: their retention is BullMQ's). */
async function productKeys(redis: RedisClient, env: TestEnv): Promise<string[]> {
  const all = await redis.keys(`${env.prefix}:*`);
  const queues = ['ticks', 'inbox', 'v1-runs', 'outbound-telegram'].map((q) => `${env.prefix}:${q}:`);
  return all.filter((k) => !queues.some((q) => k.startsWith(q))).sort();
}

describe.concurrent('occurrence records stay bounded', () => {
  it('N ticks of one loop leave the same keys as two ticks: one committed set for the session, no key per tick', async ({
    cleanups,
    expect,
  }) => {
    const { env, c } = await startWorkerStack(cleanups);
    await c.schedules.set(
      'bounded',
      'loop',
      { prompt: 'p', intervalSeconds: 1, times: 4, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: { kind: 'command', command: 'echo "tick $HERMES_TICK"', timeoutSeconds: 5 },
      },
    );
    await waitForEvents(c, 'bounded', 'reply', 2);
    const transient = (k: string) => k.endsWith(':turn-lock') || k.endsWith(':inflight') || k.endsWith(':mutation');
    const afterTwo = (await productKeys(c.redis, env)).filter((k) => !transient(k));
    await waitFor(
      async () => ((await c.loops.get('bounded', 'loop'))?.status === 'finished' ? true : undefined),
      30_000,
      'the loop to finish',
    );
    const afterFour = await productKeys(c.redis, env);
    expect(afterFour).toEqual(afterTwo);
    expect(afterFour.filter((k) => k.includes(':occurrence'))).toEqual([]);
    expect(await c.redis.zcard(c.keys.sessionCommitted('bounded'))).toBe(4);
  });

  it('N runs of one cron job leave one committed set and no claims behind', async ({ cleanups, expect }) => {
    const env = testEnv({ 'cron.min_interval_seconds': 1 });
    const cli = openCronService(env.config);
    const worker = await startCronWorker(env.config);
    cleanups.push(
      () => env.cleanup(),
      () => cli.close(),
      () => worker.close(),
    );
    const job = await cli.service.add(
      { schedule: 'every 1h', script: 'echo ran', name: 'bounded', paused: true },
      { origin: { surface: 'cli' }, trusted: true },
    );
    const before = await productKeys(cli.redis, env);
    for (let i = 1; i <= 5; i++) {
      await cli.service.runNow(job.id, { origin: { surface: 'cli' }, trusted: true });
      await waitFor(async () => ((await cli.store.runs(job.id, 10)).length >= i ? true : undefined), 15_000, `run ${i}`);
    }
    const after = await productKeys(cli.redis, env);
    const added = after.filter((k) => !before.includes(k));
    const keys = new Keys(env.prefix);
    expect(added.filter((k) => k !== keys.cronCommitted(job.id))).toEqual(
      [keys.cronRuns(job.id), keys.cronRunIndex(job.id), keys.cronRecentRuns, keys.events(`cron:${job.id}`)]
        .filter((k) => !before.includes(k))
        .sort(),
    );
    expect(await cli.redis.zcard(keys.cronCommitted(job.id))).toBe(5);
    expect(await cli.redis.exists(keys.cronClaims(job.id))).toBe(0);
  });

  it("a session's history is bounded: worker.events_max_entries caps its event stream, worker.transcript_max_messages its transcript", async ({
    cleanups,
    expect,
  }) => {
    const { env, redis, keys } = redisTestEnv(cleanups, { 'worker.events_max_entries': 50, 'worker.transcript_max_messages': 20 });
    const capped = sessionStoreFor(env.config, redis, keys);
    const defaults = testEnv();
    cleanups.push(() => defaults.cleanup());
    const uncapped = sessionStoreFor(defaults.config, redis, keys);
    const turn = (occurrenceId: string) => ({
      occurrenceId,
      messages: [
        { role: 'user' as const, content: 'q', at: 0, source: 'tick' },
        { role: 'assistant' as const, content: 'a', at: 0, source: 'tick' },
      ],
      event: { type: 'reply', data: { occurrenceId } },
    });
    for (let i = 0; i < 300; i++) {
      await capped.commitTurn('capped', turn(`o${i}`));
      await capped.appendEvent('capped', 'notice', { i });
      await uncapped.commitTurn('uncapped', turn(`o${i}`));
    }
    // XADD MAXLEN ~ trims whole stream nodes (100 entries each by Redis's default): at most the cap plus one node
    expect(await redis.xlen(keys.events('capped'))).toBeGreaterThanOrEqual(50);
    expect(await redis.xlen(keys.events('capped'))).toBeLessThanOrEqual(150);
    expect(await redis.llen(keys.transcript('capped'))).toBe(20);
    // the default (10,000 entries, 200 messages) keeps all 300 events here
    expect(await redis.xlen(keys.events('uncapped'))).toBe(300);
    expect(await redis.llen(keys.transcript('uncapped'))).toBe(200);
  });

  it('the committed set forgets occurrences older than the window, and refuses a repeat within it', async ({ cleanups, expect }) => {
    const { env, redis, keys } = redisTestEnv(cleanups);
    // Long enough that the repeat below lands inside it on a loaded machine (300 ms did not always).
    const windowMs = 2_000;
    const store = new SessionStore(redis, keys, env.config.worker.transcript_max_messages, windowMs, env.config.worker.events_max_entries);
    const turn = (occurrenceId: string) => ({ occurrenceId, messages: [], event: { type: 'notice', data: { occurrenceId } } });
    expect((await store.commitTurn('w', turn('o1'))).status).toBe('committed');
    expect((await store.commitTurn('w', turn('o1'))).status).toBe('duplicate');
    expect(await redis.pttl(keys.sessionCommitted('w'))).toBeGreaterThan(0);
    const committedAt = Date.now();
    await waitFor(() => (Date.now() - committedAt > windowMs + 50 ? true : undefined), 5_000, 'the window to pass');
    expect((await store.commitTurn('w', turn('o2'))).status).toBe('committed');
    expect(await redis.zrange(keys.sessionCommitted('w'), 0, -1)).toEqual(['o2']);
  });
});
