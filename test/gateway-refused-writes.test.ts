/**
 * A write Redis refuses while it is reachable — out of memory (`maxmemory`
 * with `noeviction`), too few replicas (`min-replicas-to-write`), a read-only
 * replica, a failed AOF write (MISCONF, e.g. ENOSPC) — is answered 503 with
 * `Retry-After` and a JSON error naming it on every route, never a 500
 * (gateway/http/errors.ts, gateway/http/write-refusal.ts).
 *
 * Runs on a private redis-server whose settings the test changes; the shared
 * test Redis is never touched.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { toHttpError } from '../gateway/http/errors.ts';
import { loadConfig } from '../scheduler/config/config.ts';
import { StoreUnavailableError } from '../scheduler/errors/store-unavailable-error.ts';
import { createLogger } from '../scheduler/logger.ts';
import { redisRefusal } from '../gateway/http/write-refusal.ts';
import { startEmbeddedRedis, type EmbeddedRedis } from '../scheduler/store/redis/embedded-redis.ts';

const KEY = 'refused-key-123456';

let dir: string;
let server: EmbeddedRedis;
let admin: Redis;
let gw: Gateway;
let runId: string;
const prefix = `{t-${randomBytes(4).toString('hex')}}`;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'hermes-refused-'));
  server = await startEmbeddedRedis({ dir: join(dir, 'redis'), appendonly: false });
  admin = new Redis(server.url);
  const config = loadConfig({
    env: { HERMES_HOME: join(dir, 'home') },
    overrides: {
      'redis.url': server.url,
      'redis.prefix': prefix,
      log_level: process.env.HERMES_TEST_LOG ?? 'silent',
      'api_server.port': 0,
      'api_server.key': KEY,
      'agent.base_url': 'http://127.0.0.1:9/v1',
    },
  });
  gw = await startGateway({ config, redisUrl: server.url, log: createLogger({ level: config.log_level }) });
  // Something to pause, stop and delete while writes are refused.
  expect((await call('POST', '/api/schedules', { kind: 'loop', session_id: 'ops', args: '10m check the build' })).status).toBe(201);
  const run = await call('POST', '/v1/runs', { input: 'hello' });
  expect(run.status).toBe(202);
  runId = (run.body as { id: string }).id;
}, 30_000);

afterEach(async () => {
  await admin.config('SET', 'maxmemory', '0');
  await admin.config('SET', 'min-replicas-to-write', '0');
  await admin.replicaof('NO', 'ONE');
});

afterAll(async () => {
  await gw?.close();
  admin?.disconnect();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${gw.httpAddress.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // an SSE or plain body
  }
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: parsed };
}

/** Every write route, with a body that would succeed while Redis takes writes. */
const WRITES: Array<[string, string, unknown?, Record<string, string>?]> = [
  ['POST', '/v1/runs', { input: 'refused run' }],
  ['POST', '/v1/runs', { input: 'refused run with a key' }, { 'idempotency-key': 'refused-1' }],
  ['POST', '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] }],
  ['POST', '/v1/chat/completions', { stream: true, messages: [{ role: 'user', content: 'hi' }] }, { 'idempotency-key': 'refused-2' }],
  ['POST', '/api/schedules', { kind: 'heartbeat', session_id: 'ops', interval_seconds: 3600, prompt: 'anything new?' }],
  ['POST', '/api/schedules/ops/loop/pause'],
  ['DELETE', '/api/schedules/ops/loop'],
];

async function expectEveryWriteRefused(code: string): Promise<void> {
  for (const [method, path, body, headers] of WRITES) {
    const res = await call(method, path, body, headers);
    const where = `${method} ${path}`;
    expect(res.status, where).toBe(503);
    expect(res.retryAfter, where).toBe('5');
    expect(res.body, where).toMatchObject({ error: { type: 'service_unavailable', code: 'store_refused_write' } });
    expect((res.body as { error: { message: string } }).error.message, where).toContain(code);
  }
  // A run's stop is a write too (a 503 when refused; 200/202 are fine once it is taken).
  const stop = await call('POST', `/v1/runs/${runId}/stop`);
  expect(stop.status).toBe(503);
  // Reads still answer.
  expect((await call('GET', '/api/schedules')).status).toBe(200);
  expect((await call('GET', `/v1/runs/${runId}`)).status).toBe(200);
}

describe('writes Redis refuses are 503 with Retry-After on every route, never 500', () => {
  it('out of memory (maxmemory 1, noeviction: -OOM)', async () => {
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', '1');
    await expectEveryWriteRefused('OOM');
    await admin.config('SET', 'maxmemory', '0');
    expect((await call('POST', '/v1/runs', { input: 'after the outage' })).status).toBe(202);
  });

  it('/health/ready is 503 naming the refusal while Redis refuses writes, and 200 again once it takes them', async () => {
    // A worker that is alive, so that the write is what readiness turns on.
    const worker = setInterval(() => void admin.zadd(`${prefix}:workers`, Date.now(), 'probe-worker').catch(() => {}), 1_000);
    try {
      await admin.zadd(`${prefix}:workers`, Date.now(), 'probe-worker');
      expect(await call('GET', '/health/ready')).toMatchObject({ status: 200, body: { status: 'ok', reasons: [], redis: 'up' } });
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
      await admin.config('SET', 'maxmemory', '1');
      const refused = await call('GET', '/health/ready');
      expect(refused).toMatchObject({ status: 503, retryAfter: '5', body: { status: 'unavailable', redis: 'up' } });
      expect((refused.body as { reasons: string[] }).reasons).toEqual([
        expect.stringMatching(/^Redis refuses writes: OOM command not allowed/),
      ]);
      await admin.config('SET', 'maxmemory', '0');
      expect(await call('GET', '/health/ready')).toMatchObject({ status: 200, body: { status: 'ok' } });
    } finally {
      clearInterval(worker);
      await admin.zrem(`${prefix}:workers`, 'probe-worker');
    }
  });

  it('too few replicas (min-replicas-to-write 1: -NOREPLICAS)', async () => {
    await admin.config('SET', 'min-replicas-to-write', '1');
    await expectEveryWriteRefused('NOREPLICAS');
  });

  it('a read-only replica (-READONLY)', async () => {
    await admin.replicaof('127.0.0.1', '1'); // a primary that is not there: the data stays, writes are refused
    await expectEveryWriteRefused('READONLY');
  });

  it('MISCONF (a failed save or AOF write, e.g. the disk is full), also wrapped in a script error or as a cause', () => {
    const misconf = Object.assign(new Error('MISCONF Errors writing to the AOF file: No space left on device'), { name: 'ReplyError' });
    const inScript = new Error(
      "ERR Error running script (call to f_0123): @user_script:12: @user_script: 12: -OOM command not allowed when used memory > 'maxmemory'.",
    );
    const wrapped = new StoreUnavailableError('The goal was not saved: Redis refused the write.', { cause: misconf });
    const enospc = Object.assign(new Error('write ENOSPC'), { code: 'ENOSPC' });
    expect(redisRefusal(misconf)?.code).toBe('MISCONF');
    expect(redisRefusal(inScript)?.code).toBe('OOM');
    expect(redisRefusal(wrapped)?.code).toBe('MISCONF');
    expect(redisRefusal(enospc)?.code).toBe('MISCONF');
    expect(redisRefusal(new Error('ERR wrong number of arguments'))).toBeUndefined();
    expect(redisRefusal(new Error('the session is BUSYish'))).toBeUndefined();
    for (const err of [misconf, inScript, wrapped, enospc]) {
      const http = toHttpError(err);
      expect(http.status).toBe(503);
      expect(http.headers['Retry-After']).toBe('5');
      expect(http.code).toBe('store_refused_write');
    }
  });
});
