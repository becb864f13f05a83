/**
 * Benchmark (not a test) of the gateway's relay overhead, on a private Redis
 * started for the run (never 127.0.0.1:6379):
 *
 *   npx tsx ops/bench/gateway.ts [--n 300] [--concurrency 1]
 *
 * 1. Inbound relay latency: a Telegram update becomes available at the Bot API
 *    (the local Bot API server of the tests, with the gateway's long poll
 *    waiting) → the turn starts (first line of an inbox job processor). It
 *    covers getUpdates, the allow-list, `enqueueInput` (pending-input write and
 *    BullMQ add) and the worker's fetch of the job.
 * 2. `/v1` overhead: `POST /v1/chat/completions` through the gateway (queue →
 *    worker `processV1Run` → model → run record → gateway) versus the same
 *    request made directly to the model server with the official `openai`
 *    client. The model server answers at once, so the difference is the relay.
 *
 * Prints p50/p99/max in milliseconds as a Markdown table for docs/BENCHMARKS.md.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'bullmq';
import OpenAI from 'openai';
import { startGateway } from '../../gateway/gateway-process.ts';
import { loadConfig } from '../../scheduler/config/config.ts';
import type { InboxJobData } from '../../scheduler/session/inbox.ts';
import { QUEUES } from '../../scheduler/store/keys.ts';
import { createLogger } from '../../scheduler/logger.ts';
import { openRedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { startEmbeddedRedis } from '../../scheduler/store/redis/embedded-redis.ts';
import { startFakeOpenAI } from '../../test/support/fake-openai.ts';
import { startFakeTelegram } from '../../test/support/fake-telegram.ts';
import { startV1Worker } from '../../test/support/v1-worker.ts';
import { percentiles, runBench } from './bench-support.ts';

const args = process.argv.slice(2);
const arg = (name: string, def: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : def;
};
const N = Number(arg('n', '300'));
const CONCURRENCY = Number(arg('concurrency', '1'));
const WARMUP = 20;
const KEY = 'bench-key';
const USER = 4242;

const stats = percentiles;

const fmt = (n: number) => n.toFixed(2);

/** Run `fn` `n` times with `concurrency` in flight; returns each call's duration in ms. */
async function timed(n: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<number[]> {
  const out: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const i = next++;
        const t0 = performance.now();
        await fn(i);
        out.push(performance.now() - t0);
      }
    }),
  );
  return out;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'hermes-bench-gateway-'));
  const redisServer = await startEmbeddedRedis({ dir: join(dir, 'redis'), appendonly: false });
  const telegram = await startFakeTelegram();
  const model = await startFakeOpenAI(); // answers `ok`
  const prefix = '{bench-gw}';
  const config = loadConfig({
    env: { HERMES_HOME: dir },
    overrides: {
      'redis.url': redisServer.url,
      'redis.prefix': prefix,
      log_level: 'silent',
      'api_server.port': 0,
      'api_server.key': KEY,
      'agent.base_url': model.baseUrl,
      'agent.api_key': 'bench',
      'telegram.bot_token': '777:bench-token',
      'telegram.allowed_users': String(USER),
      'telegram.api_root': telegram.apiRoot,
      'gateway.poll_timeout_seconds': 10,
    },
  });
  const log = createLogger({ level: 'silent' });
  const gw = await startGateway({ config, redisUrl: redisServer.url, log });
  const v1Worker = await startV1Worker(
    { redisUrl: redisServer.url, prefix, home: dir, config, childEnv: {}, cleanup: () => {} },
    { concurrency: 32 },
  );

  // 1. inbound relay latency
  const connection = openRedisClient({ kind: 'single', url: redisServer.url }, 'bullmq');
  const waiting = new Map<string, (t: number) => void>();
  const inbox = new Worker<InboxJobData>(
    QUEUES.inbox,
    async (job) => {
      const t = performance.now();
      waiting.get(job.data.text)?.(t);
    },
    { connection, prefix, concurrency: 32 },
  );
  await inbox.waitUntilReady();
  while (!telegram.polling) await new Promise((r) => setTimeout(r, 10));
  const inbound: number[] = [];
  for (let i = 0; i < N + WARMUP; i++) {
    const text = `bench message ${i}`;
    const started = new Promise<number>((r) => waiting.set(text, r));
    const t0 = performance.now();
    telegram.pushMessage({ fromId: USER, text });
    const t1 = await started;
    waiting.delete(text);
    if (i >= WARMUP) inbound.push(t1 - t0);
    // let the gateway's next long poll be waiting again, as in steady state
    while (!telegram.polling) await new Promise((r) => setImmediate(r));
  }

  // 2. /v1 overhead versus the model directly
  const direct = new OpenAI({ baseURL: model.baseUrl, apiKey: 'bench', maxRetries: 0 });
  const viaGateway = new OpenAI({ baseURL: `${gw.httpAddress.url}/v1`, apiKey: KEY, maxRetries: 0 });
  const body = { model: 'hermes-agent', messages: [{ role: 'user' as const, content: 'ping' }] };
  await timed(WARMUP, 1, async () => void (await direct.chat.completions.create(body)));
  await timed(WARMUP, 1, async () => void (await viaGateway.chat.completions.create(body)));
  const directMs = await timed(N, CONCURRENCY, async () => void (await direct.chat.completions.create(body)));
  const gatewayMs = await timed(N, CONCURRENCY, async () => void (await viaGateway.chat.completions.create(body)));

  const a = stats(inbound);
  const d = stats(directMs);
  const g = stats(gatewayMs);
  console.log(`\nGateway benchmark: n=${N}, /v1 concurrency ${CONCURRENCY}, node ${process.version}\n`);
  console.log('| measurement | p50 ms | p99 ms | max ms |');
  console.log('|---|---|---|---|');
  console.log(`| inbound relay: update available → turn started | ${fmt(a.p50)} | ${fmt(a.p99)} | ${fmt(a.max)} |`);
  console.log(`| model called directly (openai client) | ${fmt(d.p50)} | ${fmt(d.p99)} | ${fmt(d.max)} |`);
  console.log(`| model through the gateway's /v1 | ${fmt(g.p50)} | ${fmt(g.p99)} | ${fmt(g.max)} |`);
  console.log(`| /v1 overhead (difference) | ${fmt(g.p50 - d.p50)} | ${fmt(g.p99 - d.p99)} | — |`);

  await inbox.close();
  connection.disconnect();
  await gw.close();
  await v1Worker.close();
  await telegram.close();
  await model.close();
  await redisServer.stop();
  rmSync(dir, { recursive: true, force: true });
}

runBench(main);
