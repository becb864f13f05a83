/**
 * One shared Redis reader per gateway (gateway/stream-fanout.ts): hundreds of
 * open session event streams and waiting `/v1` callers hold a handful of
 * Redis connections, every stream still gets its own events, the cap
 * `api_server.max_streams` answers 429 beyond it, and closed streams are
 * released. Runs on a private redis-server, so `CLIENT LIST` shows only this
 * test's gateway (and the test's own admin connection).
 */
import { request, type ClientRequest, type IncomingMessage } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { loadConfig } from '../scheduler/config/config.ts';
import { Keys } from '../scheduler/store/keys.ts';
import { createLogger } from '../scheduler/logger.ts';
import { startEmbeddedRedis, type EmbeddedRedis } from '../scheduler/store/redis/embedded-redis.ts';
import type { SessionStore } from '../scheduler/session/session-store.ts';
import { sessionStoreFor } from '../scheduler/services.ts';
import { waitFor } from './support/wait-for.ts';

const KEY = 'streams-key-123456';
const STREAMS = 300;
const WAITERS = 20;
const CAP = STREAMS + WAITERS;

let dir: string;
let server: EmbeddedRedis;
let gw: Gateway;
let admin: Redis;
let sessions: SessionStore;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'hermes-streams-redis-'));
  server = await startEmbeddedRedis({ dir, appendonly: false });
  const prefix = `{t-${randomBytes(4).toString('hex')}}`;
  const home = join(dir, 'home');
  const config = loadConfig({
    env: { HERMES_HOME: home },
    overrides: {
      'redis.url': server.url,
      'redis.prefix': prefix,
      log_level: process.env.HERMES_TEST_LOG ?? 'silent',
      'api_server.port': 0,
      'api_server.key': KEY,
      'api_server.max_streams': CAP,
    },
  });
  gw = await startGateway({ config, redisUrl: server.url, log: createLogger({ level: config.log_level }) });
  admin = new Redis(server.url);
  sessions = sessionStoreFor(config, admin, new Keys(prefix));
}, 30_000);

afterAll(async () => {
  await gw?.close();
  admin?.disconnect();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** An open SSE request with what it received so far. */
interface OpenStream {
  req: ClientRequest;
  res: Promise<IncomingMessage>;
  text: string;
}

function openStream(path: string, method = 'GET', body?: string): OpenStream {
  const url = new URL(path, gw.httpAddress.url);
  const s = { text: '' } as OpenStream;
  s.req = request(url, {
    method,
    agent: false,
    headers: { authorization: `Bearer ${KEY}`, ...(body ? { 'content-type': 'application/json' } : {}) },
  });
  s.res = new Promise((resolve, reject) => {
    s.req.on('response', (res) => {
      res.setEncoding('utf8');
      res.on('data', (d: string) => (s.text += d));
      res.on('error', () => {});
      resolve(res);
    });
    s.req.on('error', reject);
  });
  s.res.catch(() => {});
  s.req.end(body);
  return s;
}

/** Clients of the private Redis other than the test's own admin connection. */
async function gatewayClients(): Promise<number> {
  const list = (await admin.client('LIST')) as string;
  const own = String(await admin.client('ID'));
  return list
    .trim()
    .split('\n')
    .filter((l) => !l.startsWith(`id=${own} `)).length;
}

const health = async () =>
  (await (await fetch(`${gw.httpAddress.url}/health`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as { streams: number };

describe('one shared Redis reader for every stream', () => {
  it(`${STREAMS} session streams and ${WAITERS} waiting /v1 callers share a few Redis connections; each stream gets its own events; ${CAP} is the cap (429 beyond); closing releases them`, async () => {
    const before = await gatewayClients();
    const streams = Array.from({ length: STREAMS }, (_, i) => openStream(`/api/sessions/fan-${i}/events`));
    const responses = await Promise.all(streams.map((s) => s.res));
    expect(responses.every((r) => r.statusCode === 200)).toBe(true);
    // Callers waiting for runs no worker takes: they wait on the same reader.
    const waiters = Array.from({ length: WAITERS }, (_, i) =>
      openStream('/v1/chat/completions', 'POST', JSON.stringify({ messages: [{ role: 'user', content: `wait ${i}` }] })),
    );
    await waitFor(async () => (await health()).streams === CAP, 15_000, 'every stream and waiter subscribed');

    const clients = await gatewayClients();
    expect(clients).toBeLessThanOrEqual(10);
    expect(clients - before).toBeLessThanOrEqual(1); // at most the reader itself joined

    // Every stream receives its own session's event, and only that.
    const ids = await Promise.all(streams.map((_, i) => sessions.appendEvent(`fan-${i}`, 'notice', { text: `for ${i}` })));
    await waitFor(() => streams.every((s, i) => s.text.includes(`id: ${ids[i]}`)), 20_000, 'every stream got its event');
    streams.forEach((s, i) => {
      expect(s.text).toContain(`"text":"for ${i}"`);
      expect(s.text.match(/event: notice/g)).toHaveLength(1);
    });

    // At the cap: a further stream and a further /v1 caller get 429 with Retry-After, and nothing is queued.
    const refused = await fetch(`${gw.httpAddress.url}/api/sessions/fan-x/events`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('too_many_streams');
    const refusedV1 = await fetch(`${gw.httpAddress.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'one too many' }] }),
    });
    expect(refusedV1.status).toBe(429);

    // Closing releases every subscription; the connections stay where they were.
    for (const s of [...streams, ...waiters]) s.req.destroy();
    await waitFor(async () => (await health()).streams === 0, 15_000, 'subscriptions released');
    expect(await gatewayClients()).toBeLessThanOrEqual(clients);
    const again = openStream('/api/sessions/fan-0/events');
    expect((await again.res).statusCode).toBe(200);
    again.req.destroy();
  }, 60_000);

  it('a malformed Last-Event-ID is refused with 400 and cannot break the shared read of other streams', async () => {
    const live = openStream('/api/sessions/fan-live/events');
    expect((await live.res).statusCode).toBe(200);
    const created = await fetch(`${gw.httpAddress.url}/v1/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'queued only' }),
    });
    const { id } = (await created.json()) as { id: string };
    for (const path of [`/v1/runs/${id}/events`, '/api/sessions/fan-live/events']) {
      const bad = await fetch(`${gw.httpAddress.url}${path}`, { headers: { authorization: `Bearer ${KEY}`, 'last-event-id': '0-0 junk' } });
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('invalid_event_id');
    }
    const eventId = await sessions.appendEvent('fan-live', 'notice', { text: 'still served' });
    await waitFor(() => live.text.includes(`id: ${eventId}`), 10_000, 'the live stream still served');
    live.req.destroy();
  });
});
