/**
 * One page of each list with many schedules stored, timed (`ops/bench/list-page.ts`, and the
 * `list_page_p99_ms` of `ops/bench/top-of-hour.ts`), on a private Redis started for the run:
 * `schedules` cron job records and as many loops (one session each) — records only, written through
 * the stores' own scripts, none armed: a page reads records, not BullMQ — then, one request at a time:
 *  - `GET /api/cron/jobs?limit=…` through a gateway, following `next_cursor` from the first page on;
 *  - `GET /api/sessions?limit=…` likewise (each session's summary: its loop, heartbeat, goal and last reply);
 *  - `hermes cron list` (the command in this process: connect, one page of `api_server.page_size`, print).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Command } from 'commander';
import { registerCronCommands, type CronCliIo } from '../../cli/commands/cron.ts';
import { connectCli } from '../../cli/connect-cli.ts';
import { openCronApi } from '../../cli/gateway-cron-api.ts';
import { startGateway } from '../../gateway/gateway-process.ts';
import { loadConfig } from '../../scheduler/config/config.ts';
import { createLogger } from '../../scheduler/logger.ts';
import { cronStoreFor, loopStoreFor, openQueues } from '../../scheduler/services.ts';
import { Keys } from '../../scheduler/store/keys.ts';
import { openRedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { startEmbeddedRedis } from '../../scheduler/store/redis/embedded-redis.ts';
import { cronJobFixture, loopFixture } from '../../test/support/record-fixtures.ts';
import { percentiles, type Percentiles } from './bench-support.ts';

/** What to store and time. */
export interface ListPageOptions {
  /** cron jobs stored, and as many loops */
  schedules: number;
  /** pages timed of each endpoint (`cron list`: a quarter of them, at least 20) */
  requests: number;
  /** a page's size */
  limit: number;
  /** progress lines */
  say: (text: string) => void;
}

/** Each list's page times in ms, and the load average once timed. */
export interface ListPageTimes {
  jobs: Percentiles;
  sessions: Percentiles;
  cronList: Percentiles;
  loadAfter: string;
}

const KEY = 'bench-key';
const NAMES = ['daily digest', 'Standup', 'backup check', 'Deploy watch', 'inbox', 'release notes', 'CI status', 'weekly report'];

/** The p99 of the slowest of the three lists, in ms to a tenth (`list_page_p99_ms`). */
export function listPageP99(t: ListPageTimes): number {
  return Math.round(Math.max(t.jobs.p99, t.sessions.p99, t.cronList.p99) * 10) / 10;
}

/** The load average, three figures. */
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

/** Run `fn` `n` times one after another; each call's duration in ms. */
async function timed(n: number, fn: (i: number) => Promise<void>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await fn(i);
    out.push(performance.now() - t0);
  }
  return out;
}

export async function timeListPages(options: ListPageOptions): Promise<ListPageTimes> {
  const { schedules: SCHEDULES, requests: REQUESTS, limit: LIMIT, say } = options;
  const dir = mkdtempSync(join(tmpdir(), 'hermes-bench-list-'));
  const server = await startEmbeddedRedis({ dir: join(dir, 'redis'), appendonly: false });
  const config = loadConfig({
    env: { HERMES_HOME: join(dir, 'home') },
    overrides: { 'redis.url': server.url, log_level: 'warn', 'api_server.port': 0, 'api_server.key': KEY, 'api_server.page_size': LIMIT },
  });
  const keys = new Keys(config.redis.prefix, { shards: config.redis.shards });
  const redis = openRedisClient({ kind: 'single', url: server.url }, 'commands');
  const queues = openQueues(keys, redis);
  const cron = cronStoreFor(config, { redis, keys, queues });
  const loops = loopStoreFor(config, { redis, keys, queues });

  say(`storing ${SCHEDULES} cron jobs and ${SCHEDULES} loops; load average ${load()}`);
  const t0 = performance.now();
  for (let i = 0; i < SCHEDULES; i += 500) {
    const n = Math.min(500, SCHEDULES - i);
    await Promise.all(
      Array.from({ length: n }, async (_, j) => {
        const k = i + j;
        const id = k.toString(16).padStart(12, '0');
        await cron.put(cronJobFixture({ id, name: `${NAMES[k % NAMES.length]} ${k}`, paused: k % 10 === 0 }), 'absent');
        await loops.put(loopFixture({ sessionId: `chat-${id}` }), 'absent');
      }),
    );
  }
  say(
    `stored in ${((performance.now() - t0) / 1000).toFixed(1)} s; used_memory ${/used_memory_human:(\S+)/.exec(await redis.info('memory'))?.[1]}`,
  );

  const log = createLogger({ level: 'warn', name: 'bench' });
  const cronApi = await openCronApi(config, server.url, log);
  const gw = await startGateway({ config, redisUrl: server.url, log, cron: cronApi.api });
  const pager = (path: string) => {
    let cursor: string | null = null;
    return async () => {
      const res = await fetch(`${gw.httpAddress.url}${path}?limit=${LIMIT}${cursor ? `&cursor=${cursor}` : ''}`, {
        headers: { authorization: `Bearer ${KEY}` },
      });
      if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`);
      const body = (await res.json()) as { data: unknown[]; next_cursor: string | null };
      if (body.data.length === 0) throw new Error(`${path}: an empty page`);
      cursor = body.next_cursor;
    };
  };
  const cronList = async () => {
    let lines = 0;
    const io: CronCliIo = {
      out: () => void lines++,
      err: say,
      setExitCode: (c) => {
        if (c) throw new Error(`cron list: exit ${c}`);
      },
      exit: (c) => {
        throw new Error(`cron list: exit ${c}`);
      },
      now: Date.now,
    };
    const program = new Command('hermes');
    registerCronCommands(program, { config, connect: () => connectCli(config, server.url) }, io);
    await program.parseAsync(['cron', 'list'], { from: 'user' });
    if (lines < LIMIT) throw new Error(`cron list printed ${lines} lines`);
  };

  // Warm-up (the first list also checks each order against its index).
  for (const f of [pager('/api/cron/jobs'), pager('/api/sessions')]) for (let i = 0; i < 5; i++) await f();
  await cronList();

  say(`timing ${REQUESTS} pages of each; load average ${load()}`);
  const jobsPage = pager('/api/cron/jobs');
  const sessionsPage = pager('/api/sessions');
  const jobs = percentiles(await timed(REQUESTS, jobsPage));
  const sessions = percentiles(await timed(REQUESTS, sessionsPage));
  const list = percentiles(await timed(Math.max(20, Math.round(REQUESTS / 4)), cronList));
  const loadAfter = load();

  await gw.close();
  await cronApi.close();
  await queues.close();
  redis.disconnect();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
  return { jobs, sessions, cronList: list, loadAfter };
}
