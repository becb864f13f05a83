/**
 * A job whose lock lapsed and that the stall check hands back to the same
 * worker process while that process's earlier copy still runs: the new copy's
 * lock stays renewed through its turn (worker/worker-process.ts, `admit`).
 * BullMQ's lock manager keeps one entry per job id; the new copy's fetch
 * overwrites the earlier copy's entry, and the earlier copy's end removes the
 * entry for that id — the new copy's. Real Redis, real BullMQ (its own
 * stall-check script, run by a second BullMQ worker), a real gateway and
 * worker process, a local model server.
 */
import { Redis } from 'ioredis';
import { Worker } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { startGateway } from '../gateway/gateway-process.ts';
import { Keys, QUEUES } from '../scheduler/store/keys.ts';
import { createLogger } from '../scheduler/logger.ts';
import { RunStore, v1RunsQueue } from '../scheduler/v1/v1-runs.ts';
import { testEnv } from './support/env.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { readJson, waitFor } from './support/http.ts';
import { waitForRunStatus } from './support/wait-for.ts';
import { startWorker } from './support/stack.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const KEY = 'lock-handback-key';
const LOCK_MS = 2000;
const cleanups = cleanupAfterEach();

/**
 * When the job's lock was set or renewed less than 100 ms ago (the next renewal is at least
 * `lock_renew_ms / 2` away, so the worker cannot notice the loss first): delete the lock, mark the
 * job stalled and clear the stall check's throttle, in one step. Returns 1 when done.
 */
const LAPSE_LOCK = `
local ttl = redis.call('PTTL', KEYS[1])
if ttl < tonumber(ARGV[2]) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[3])
redis.call('SADD', KEYS[2], ARGV[1])
return 1
`;

describe('a job handed back by the stall check to the worker that lost its lock', () => {
  it('the new copy keeps its lock renewed while its turn runs, after the earlier copy ended; the run completes once', async () => {
    const model = await startFakeOpenAI();
    cleanups.push(() => model.close());
    let calls = 0;
    // The first copy would wait for its answer far longer than the test: only its abort ends it.
    // The second copy's turn lasts three lock durations.
    model.respond(() => {
      calls++;
      return { delayMs: calls === 1 ? 20_000 : 3 * LOCK_MS, text: `answer ${calls}` };
    });
    const env = testEnv({
      'agent.base_url': model.baseUrl,
      'agent.api_key': 'k',
      'api_server.port': 0,
      'api_server.key': KEY,
      'worker.lock_duration_ms': LOCK_MS,
      'worker.lock_renew_ms': LOCK_MS / 2,
      // Only the test's own stall check (below) hands the job back, at the moment it chooses.
      'worker.stalled_interval_ms': 120_000,
    });
    cleanups.push(() => env.cleanup());
    const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }) });
    cleanups.push(() => gw.close());
    const redis = new Redis(env.redisUrl);
    cleanups.push(() => redis.disconnect());
    const keys = new Keys(env.prefix);
    const runs = new RunStore(redis, keys, env.config.gateway.run_ttl_seconds);
    const worker = await startWorker(env);
    cleanups.push(() => worker.drain());

    const created = await fetch(`${gw.httpAddress.url}/v1/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'count the open tickets' }),
    });
    expect(created.status).toBe(202);
    const { id: runId } = await readJson(created);
    await waitFor(() => model.requests.length === 1, 10_000, 'the model call of the first copy');

    const queue = v1RunsQueue(keys, new Redis(env.redisUrl, { maxRetriesPerRequest: null }));
    cleanups.push(() => queue.close());
    const [active] = await queue.getJobs(['active']);
    const base = `${keys.bullPrefix}:${QUEUES.v1Runs}`;
    const lockKey = `${base}:${active!.id}:lock`;
    // The lock lapses just after a renewal: the stall check hands the job back before the worker's
    // next renewal could tell it the lock is gone, so its first copy is still running when it
    // fetches the job again.
    await waitFor(
      async () => (await redis.eval(LAPSE_LOCK, 3, lockKey, `${base}:stalled`, `${base}:stalled-check`, active!.id!, LOCK_MS - 100)) === 1,
      10_000,
      'a fresh renewal of the lock',
    );
    const checkerConnection = new Redis(env.redisUrl, { maxRetriesPerRequest: null });
    cleanups.push(() => checkerConnection.disconnect());
    const checker = new Worker(QUEUES.v1Runs, null, {
      connection: checkerConnection,
      prefix: keys.bullPrefix,
      autorun: false,
      stalledInterval: 120_000,
      maxStalledCount: env.config.worker.max_stalled_count,
    });
    cleanups.push(() => checker.close());
    const stalled = new Promise<string>((resolve) => checker.once('stalled', resolve));
    await checker.startStalledCheckTimer();
    expect(await stalled).toBe(active!.id);

    // The same process fetches the job again; its earlier copy is aborted and ends, then the new
    // copy's turn starts.
    await waitFor(() => model.requests.length === 2, 10_000, 'the model call of the second copy');
    const newToken = await redis.get(lockKey);
    expect(newToken).toBeTruthy();
    // Its lock is renewed for as long as the turn runs: still held, by the same copy, two lock durations on.
    const until = Date.now() + 2 * LOCK_MS;
    while (Date.now() < until) {
      expect(await redis.get(lockKey), 'the lock of the running copy').toBe(newToken);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect((await runs.get(runId))?.status, 'the second copy still in its turn').toBe('running');

    const done = await waitForRunStatus(() => runs.get(runId), 'completed', 20_000);
    expect(done.output).toBe('answer 2');
    expect(model.requests).toHaveLength(2);
    // Started by each copy, never handed back again, completed once.
    const types = (await runs.readEvents(redis, runId, '0')).map((e) => e.type);
    expect(types).toEqual(['run.queued', 'run.started', 'run.started', 'run.completed']);
  }, 60_000);
});
