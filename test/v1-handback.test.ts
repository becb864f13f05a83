/**
 * A `/v1` run cut by a worker's drain is handed back and completed by another
 * worker (worker/v1/v1-run-processor.ts), like a loop tick: the caller still
 * waiting gets the answer, and a retry with the same Idempotency-Key attaches
 * to the unfinished run instead of replaying `interrupted` as final. Real
 * worker processes (`WorkerProcess.drain()`, the SIGTERM path), a real
 * gateway, a local model server. A worker that loses a run's job lock aborts
 * its copy and writes nothing; the copy that holds the lock ends the run.
 */
import { Redis } from 'ioredis';
import { describe } from 'vitest';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { Keys } from '../scheduler/store/keys.ts';
import { createLogger } from '../scheduler/logger.ts';
import { DRAIN_ERROR, RunStore, v1RunsQueue } from '../scheduler/v1/v1-runs.ts';
import type { WorkerProcess } from '../worker/worker-process.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { echoLast, startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from './support/fake-openai.ts';
import { readJson, waitFor } from './support/http.ts';
import { startWorker } from './support/stack.ts';
import { it, type CleanUp } from './support/cleanup.ts';

const KEY = 'handback-key-123';

/** How the model answers: after `delayMs`, with `text` of the request. The test may change both at any time. */
interface Answer {
  delayMs: number;
  text: (req: RecordedRequest) => string;
}

async function setup(
  cleanups: CleanUp[],
  settings: Record<string, unknown> = {},
): Promise<{
  env: TestEnv;
  model: FakeOpenAI;
  answer: Answer;
  gw: Gateway;
  runs: RunStore;
  redis: Redis;
  worker: () => Promise<WorkerProcess>;
}> {
  const model = await startFakeOpenAI();
  const answer: Answer = { delayMs: 0, text: echoLast };
  model.respond((req) => ({ delayMs: answer.delayMs, text: answer.text(req) }));
  cleanups.push(() => model.close());
  const env = testEnv({
    'agent.base_url': model.baseUrl,
    'agent.api_key': 'k',
    'api_server.port': 0,
    'api_server.key': KEY,
    'agent.cron_drain_timeout': 0.5,
    ...settings,
  });
  cleanups.push(() => env.cleanup());
  const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }) });
  cleanups.push(() => gw.close());
  const redis = new Redis(env.redisUrl);
  cleanups.push(() => redis.disconnect());
  const runs = new RunStore(redis, new Keys(env.prefix), env.config.gateway.run_ttl_seconds);
  const worker = async () => {
    const w = await startWorker(env);
    cleanups.push(() => w.drain());
    return w;
  };
  return { env, model, answer, gw, runs, redis, worker };
}

