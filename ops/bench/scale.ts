/**
 * Benchmark (not a test): what a stored loop costs in Redis memory, and how
 * ticks spread over a Redis Cluster with the sharded key space.
 *
 *   npx tsx ops/bench/scale.ts [--loops 100000] [--parallel 100] [--session-prefix scale-] [--stock-redis] [--json]
 *   npx tsx ops/bench/scale.ts --cluster [--loops 500] [--seconds 20] [--shards 1,3,6]
 *
 * Starts its own `redis-server` (AOF off, `noeviction`; the encoding settings the product's own
 * Redis has, or with `--stock-redis` redis-server's defaults, as an operator's Redis may have them:
 * `HASH_LISTPACK_VALUE` in scheduler/store/redis/embedded-redis.ts) in a temporary folder —
 * never a Redis it did not start — and stores `--loops` active loops the way
 * `hermes loop` does (versioned record + index entry, then the BullMQ job
 * scheduler and its pending delayed job), every one a 1 h fixed loop on its own
 * session (`<--session-prefix><i>`, default `scale-<i>`; a random 12-hex loop id as `/loop` makes), `--parallel`
 * at a time. No worker runs, so nothing fires.
 *
 * Reports `used_memory` after minus before, divided by the loop count, and the
 * share of each part from `MEMORY USAGE` (and `OBJECT ENCODING`) of one loop's
 * keys and of the shared keys every loop has an entry in. `--json` prints
 * one JSON line last: `{"loops", "bytes_per_loop", "store_rate_per_s", …}`.
 *
 * `--cluster` starts a private 3-master Redis Cluster (as the tests do) and,
 * for each shard count, one worker process on it (no-op turns) with `--loops`
 * 1 s loops spread evenly over the second (`--loops` ticks/s offered), then
 * counts the ticks committed in a `--seconds` window after a warm-up and each
 * master's CPU time in it (`used_cpu_sys` + `used_cpu_user` of `INFO cpu`).
 * Keys use the default prefix, so which master a shard's hash tag lands on is
 * what an operator's cluster with the same slot layout would see.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { createLogger } from '../../scheduler/logger.ts';
import { RunnerFactory } from '../../worker/turn-runners/create-runner.ts';
import type { TurnRunner } from '../../worker/turn-runners/turn-runner.ts';
import { WorkerProcess } from '../../worker/worker-process.ts';
import { startRedisCluster } from '../../test/support/redis-cluster.ts';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadConfig } from '../../scheduler/config/config.ts';
import { Keys } from '../../scheduler/store/keys.ts';
import { createLoop } from '../../scheduler/loop/loop-state.ts';
import { loopStoreFor, sessionStoreFor, openQueues } from '../../scheduler/services.ts';
import { openRedisClient, type RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { startEmbeddedRedis } from '../../scheduler/store/redis/embedded-redis.ts';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
}
const LOOPS = arg('loops', 100_000);
const PARALLEL = arg('parallel', 100);
/** Session ids are `<prefix><i>` (`--session-prefix telegram:-1001234567890:` for ids as long as a Telegram topic's). */
const SESSION_PREFIX = process.argv.includes('--session-prefix') ? process.argv[process.argv.indexOf('--session-prefix') + 1]! : 'scale-';
const JSON_OUT = process.argv.includes('--json');
const CLUSTER = process.argv.includes('--cluster');
/** redis-server's own encoding defaults instead of those of the Redis the product starts. */
const STOCK = process.argv.includes('--stock-redis');

async function usedMemory(redis: RedisClient): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)![1]);
}

