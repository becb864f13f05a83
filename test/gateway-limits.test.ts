/**
 * Limits on what a caller can grow, and what `/health` tells a caller without
 * the key:
 *
 * - connections (gateway/http/connection-limits.ts, worker/runtime/metrics-server.ts):
 *   thousands of sockets that never send a complete request leave
 *   `/health/live` (and a worker's `/metrics`) answering on a fresh connection,
 *   and are closed by the header timeout (408) or to make room near the cap;
 * - JSON nesting depth (gateway/http/json-depth.ts): a body nested 50,000
 *   levels deep is a 400 naming the field, never a 500 (with `Idempotency-Key`,
 *   whose digest walked the body recursively, too);
 * - `/health` without the key says only live/ready.
 *
 * The gateway's flood test runs alone: it measures how fast a probe is answered and it holds most of the
 * gateway's connections. The other tests run side by side (the metrics server's flood, on a server of its
 * own, only alongside the header-timeout test), so two floods never open their sockets at once.
 */
import { connect, type Socket } from 'node:net';
import { hostname } from 'node:os';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { createLogger } from '../scheduler/logger.ts';
import { HermesMetrics } from '../scheduler/metrics.ts';
import { startMetricsServer } from '../worker/runtime/metrics-server.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { waitFor } from './support/wait-for.ts';

const KEY = 'limits-key-123456';
const MAX_CONNECTIONS = 200;
const HEADERS_TIMEOUT_MS = 1500;
/**
 * A probe on a fresh connection answers within this, ms (typically 2–30 ms; the bound leaves
 * room for a machine running four test files on two cores, this one's flood included).
 */
const PROBE_BOUND_MS = 1_500;

/**
 * Sockets the flood opens. Each costs two file descriptors in this process (the client's, and
 * the gateway's while it holds it), so the count stays well below the soft `ulimit -n` (20,000 on
 * the CI machine; 1,024 on many desktops, where the flood shrinks to fit). 2,000 is ten times the
 * cap and opens in well under a second; the production case (20,000 from another user) differs
 * only in how many sockets are closed to make room.
 */
function floodSize(): number {
  const m = /Max open files\s+(\d+|unlimited)/.exec(readFileSync('/proc/self/limits', 'utf8'));
  const soft = !m || m[1] === 'unlimited' ? 1_000_000 : Number(m[1]);
  return Math.max(100, Math.min(2_000, Math.floor((soft - 400) / 2)));
}

let env: TestEnv;
let gw: Gateway;

beforeAll(async () => {
  env = testEnv({
    'api_server.port': 0,
    'api_server.key': KEY,
    'api_server.max_connections': MAX_CONNECTIONS,
    'api_server.headers_timeout_ms': HEADERS_TIMEOUT_MS,
    'api_server.request_timeout_ms': 3000,
    'api_server.keep_alive_timeout_ms': 1000,
  });
  gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }) });
});

afterAll(async () => {
  await gw?.close();
  env?.cleanup();
});

/** A socket that connects and sends nothing, or only part of a request's headers. */
interface Idle {
  socket: Socket;
  closed: boolean;
  got408: boolean;
}

async function flood(port: number, count: number): Promise<Idle[]> {
  const idles: Idle[] = [];
  // In waves, so the listen backlog never overflows (a dropped SYN is retried only after 1 s).
  for (let i = 0; i < count; i += 250) {
    await Promise.all(
      Array.from(
        { length: Math.min(250, count - i) },
        (_, j) =>
          new Promise<void>((resolve) => {
            const idle: Idle = { socket: connect(port, '127.0.0.1'), closed: false, got408: false };
            idle.socket.on('connect', () => {
              if ((i + j) % 2 === 1) idle.socket.write('GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n'); // headers never finished
              resolve();
            });
            idle.socket.on('data', (d: Buffer) => {
              if (d.toString().startsWith('HTTP/1.1 408')) idle.got408 = true;
            });
            idle.socket.on('error', () => resolve());
            idle.socket.on('close', () => {
              idle.closed = true;
              resolve();
            });
            idles.push(idle);
          }),
      ),
    );
  }
  return idles;
}

/** GET `path` on a fresh connection; resolves with the status and how long it took. */
function timedGet(url: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; ms: number; body: string }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, url), { agent: false, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, ms: performance.now() - started, body }));
    });
    req.setTimeout(5_000, () => req.destroy(new Error(`no answer to ${path} within 5 s`)));
    req.on('error', reject);
    req.end();
  });
}

