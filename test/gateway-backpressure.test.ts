/**
 * Event streams honour back-pressure (gateway/http/sse.ts): a client that
 * does not read is disconnected once `api_server.sse_max_buffered_bytes` of
 * events wait unsent for it — each drop is logged with the bytes it left
 * unsent, which must not pass the bound by more than the one event that
 * crossed it — so SILENT_CLIENTS such clients of a stream of EVENTS × 4 KB
 * events cannot grow the gateway by much more than SILENT_CLIENTS × the bound
 * (before: 372 MB → 778 MB, never released), while a client that reads gets
 * every event.
 *
 * Without the bound the silent clients are never dropped (the test waits for
 * that), whatever the memory does; with a bound not kept (a client dropped
 * only well past it) the logged bytes show it.
 *
 * The gateway is given a bound of 256 KB rather than the default 1 MB: the rule
 * is the same at any size, and a client is dropped only once the kernel's socket
 * buffers (a few MB on loopback) and then the bound are full, so a smaller bound
 * needs fewer events and clients to show it (10 clients × 10,000 events before:
 * most of the file's CPU went to pushing 40 MB twice to 11 clients).
 *
 * The gateway runs as its own process (test/support/gateway-child.ts), so its
 * resident memory (`VmRSS` of /proc/<pid>/status) is the gateway's alone; the
 * test writes the events straight into the session's stream (XADD, as
 * SessionStore.appendEvent does) from its own connection. A private
 * redis-server holds the 40 MB of events.
 */
import { connect, type Socket } from 'node:net';
import { request } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Keys } from '../scheduler/store/keys.ts';
import { SessionStore } from '../scheduler/session/session-store.ts';
import { configDefaults } from '../scheduler/config/config.ts';
import { startEmbeddedRedis, type EmbeddedRedis } from '../scheduler/store/redis/embedded-redis.ts';
import { spawnGateway, type ChildGateway } from './support/child-gateway.ts';
import { waitFor } from './support/wait-for.ts';

const KEY = 'backpressure-key-123456';
const BOUND = 256 * 1024; // api_server.sse_max_buffered_bytes (default 1 MB)
const SILENT_CLIENTS = 4;
const EVENTS = 3_000;
const EVENT_BYTES = 4096;
/**
 * Growth allowed beyond BOUND × clients: the gateway's own working memory while the events pass
 * through it (XREAD batches parsed, frames, garbage not yet collected), after a warm-up pass.
 * Measured on a 2-core machine: 22–26 MB for 10,000 events to 11 clients, 15 MB for 3,000 to 5.
 * Before the bound (and with one frame per client) the growth was ~475 MB, never released.
 */
const SLACK = 64 * 1024 * 1024;
const SESSION = 'flood';

let dir: string;
let redisServer: EmbeddedRedis;
let admin: Redis;
let gw: ChildGateway;
let prefix: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'hermes-backpressure-'));
  redisServer = await startEmbeddedRedis({ dir: join(dir, 'redis'), appendonly: false });
  admin = new Redis(redisServer.url);
  prefix = `{t-${randomBytes(4).toString('hex')}}`;
  gw = await spawnGateway({
    ...process.env,
    HERMES_HOME: join(dir, 'home'),
    REDIS_URL: redisServer.url,
    HERMES_REDIS_PREFIX: prefix,
    HERMES_LOG_LEVEL: 'info',
    API_SERVER_PORT: '0',
    API_SERVER_KEY: KEY,
    HERMES_API_SERVER_SSE_MAX_BUFFERED_BYTES: String(BOUND),
  });
}, 60_000);

afterAll(async () => {
  gw?.kill('SIGKILL');
  await gw?.exited;
  admin?.disconnect();
  await redisServer?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The gateway process's resident memory, bytes. */
function rss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]) * 1024;
}