async function memory(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'hermes-bench-redis-'));
  const server = await startEmbeddedRedis({ dir, appendonly: false, stock: STOCK });
  const home = mkdtempSync(join(tmpdir(), 'hermes-bench-home-'));
  try {
    const config = loadConfig({ env: { HERMES_HOME: home }, overrides: { 'redis.url': server.url, log_level: 'warn' } });
    const keys = new Keys(config.redis.prefix);
    const redis = openRedisClient({ kind: 'single', url: server.url }, 'commands');
    const queueConn = openRedisClient({ kind: 'single', url: server.url }, 'bullmq');
    const queues = openQueues(keys, queueConn);
    const loops = loopStoreFor(config, { redis, keys, queues });
    await queues.ticks.waitUntilReady();
    const before = await usedMemory(redis);
    process.stderr.write(
      `storing ${LOOPS} loops, ${PARALLEL} at a time (${STOCK ? 'stock' : "the product's"} Redis settings); load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}\n`,
    );
    const started = performance.now();
    const firstDue = Date.now() + 3_600_000;
    let next = 0;
    async function lane(): Promise<void> {
      for (let i = next++; i < LOOPS; i = next++) {
        const record = createLoop({
          kind: 'loop',
          loopId: randomBytes(6).toString('hex'),
          sessionId: `${SESSION_PREFIX}${i}`,
          prompt: 'check the deploy and report anything unusual',
          intervalSeconds: 3600,
          times: null,
          until: null,
          maxTicks: config.loops.max_ticks,
          selfPacedFloorSeconds: config.loops.self_paced_floor_seconds,
          runner: { kind: 'agent' },
          origin: { surface: 'cli' },
          now: Date.now(),
        });
        const stored = await loops.put(record, 'absent');
        await loops.arm(stored!, firstDue + (i % 3600) * 1000);
        if (i > 0 && i % 10_000 === 0) process.stderr.write(`  ${i} stored\n`);
      }
    }
    await Promise.all(Array.from({ length: PARALLEL }, lane));
    const seconds = (performance.now() - started) / 1000;
    const after = await usedMemory(redis);
    const perLoop = (after - before) / LOOPS;
    // One loop's own keys (the shared index and sorted sets are counted in the total only).
    const sample = `${SESSION_PREFIX}7`;
    const schedulerId = keys.loopSchedulerId(sample, 'loop');
    const ticks = queues.forSession(sample).ticks;
    const scheduler = await ticks.getJobScheduler(schedulerId);
    const parts: Record<string, string> = {
      record: keys.schedule(sample, 'loop'),
      'job scheduler hash': ticks.toKey(`repeat:${schedulerId}`),
      'pending delayed job hash': ticks.toKey(`repeat:${schedulerId}:${scheduler?.next}`),
    };
    const usage: Record<string, number> = {};
    for (const [name, key] of Object.entries(parts)) usage[name] = Number(await redis.memory('USAGE', key, 'SAMPLES', 0)) || 0;
    // The keys every loop has an entry in, divided by the loop count (BullMQ's event stream is capped, so its share falls with N).
    const shared: Record<string, string> = {
      'schedule index set': keys.scheduleIndex,
      'job scheduler sorted set': ticks.toKey('repeat'),
      'delayed sorted set': ticks.toKey('delayed'),
      'queue event stream': ticks.toKey('events'),
    };
    const sharedUsage: Record<string, number> = {};
    for (const [name, key] of Object.entries(shared))
      sharedUsage[name] = (Number(await redis.memory('USAGE', key, 'SAMPLES', 0)) || 0) / LOOPS;
    const encodings: Record<string, string> = {};
    for (const [name, key] of Object.entries(parts)) encodings[name] = String(await redis.object('ENCODING', key));
    const rate = LOOPS / seconds;
    if (JSON_OUT) {
      console.log(
        JSON.stringify({
          loops: LOOPS,
          stock_redis: STOCK,
          bytes_per_loop: Math.round(perLoop),
          store_rate_per_s: Math.round(rate),
          record_bytes: usage.record,
          scheduler_bytes: usage['job scheduler hash'],
          delayed_job_bytes: usage['pending delayed job hash'],
          shared_bytes_per_loop: Object.fromEntries(Object.entries(sharedUsage).map(([k, v]) => [k, Math.round(v)])),
          encodings,
        }),
      );
    } else {
      console.log('| measure | value |\n|---|---|');
      console.log(`| loops stored | ${LOOPS} (${STOCK ? 'redis-server defaults' : "the product's Redis settings"}) |`);
      console.log(`| store rate (${PARALLEL} in parallel) | ${rate.toFixed(0)} loops/s (${seconds.toFixed(1)} s) |`);
      console.log(`| Redis memory per loop (all keys) | ${perLoop.toFixed(0)} B (${(perLoop / 1024).toFixed(2)} KiB) |`);
      for (const [name, bytes] of Object.entries(usage))
        console.log(`| of which the ${name} (MEMORY USAGE, ${encodings[name]}) | ${bytes} B |`);
      for (const [name, bytes] of Object.entries(sharedUsage))
        console.log(`| of which its share of the ${name} (MEMORY USAGE ÷ loops) | ${bytes.toFixed(0)} B |`);
    }
    await queues.close();
    redis.disconnect();
    queueConn.disconnect();
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  }
}

/** A runner that answers at once, so only the scheduling path is measured. */
class NoopRunners extends RunnerFactory {
  private readonly noop: TurnRunner = { kind: 'agent', run: async () => ({ reply: 'ok', steps: [] }) };
  override forSpec(): TurnRunner {
    return this.noop;
  }
}

async function cpuSeconds(node: Redis): Promise<number> {
  const info = await node.info('cpu');
  return Number(/used_cpu_sys:([\d.]+)/.exec(info)![1]) + Number(/used_cpu_user:([\d.]+)/.exec(info)![1]);
}

