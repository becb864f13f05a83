/**
 * Health endpoints and Redis outages (gateway/health.ts): `/health/live`,
 * `/health/ready` (Redis answers and a worker heartbeat is recent; `/health`
 * is its alias), 503 with `Retry-After` from every endpoint (the queue
 * dashboard included) while Redis is away — at once, not a 500 after seconds — and recovery of the gateway and a
 * worker when Redis comes back. The test stops and restarts its own
 * redis-server (same port, AOF on), never the shared one.
 */
import { request, type IncomingMessage } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { loadConfig, type HermesConfig } from '../scheduler/config/config.ts';
import { Keys } from '../scheduler/store/keys.ts';
import { createLogger } from '../scheduler/logger.ts';
import { startEmbeddedRedis, type EmbeddedRedis } from '../scheduler/store/redis/embedded-redis.ts';
import { sessionStoreFor } from '../scheduler/services.ts';
import { WorkerProcess } from '../worker/worker-process.ts';
import { echoLast, startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import { waitFor } from './support/wait-for.ts';

const KEY = 'health-key-123456';

let dir: string;
let redisServer: EmbeddedRedis;
let port: number;
let config: HermesConfig;
let gw: Gateway;
let worker: WorkerProcess | undefined;
let model: FakeOpenAI;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'hermes-health-redis-'));
  redisServer = await startEmbeddedRedis({ dir, appendonly: true });
  port = Number(new URL(redisServer.url).port);
  model = await startFakeOpenAI();
  model.respond(echoLast);
  config = loadConfig({
    env: { HERMES_HOME: join(dir, 'home') },
    overrides: {
      'redis.url': redisServer.url,
      'redis.prefix': `{t-${randomBytes(4).toString('hex')}}`,
      log_level: process.env.HERMES_TEST_LOG ?? 'silent',
      'api_server.port': 0,
      'api_server.key': KEY,
      'agent.base_url': model.baseUrl,
      'agent.api_key': 'k',
      'worker.lock_duration_ms': 3000,
      'worker.stalled_interval_ms': 1000,
    },
  });
  gw = await startGateway({ config, redisUrl: redisServer.url, log: createLogger({ level: config.log_level }) });
}, 30_000);

afterAll(async () => {
  await gw?.close();
  await worker?.drain();
  await model?.close();
  await redisServer?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const get = (path: string) => fetch(`${gw.httpAddress.url}${path}`, { headers: { authorization: `Bearer ${KEY}` } });
const ask = (text: string) =>
  fetch(`${gw.httpAddress.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: text }] }),
  });
const json = async (res: Response) => (await res.json()) as Record<string, any>;

describe('health endpoints and Redis outages', () => {
  it('ready needs a live worker: 503 naming the reason without one, 200 with one; live is 200 throughout', async () => {
    const none = await get('/health/ready');
    expect(none.status).toBe(503);
    expect(none.headers.get('retry-after')).toBe('5');
    expect(await json(none)).toMatchObject({
      status: 'unavailable',
      redis: 'up',
      reasons: [expect.stringMatching(/No worker has registered/)],
    });
    expect((await get('/health')).status).toBe(503); // alias of ready
    expect((await get('/health/live')).status).toBe(200);

    worker = await WorkerProcess.start({
      config,
      redisUrl: redisServer.url,
      log: createLogger({ level: config.log_level, name: 'test-worker' }),
    });
    const ready = await get('/health/ready');
    expect(ready.status).toBe(200);
    expect(await json(ready)).toMatchObject({ status: 'ok', reasons: [], redis: 'up', worker_heartbeat_age_ms: expect.any(Number) });
    expect((await get('/health')).status).toBe(200);
  });

  it('with Redis stopped every endpoint answers 503 with Retry-After at once; after Redis is back the gateway and the worker recover by themselves', async () => {
    expect((await ask('before')).status).toBe(200);
    // A session stream opened before the outage, read through the shared reader.
    const events: string[] = [];
    let streamRes: IncomingMessage | undefined;
    const streamReq = request(
      `${gw.httpAddress.url}/api/sessions/outage/events`,
      { headers: { authorization: `Bearer ${KEY}` }, agent: false },
      (res) => {
        streamRes = res;
        res.setEncoding('utf8');
        res.on('data', (d: string) => events.push(d));
        res.on('error', () => {});
      },
    );
    streamReq.on('error', () => {});
    streamReq.end();
    await waitFor(() => streamRes?.statusCode === 200, 5_000, 'the event stream open');

    await redisServer.stop();
    const down = await waitFor(
      async () => {
        const r = await get('/health/ready');
        return r.status === 503 ? r : undefined;
      },
      10_000,
      'ready to report Redis down',
    );
    expect(await json(down)).toMatchObject({ status: 'unavailable', redis: 'down', reasons: [expect.stringMatching(/Redis/)] });
    expect((await get('/health/live')).status).toBe(200);

    for (const call of [
      () => ask('during'),
      () => get('/api/schedules'),
      () => get('/v1/models'),
      () => get('/v1/runs/run_000000000000000000000000'),
      () => get('/admin/queues/api/queues'),
    ]) {
      const started = Date.now();
      const res = await call();
      expect(Date.now() - started).toBeLessThan(1_000);
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect((await json(res)).error).toMatchObject({
        type: 'service_unavailable',
        code: 'store_unavailable',
        message: expect.stringMatching(/cannot reach Redis.*retry/),
      });
    }

    redisServer = await startEmbeddedRedis({ dir, appendonly: true, port });
    await waitFor(async () => (await get('/health/ready')).status === 200, 20_000, 'ready again');
    const after = await waitFor(
      async () => {
        const r = await ask('after');
        return r.status === 200 ? r : undefined;
      },
      20_000,
      'a /v1 answer after recovery',
    );
    expect((await json(after)).choices[0].message.content).toBe('echo: after');

    // The stream opened before the outage is still served by the recovered reader.
    const admin = new Redis(redisServer.url);
    try {
      const id = await sessionStoreFor(config, admin, new Keys(config.redis.prefix)).appendEvent('outage', 'notice', { text: 'back' });
      await waitFor(() => events.join('').includes(`id: ${id}`), 15_000, 'the event after recovery');
    } finally {
      admin.disconnect();
      streamReq.destroy();
    }
  }, 90_000);
});