describe('connections: half-open sockets cannot starve /health/live', () => {
  // Alone: the cap counts every connection to the shared gateway, and the probes are timed.
  it(`${floodSize()} sockets that never send a full request: /health/live answers on a fresh connection, the sockets are closed (408 after the header timeout, or to make room)`, async () => {
    const { port } = gw.httpAddress;
    const count = floodSize();
    const started = Date.now();
    const idles = await flood(port, count);
    // Connected is not yet accepted: once all but the cap's worth are closed to make room, the
    // gateway has taken every one of them and holds the rest.
    await waitFor(() => idles.filter((s) => s.closed).length >= count - MAX_CONNECTIONS, 10_000, 'the flood accepted');
    console.log(
      `opened ${idles.length} idle sockets in ${Date.now() - started} ms (cap ${MAX_CONNECTIONS}; ${idles.filter((s) => !s.closed).length} held)`,
    );

    // A fresh connection is served at once while the flood holds the rest.
    const probes = [];
    for (let i = 0; i < 5; i++) probes.push(await timedGet(gw.httpAddress.url, '/health/live'));
    console.log(`/health/live under the flood: ${probes.map((p) => `${p.ms.toFixed(1)} ms`).join(', ')}`);
    expect(probes.every((p) => p.status === 200)).toBe(true);
    expect(Math.max(...probes.map((p) => p.ms))).toBeLessThan(PROBE_BOUND_MS);

    // Every idle socket is closed: most at once to make room, the last ones by the header timeout.
    await waitFor(() => idles.every((s) => s.closed), HEADERS_TIMEOUT_MS + 10_000, 'every idle socket closed');
    const timedOut = idles.filter((s) => s.got408).length;
    console.log(`closed after ${Date.now() - started} ms: ${timedOut} with 408 (header timeout), ${idles.length - timedOut} to make room`);
    expect(timedOut).toBeGreaterThan(0);
    // Not bounded by the cap: a connection still in the accept backlog is taken once a slot frees
    // (a loaded machine accepts slowly), and may then time out too. What holds: all of them are closed.
    expect(timedOut).toBeLessThan(count);
    expect((await timedGet(gw.httpAddress.url, '/health/live')).status).toBe(200);
  }, 60_000);

  // After the gateway's flood: each has its own sockets, and only the metrics server's flood is timed.
  describe.concurrent("the header timeout, and a worker's metrics server", () => {
    it('the header timeout closes a socket that sent nothing with 408, while a request in progress (an event stream) stays open', async ({
      expect,
    }) => {
      const stream = new Promise<{ status: number; req: ReturnType<typeof request> }>((resolve, reject) => {
        const req = request(
          new URL('/api/sessions/limits-live/events', gw.httpAddress.url),
          { agent: false, headers: { authorization: `Bearer ${KEY}` } },
          (res) => {
            res.on('data', () => {});
            resolve({ status: res.statusCode!, req });
          },
        );
        req.on('error', reject);
        req.end();
      });
      const [idle] = await flood(gw.httpAddress.port, 1);
      const open = await stream;
      expect(open.status).toBe(200);
      await waitFor(() => idle!.closed, HEADERS_TIMEOUT_MS + 3_000, 'the silent socket closed');
      expect(idle!.got408).toBe(true);
      expect(open.req.destroyed).toBe(false);
      open.req.destroy();
    });

    it("a worker's metrics server: the same flood leaves GET /metrics answering, and its sockets are closed", async ({ expect }) => {
      const server = await startMetricsServer({
        host: '127.0.0.1',
        port: 0,
        key: undefined,
        public: false,
        metrics: new HermesMetrics({ processMetrics: false }),
        log: createLogger({ level: 'silent' }),
        limits: { maxConnections: 64, headersTimeoutMs: 1000, requestTimeoutMs: 2000, keepAliveTimeoutMs: 1000 },
      });
      try {
        const port = Number(new URL(server.url).port);
        const idles = await flood(port, Math.min(500, floodSize()));
        await waitFor(() => idles.filter((s) => s.closed).length >= idles.length - 64, 10_000, 'the flood accepted');
        const probe = await timedGet(server.url, '/metrics');
        console.log(`worker /metrics under a flood of ${idles.length}: ${probe.ms.toFixed(1)} ms`);
        expect(probe.status).toBe(200);
        expect(probe.ms).toBeLessThan(PROBE_BOUND_MS);
        await waitFor(() => idles.every((s) => s.closed), 10_000, 'every idle socket closed');
        expect(idles.some((s) => s.got408)).toBe(true);
      } finally {
        await server.close();
      }
    }, 30_000);
  });
});