async function cluster(): Promise<void> {
  const loopCount = arg('loops', 500);
  const seconds = arg('seconds', 20);
  const shardCounts = (process.argv.includes('--shards') ? process.argv[process.argv.indexOf('--shards') + 1]! : '1,3,6')
    .split(',')
    .map(Number);
  const warmupMs = 4000;
  const c = await startRedisCluster(3);
  const rows: string[] = [];
  try {
    for (const shards of shardCounts) {
      const home = mkdtempSync(join(tmpdir(), 'hermes-bench-home-'));
      // The default key prefix, so the shards' hash tags land on the masters as an operator's would;
      // the cluster is emptied between shard counts.
      for (const m of c.masters()) await m.flushall();
      const config = loadConfig({
        env: { HERMES_HOME: home },
        overrides: { 'redis.cluster_nodes': c.nodes, 'redis.shards': shards, log_level: 'silent', 'loops.max_ticks': 0 },
      });
      const topology = {
        kind: 'cluster' as const,
        nodes: c.nodes.map((n) => ({ host: n.split(':')[0]!, port: Number(n.split(':')[1]) })),
        tls: false,
      };
      const worker = await WorkerProcess.start({
        config,
        topology,
        log: createLogger({ level: 'silent' }),
        runners: new NoopRunners(config),
      });
      const redis = openRedisClient(topology, 'commands');
      const queueConn = openRedisClient(topology, 'bullmq');
      const keys = new Keys(config.redis.prefix, { shards });
      const queues = openQueues(keys, queueConn);
      const loops = loopStoreFor(config, { redis, keys, queues });
      const first = Math.ceil((Date.now() + 3000) / 1000) * 1000;
      let next = 0;
      const lane = async () => {
        for (let i = next++; i < loopCount; i = next++) {
          const record = createLoop({
            kind: 'loop',
            loopId: `c${i}`,
            sessionId: `cl-${i}`,
            prompt: 'p',
            intervalSeconds: 1,
            times: null,
            until: null,
            maxTicks: config.loops.max_ticks,
            selfPacedFloorSeconds: config.loops.self_paced_floor_seconds,
            runner: { kind: 'agent' },
            origin: { surface: 'cli' },
            now: Date.now(),
          });
          const stored = await loops.put(record, 'absent');
          // Spread over the second: `loopCount` ticks/s offered, not one burst.
          await loops.arm(stored!, first + Math.floor((i * 1000) / loopCount));
        }
      };
      await Promise.all(Array.from({ length: 50 }, lane));
      const from = Math.max(Date.now(), first) + warmupMs;
      const to = from + seconds * 1000;
      await new Promise((r) => setTimeout(r, from - Date.now()));
      const masters = c.masters();
      const cpu0 = await Promise.all(masters.map(cpuSeconds));
      await new Promise((r) => setTimeout(r, to - Date.now()));
      const cpu1 = await Promise.all(masters.map(cpuSeconds));
      await new Promise((r) => setTimeout(r, 1500));
      const sessions = sessionStoreFor(config, redis, keys);
      const lateness: number[] = [];
      for (let i = 0; i < loopCount; i++) {
        for (const e of await sessions.readEvents(`cl-${i}`, '0', { count: 100_000 })) {
          const due = Number(e.data.dueAt);
          if (e.type === 'reply' && due >= from && due < to) lateness.push(Number(e.data.startedAt) - due);
        }
      }
      lateness.sort((a, b) => a - b);
      const q = (p: number) => lateness[Math.min(lateness.length - 1, Math.floor(p * lateness.length))] ?? NaN;
      const cpu = cpu1.map((v, i) => v - cpu0[i]!);
      const total = cpu.reduce((a, b) => a + b, 0);
      const share = cpu.map((v) => (total > 0 ? (100 * v) / total : 0));
      rows.push(
        `| ${shards} | ${loopCount} | ${(lateness.length / seconds).toFixed(1)} | ${q(0.5)} | ${q(0.99)} | ${cpu.map((v) => v.toFixed(2)).join(' · ')} | ${share.map((v) => v.toFixed(0)).join(' · ')} | ${Math.max(...share).toFixed(0)} % |`,
      );
      process.stderr.write(`${rows.at(-1)}\n`);
      await worker.drain();
      for (const qs of queues.shards()) await qs.ticks.obliterate({ force: true }).catch(() => undefined);
      await queues.close();
      redis.disconnect();
      queueConn.disconnect();
      rmSync(home, { recursive: true, force: true });
    }
  } finally {
    await c.stop();
  }
  console.log(`Ticks on a local 3-master Redis Cluster, ${seconds} s window (ms; CPU s per master in the window)\n`);
  console.log('| shards | ticks/s offered | ticks/s done | lateness p50 | p99 | Redis CPU s per master | share % | largest share |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of rows) console.log(r);
}

await (CLUSTER ? cluster() : memory());