function post(gw: Gateway, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${gw.httpAddress.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

// Each test has its own model server, gateway, workers and Redis prefix, so they run side by side.
describe.concurrent('/v1 runs cut by a drain are handed back', () => {
  it('plain /v1/chat/completions: the drain hands the run back, another worker completes it, the waiting caller gets the answer', async ({
    cleanups,
    expect,
  }) => {
    const { model, answer, gw, runs, redis, worker } = await setup(cleanups);
    answer.delayMs = 4_000;
    const a = await worker();
    const pending = post(gw, '/v1/chat/completions', { messages: [{ role: 'user', content: 'summarise the week' }] });
    await waitFor(() => model.pending === 1, 10_000, 'the model call of worker A');
    answer.delayMs = 0; // the next attempt answers at once
    const drained = a.drain();
    await worker(); // worker B
    const res = await pending;
    expect(res.status).toBe(200);
    const body = await readJson(res);
    expect(body.choices[0].message.content).toBe('echo: summarise the week');
    await drained;
    const runId = res.headers.get('x-hermes-run-id')!;
    expect(await runs.get(runId)).toMatchObject({ status: 'completed', output: 'echo: summarise the week' });
    const types = (await runs.readEvents(redis, runId, '0')).map((e) => e.type);
    expect(types).toEqual(['run.queued', 'run.started', 'run.requeued', 'run.started', 'run.completed']);
    expect(model.requests).toHaveLength(2);
  }, 40_000);

  it('a /v1 run is in the deadline drain class: with cron_drain_timeout 30 and restart_drain_timeout 0 a 2 s run finishes on the draining worker and answers', async ({
    cleanups,
    expect,
  }) => {
    const { model, answer, gw, runs, redis, worker } = await setup(cleanups, {
      'agent.cron_drain_timeout': 30,
      'agent.restart_drain_timeout': 0,
    });
    answer.delayMs = 2_000;
    const a = await worker();
    const pending = post(gw, '/v1/chat/completions', { messages: [{ role: 'user', content: 'finish me' }] });
    await waitFor(() => model.pending === 1, 10_000, 'the model call of worker A');
    const drained = a.drain(); // no other worker: a handed-back run would wait forever
    const res = await pending;
    expect(res.status).toBe(200);
    expect((await readJson(res)).choices[0].message.content).toBe('echo: finish me');
    await drained;
    const runId = res.headers.get('x-hermes-run-id')!;
    const types = (await runs.readEvents(redis, runId, '0')).map((e) => e.type);
    expect(types).toEqual(['run.queued', 'run.started', 'run.completed']);
    expect(model.requests).toHaveLength(1);
  }, 40_000);

  it('/v1/runs with an Idempotency-Key: after the drain the run is queued, a retry attaches to it, then it completes once', async ({
    cleanups,
    expect,
  }) => {
    const { model, answer, gw, runs, worker } = await setup(cleanups);
    answer.delayMs = 4_000;
    const a = await worker();
    const first = await post(gw, '/v1/runs', { input: 'write the nightly report' }, { 'idempotency-key': 'k1' });
    expect(first.status).toBe(202);
    const { id: runId } = await readJson(first);
    await waitFor(() => model.pending === 1, 10_000, 'the model call of worker A');
    await a.drain(); // no other worker yet: the run waits in the queue
    const afterDrain = await runs.get(runId);
    expect(afterDrain).toMatchObject({ status: 'queued', error: null, finishedAt: null });

    const retry = await post(gw, '/v1/runs', { input: 'write the nightly report' }, { 'idempotency-key': 'k1' });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await readJson(retry)).toMatchObject({ id: runId, status: 'queued', error: null });

    answer.delayMs = 0;
    await worker();
    const done = await waitFor(
      async () => {
        const r = await runs.get(runId);
        return r?.status === 'completed' ? r : undefined;
      },
      15_000,
      'the run completed by worker B',
    );
    expect(done.output).toBe('echo: write the nightly report');
    const again = await readJson(post(gw, '/v1/runs', { input: 'write the nightly report' }, { 'idempotency-key': 'k1' }));
    expect(again).toMatchObject({ id: runId, status: 'completed', output: 'echo: write the nightly report' });
    expect(model.requests).toHaveLength(2); // A's cut attempt and B's; nothing ran twice after that
  }, 40_000);

  it('a run left interrupted (by an older version) is queued again by a retry with its key, not replayed as final', async ({
    cleanups,
    expect,
  }) => {
    const { env, model, gw, runs, worker } = await setup(cleanups);
    const first = await post(gw, '/v1/runs', { input: 'old run' }, { 'idempotency-key': 'k2' });
    const { id: runId } = await readJson(first);
    // What an older version left behind: the run ended `interrupted`, its job gone.
    const queue = v1RunsQueue(new Keys(env.prefix), new Redis(env.redisUrl, { maxRetriesPerRequest: null }));
    cleanups.push(() => queue.close());
    await queue.remove(runId);
    expect(await runs.end(runId, 'interrupted', DRAIN_ERROR)).toBe(true);

    const retry = await post(gw, '/v1/runs', { input: 'old run' }, { 'idempotency-key': 'k2' });
    expect(retry.status).toBe(200);
    expect(await readJson(retry)).toMatchObject({ id: runId, status: 'queued', error: null });
    await worker();
    const done = await waitFor(
      async () => {
        const r = await runs.get(runId);
        return r?.status === 'completed' ? r : undefined;
      },
      15_000,
      'the re-queued run completed',
    );
    expect(done.output).toBe('echo: old run');
    expect(model.requests).toHaveLength(1);
  }, 40_000);

  it("a worker that loses a run's job lock aborts its copy and writes nothing; only the copy that holds the lock completes the run", async ({
    cleanups,
    expect,
  }) => {
    const { env, model, gw, runs, redis, worker } = await setup(cleanups);
    // The first copy's answer comes the moment the copy that took the job over calls the model, a second before
    // that copy's own: if the first copy were not aborted, its reply would be the one recorded.
    let secondCall = () => {};
    const secondCalled = new Promise<void>((resolve) => (secondCall = resolve));
    model.respond(async (_req, index) => {
      if (index === 0) {
        await secondCalled;
        return { delayMs: 0, text: 'answer 1' };
      }
      secondCall();
      return { delayMs: 1_000, text: `answer ${index + 1}` };
    });
    await worker();
    const created = await post(gw, '/v1/runs', { input: 'count the open tickets' });
    expect(created.status).toBe(202);
    const { id: runId } = await readJson(created);
    await waitFor(() => model.pending === 1, 10_000, 'the model call of the first copy');
    const keys = new Keys(env.prefix);
    const queue = v1RunsQueue(keys, new Redis(env.redisUrl, { maxRetriesPerRequest: null }));
    cleanups.push(() => queue.close());
    const [active] = await queue.getJobs(['active']);
    // The lock lapses under the worker (as after a renewal that came too late): the stall check hands the job on.
    expect(await redis.del(`${keys.bullPrefix}:v1-runs:${active!.id}:lock`)).toBe(1);
    const done = await waitFor(
      async () => {
        const r = await runs.get(runId);
        return r?.status === 'completed' ? r : undefined;
      },
      20_000,
      'the run completed',
    );
    expect(done.output).toBe('answer 2');
    expect(model.requests).toHaveLength(2);
    // Started twice (the copy that lost its lock, then the one that took the job over), never handed back, completed once.
    const types = (await runs.readEvents(redis, runId, '0')).map((e) => e.type);
    expect(types).toEqual(['run.queued', 'run.started', 'run.started', 'run.completed']);
  }, 40_000);
});