describe.concurrent('JSON nesting depth', () => {
  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    fetch(`${gw.httpAddress.url}${path}`, {
      method: 'POST',
      body,
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers },
    });
  const nested = (levels: number, leaf = '1') => `${'{"a":'.repeat(levels)}${leaf}${'}'.repeat(levels)}`;

  it('a body nested 50,000 levels deep with Idempotency-Key is a 400 naming the field, not a 500', async ({ expect }) => {
    const body = `{"messages":[{"role":"user","content":"hi"}],"metadata":${nested(50_000)}}`;
    const res = await post('/v1/chat/completions', body, { 'idempotency-key': 'deep-1' });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { code: string; param: string; message: string } };
    expect(error).toMatchObject({ code: 'json_too_deep', param: 'metadata' });
    expect(error.message).toMatch(/deeper than 64 levels in metadata/);

    // Arrays count alike, on every route that takes a body; nothing was queued.
    const runs = await post('/v1/runs', `{"input":${'['.repeat(50_000)}${']'.repeat(50_000)}}`, { 'idempotency-key': 'deep-2' });
    expect(runs.status).toBe(400);
    expect(((await runs.json()) as { error: { param: string } }).error.param).toBe('input');
    const api = await post('/api/schedules', `{"kind":"loop","session_id":"deep","args":"5m x","extra":${nested(1_000)}}`);
    expect(api.status).toBe(400);
    expect(((await api.json()) as { error: { code: string; param: string } }).error).toMatchObject({
      code: 'json_too_deep',
      param: 'extra',
    });
    const root = await post('/v1/runs', `${'['.repeat(100)}${']'.repeat(100)}`);
    expect(((await root.json()) as { error: { code: string; param: string | null } }).error).toMatchObject({
      code: 'json_too_deep',
      param: null,
    });
    expect((await timedGet(gw.httpAddress.url, '/health/live')).status).toBe(200);
  });

  it('64 levels pass the check (the body is then judged by its route as before)', async ({ expect }) => {
    // `metadata` is level 1, so 63 objects inside it make 64 levels.
    const res = await post('/v1/runs', `{"input":"x","instructions":"y","metadata":${nested(63)}}`);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('invalid_body'); // strict schema: unknown field
  });
});

describe.concurrent('/health without the key', () => {
  it('says only live or ready; with the key it names the instance, streams and platforms', async ({ expect }) => {
    for (const path of ['/health/live', '/health/ready', '/health']) {
      const anon = await timedGet(gw.httpAddress.url, path);
      const body = JSON.parse(anon.body) as Record<string, unknown>;
      expect(Object.keys(body)).toEqual(['status']);
      expect(anon.body).not.toContain(hostname());
      expect(anon.body).not.toContain(String(process.pid));
      const wrong = JSON.parse((await timedGet(gw.httpAddress.url, path, { authorization: 'Bearer wrong' })).body) as Record<
        string,
        unknown
      >;
      expect(Object.keys(wrong)).toEqual(['status']);
      const keyed = JSON.parse((await timedGet(gw.httpAddress.url, path, { authorization: `Bearer ${KEY}` })).body) as Record<
        string,
        unknown
      >;
      expect(keyed.instance).toBe(gw.instanceId);
      expect(String(keyed.instance)).toContain(`${hostname()}:${process.pid}:`);
      expect(keyed).toHaveProperty('streams');
      expect(keyed).toHaveProperty('platforms');
    }
    // Not ready (no worker here): 503 with Retry-After, and still no reasons without the key.
    const ready = await timedGet(gw.httpAddress.url, '/health/ready');
    expect(ready.status).toBe(503);
    expect(JSON.parse(ready.body)).toEqual({ status: 'unavailable' });
  });

  it('with api_server.insecure_no_auth: details for requests addressed to loopback, only the status for another Host (a rebound page)', async ({
    expect,
  }) => {
    const open = testEnv({ 'api_server.port': 0, 'api_server.insecure_no_auth': true });
    const g = await startGateway({ config: open.config, redisUrl: open.redisUrl, log: createLogger({ level: 'silent' }) });
    try {
      const local = JSON.parse((await timedGet(g.httpAddress.url, '/health/live')).body) as Record<string, unknown>;
      expect(local.instance).toBe(g.instanceId);
      const rebound = await timedGet(g.httpAddress.url, '/health/live', { host: 'evil.example' });
      expect(rebound.status).toBe(200);
      expect(JSON.parse(rebound.body)).toEqual({ status: 'ok' });
    } finally {
      await g.close();
      open.cleanup();
    }
  });
});
