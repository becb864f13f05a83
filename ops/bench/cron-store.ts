/**
 * Cron store benchmark: 10,000 cron jobs in a private Redis.
 *
 *   npx tsx ops/bench/cron-store.ts [--jobs 10000] [--parallel 50] [--stock-redis]
 *
 * Starts its own `redis-server` (AOF on, noeviction, as in production; the encoding settings the
 * product's own Redis has, or with `--stock-redis` redis-server's defaults: `HASH_LISTPACK_VALUE`
 * in scheduler/store/redis/embedded-redis.ts) in a temporary folder — never a Redis it did not
 * start — and measures:
 *  - add rate: `CronService.add` (record write + BullMQ job scheduler upsert), `--parallel` at a time;
 *  - Redis memory per job: `used_memory` after minus before, divided by the job count,
 *    and the part taken by the job records themselves (MEMORY USAGE of a sample);
 *  - `hermes cron list` time: the real command (human and `--json`), output discarded.
 * Prints a Markdown table and writes `.bench-out/cron-store.json`.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Command } from 'commander';
import { registerCronCommands, type CronCliIo } from '../../cli/commands/cron.ts';
import { connectCli } from '../../cli/connect-cli.ts';
import { loadConfig } from '../../scheduler/config/config.ts';
import { Keys } from '../../scheduler/store/keys.ts';
import { openRedisClient, type RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { createLogger } from '../../scheduler/logger.ts';
import { cronServiceFor, openQueues } from '../../scheduler/services.ts';
import { startEmbeddedRedis } from '../../scheduler/store/redis/embedded-redis.ts';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
}

const JOBS = arg('jobs', 10_000);
const PARALLEL = arg('parallel', 50);
/** redis-server's own encoding defaults instead of those of the Redis the product starts. */
const STOCK = process.argv.includes('--stock-redis');
const SCHEDULES = ['daily at 7am', 'weekdays at 9am', 'every 2h', '*/15 * * * *', 'every monday 9am', '0 18 * * 1-5', '30m', 'midnight'];
const ZONES = ['Europe/Berlin', 'America/New_York', 'Asia/Tokyo', 'UTC'];

async function usedMemory(redis: RedisClient): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)![1]);
}

const dir = mkdtempSync(join(tmpdir(), 'hermes-bench-redis-'));
const server = await startEmbeddedRedis({ dir, stock: STOCK });
const home = mkdtempSync(join(tmpdir(), 'hermes-bench-home-'));
try {
  const config = loadConfig({ env: { HERMES_HOME: home }, overrides: { 'redis.url': server.url, log_level: 'warn', timezone: 'UTC' } });
  const keys = new Keys(config.redis.prefix);
  const redis = openRedisClient({ kind: 'single', url: server.url }, 'commands');
  const queues = openQueues(keys, redis);
  const service = cronServiceFor(config, { redis, keys, queues }, createLogger({ level: 'warn', name: 'bench' }));
  await queues.ticks.waitUntilReady();
  const before = await usedMemory(redis);

  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      for (let i = next++; i < JOBS; i = next++) {
        await service.add(
          {
            schedule: SCHEDULES[i % SCHEDULES.length]!,
            tz: ZONES[i % ZONES.length],
            prompt: `Check the status of service ${i} and report anything unusual in two sentences.`,
          },
          { origin: { surface: 'cli' }, trusted: true },
        );
      }
    }),
  );
  const addMs = performance.now() - t0;
  const after = await usedMemory(redis);

  const ids = await redis.srandmember(keys.cronJobIndex, 200);
  let recordBytes = 0;
  for (const id of ids) recordBytes += Number(await redis.memory('USAGE', keys.cronJob(id)));
  const recordPerJob = recordBytes / ids.length;
  // Reported at once: the list timings that follow take minutes on a loaded machine.
  process.stderr.write(
    `stored ${JOBS} jobs in ${(addMs / 1000).toFixed(2)} s; Redis memory per job ${((after - before) / JOBS / 1024).toFixed(2)} KiB, ` +
      `of which the record ${(recordPerJob / 1024).toFixed(2)} KiB; load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}\n`,
  );

  const timeList = async (args: string[]): Promise<number[]> => {
    const times: number[] = [];
    for (let r = 0; r < 5; r++) {
      let bytes = 0;
      const io: CronCliIo = {
        out: (t) => {
          bytes += t.length;
        },
        err: (t) => process.stderr.write(`${t}\n`),
        setExitCode: (c) => {
          if (c) throw new Error(`exit ${c}`);
        },
        exit: (c) => {
          throw new Error(`exit ${c}`);
        },
        now: Date.now,
      };
      const program = new Command('hermes');
      registerCronCommands(
        program,
        {
          config,
          connect: () => connectCli(config, server.url),
        },
        io,
      );
      const s = performance.now();
      await program.parseAsync(['cron', ...args], { from: 'user' });
      times.push(performance.now() - s);
      if (bytes === 0) throw new Error('list printed nothing');
    }
    return times.sort((a, b) => a - b);
  };
  const listHuman = await timeList(['list']);
  const listJson = await timeList(['list', '--json']);
  const median = (xs: number[]) => xs[Math.floor(xs.length / 2)]!;

  const result = {
    jobs: JOBS,
    stockRedis: STOCK,
    parallel: PARALLEL,
    cpus: cpus().length,
    node: process.version,
    redis: (/redis_version:([^\r\n]+)/.exec(await redis.info('server')) ?? [])[1],
    addSeconds: +(addMs / 1000).toFixed(2),
    addPerSecond: Math.round(JOBS / (addMs / 1000)),
    memoryBytesTotal: after - before,
    memoryBytesPerJob: Math.round((after - before) / JOBS),
    recordBytesPerJob: Math.round(recordPerJob),
    listMsMedian: Math.round(median(listHuman)),
    listJsonMsMedian: Math.round(median(listJson)),
  };
  await queues.close();
  redis.disconnect();

  mkdirSync('.bench-out', { recursive: true });
  writeFileSync('.bench-out/cron-store.json', `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write(
    [
      `| measure | value |`,
      `|---|---|`,
      `| jobs stored | ${result.jobs} (${STOCK ? 'redis-server defaults' : "the product's Redis settings"}) |`,
      `| add rate (${PARALLEL} in parallel) | ${result.addPerSecond} jobs/s (${result.addSeconds} s total) |`,
      `| Redis memory per job (all keys) | ${(result.memoryBytesPerJob / 1024).toFixed(2)} KiB |`,
      `| of which the job record | ${(result.recordBytesPerJob / 1024).toFixed(2)} KiB |`,
      `| \`hermes cron list\` (median of 5) | ${result.listMsMedian} ms |`,
      `| \`hermes cron list --json\` (median of 5) | ${result.listJsonMsMedian} ms |`,
      `| machine | ${result.cpus} cores, Node ${result.node}, Redis ${result.redis} |`,
      '',
    ].join('\n'),
  );
} finally {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
}