const health = async () =>
  (await (await fetch(`${gw.url}/health`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as { streams: number };

/** A client that sends the request and then never reads: the socket is never resumed. */
function silentClient(path: string): Promise<Socket> {
  const { hostname, port } = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${KEY}\r\n\r\n`);
      socket.pause();
      resolve(socket);
    });
    socket.on('error', () => {}); // reset by the gateway when it drops us
    socket.once('error', reject);
  });
}

/** A client that reads everything and keeps the `n` of each event of type `flood`. */
function readingClient(path: string): { count: () => number; ns: number[]; close: () => void } {
  const ns: number[] = [];
  let rest = '';
  const req = request(new URL(path, gw.url), { headers: { authorization: `Bearer ${KEY}` }, agent: false }, (res) => {
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      rest += chunk;
      let cut: number;
      while ((cut = rest.indexOf('\n\n')) >= 0) {
        const frame = rest.slice(0, cut);
        rest = rest.slice(cut + 2);
        if (frame.includes('\nevent: flood\n')) ns.push((JSON.parse(/^data: (.+)$/m.exec(frame)![1]!) as { n: number }).n);
      }
    });
    res.on('error', () => {});
  });
  req.on('error', () => {});
  req.end();
  return { count: () => ns.length, ns, close: () => req.destroy() };
}

/**
 * Events written per pipeline, and how far the writer runs ahead of the reading client: at most two
 * batches (200 KB) wait unsent for it, below the bound, so it is never dropped however slowly it reads.
 */
const BATCH = 25;

/**
 * Write `EVENTS` events of `EVENT_BYTES` into `session`'s stream, as SessionStore.appendEvent
 * writes them, in batches of BATCH, each once the reading client has read all but the last batch:
 * a producer an ordinary reader keeps up with (the test's own process writes, reads and parses,
 * so on a loaded machine an unpaced writer could starve its reader). The silent clients are
 * flooded all the same: they never read anything.
 */
async function flood(session: string, reader: { count: () => number }): Promise<void> {
  const keys = new Keys(prefix);
  const store = new SessionStore(
    admin,
    keys,
    configDefaults().worker.transcript_max_messages,
    configDefaults().worker.occurrence_window_seconds * 1000,
    EVENTS * 2,
  );
  await store.appendEvent(session, 'flood', { n: 0, text: 'first' });
  const text = 'x'.repeat(EVENT_BYTES);
  for (let i = 1; i < EVENTS; i += BATCH) {
    await waitFor(() => reader.count() >= i - BATCH, 30_000, `the reading client at event ${i - BATCH}`);
    const batch = admin.pipeline();
    for (let j = i; j < Math.min(EVENTS, i + BATCH); j++) {
      batch.xadd(keys.events(session), 'MAXLEN', '~', String(EVENTS * 2), '*', 'type', 'flood', 'data', JSON.stringify({ n: j, text }));
    }
    await batch.exec();
  }
}

const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MB`;

describe('event streams honour back-pressure (M6)', () => {
  it(`${SILENT_CLIENTS} clients that never read ${EVENTS} × 4 KB events are dropped before the gateway grows by more than the bound × clients + slack; a reading client gets every event`, async () => {
    // Warm-up: the same 40 MB through one reading client, so V8 has grown its young generation
    // to what this throughput needs before the baseline is taken (that growth is the same with
    // or without silent clients).
    const warm = readingClient('/api/sessions/warm-up/events');
    await waitFor(async () => (await health()).streams === 1, 15_000, 'the warm-up client subscribed');
    await flood('warm-up', warm);
    await waitFor(() => warm.count() >= EVENTS, 60_000, 'the warm-up client got every event');
    warm.close();
    await waitFor(async () => (await health()).streams === 0, 15_000, 'the warm-up client gone');

    const path = `/api/sessions/${SESSION}/events`;
    const silent = await Promise.all(Array.from({ length: SILENT_CLIENTS }, () => silentClient(path)));
    const reader = readingClient(path);
    await waitFor(async () => (await health()).streams === SILENT_CLIENTS + 1, 15_000, 'every client subscribed');

    const before = rss(gw.proc.pid!);
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rss(gw.proc.pid!))), 20);
    try {
      await flood(SESSION, reader);
      await waitFor(() => reader.count() >= EVENTS, 60_000, `the reading client got ${EVENTS} events`);
      await waitFor(async () => (await health()).streams === 1, 15_000, 'the silent clients dropped');
    } finally {
      clearInterval(sampler);
    }
    peak = Math.max(peak, rss(gw.proc.pid!));
    const growth = peak - before;
    const allowed = BOUND * SILENT_CLIENTS + SLACK;
    console.log(`gateway RSS ${mb(before)} → peak ${mb(peak)}: growth ${mb(growth)} (allowed ${mb(allowed)})`);
    expect(growth).toBeLessThan(allowed);

    // The reading client got every event, once each, in order.
    expect(reader.count()).toBe(EVENTS);
    expect(reader.ns).toEqual(Array.from({ length: EVENTS }, (_, i) => i));
    // Each dropped client was logged once, at info, with what it left unsent: past the bound by
    // less than the one event (its frame: the JSON text and the `id:`/`event:` lines) that crossed it.
    const drops = gw.stderr
      .split('\n')
      .filter((l) => l.includes('event stream client is not reading'))
      .map((l) => JSON.parse(l) as { level: number; bufferedBytes: number; limit: number });
    expect(drops).toHaveLength(SILENT_CLIENTS);
    for (const drop of drops) {
      expect(drop).toMatchObject({ level: 30, limit: BOUND });
      expect(drop.bufferedBytes).toBeGreaterThan(BOUND);
      expect(drop.bufferedBytes).toBeLessThanOrEqual(BOUND + EVENT_BYTES + 256);
    }
    reader.close();
    for (const s of silent) s.destroy();
  }, 120_000);
});
