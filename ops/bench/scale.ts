/**
 * Benchmark (not a test): what a stored loop costs in Redis memory.
 *
 *   npx tsx ops/bench/scale.ts [--loops 100000] [--parallel 100] [--json]
 *
 * Starts its own `redis-server` (AOF off, `noeviction`) in a temporary folder —
 * never a Redis it did not start — and stores `--loops` active loops the way
 * `hermes loop` does (versioned record + index entry, then the BullMQ job
 * scheduler and its pending delayed job), every one a 1 h fixed loop on its own
 * session, `--parallel` at a time. No worker runs, so nothing fires.
 *
 * Reports `used_memory` after minus before, divided by the loop count, and the
 * share of each part from `MEMORY USAGE` of one loop's keys. `--json` prints
 * one JSON line last: `{"loops", "bytes_per_loop", "store_rate_per_s", …}`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadConfig } from '../../scheduler/config.ts';
import { Keys } from '../../scheduler/keys.ts';
import { createLoop } from '../../scheduler/loop-state.ts';
import { LoopStore } from '../../scheduler/loop-store.ts';
import { HermesQueues } from '../../scheduler/queues.ts';
import { openRedisClient, type RedisClient } from '../../scheduler/redis/connection-factory.ts';
import { startEmbeddedRedis } from '../../scheduler/redis/embedded-redis.ts';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
}
const LOOPS = arg('loops', 100_000);
const PARALLEL = arg('parallel', 100);
const JSON_OUT = process.argv.includes('--json');

async function usedMemory(redis: RedisClient): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)![1]);
}

const dir = mkdtempSync(join(tmpdir(), 'hermes-bench-redis-'));
const server = await startEmbeddedRedis({ dir, appendonly: false });
const home = mkdtempSync(join(tmpdir(), 'hermes-bench-home-'));
try {
  const config = loadConfig({ env: { HERMES_HOME: home }, overrides: { 'redis.url': server.url, log_level: 'warn' } });
  const keys = new Keys(config.redis.prefix);
  const redis = openRedisClient({ kind: 'single', url: server.url }, 'commands');
  const queueConn = openRedisClient({ kind: 'single', url: server.url }, 'bullmq');
  const queues = new HermesQueues(keys, queueConn);
  const loops = new LoopStore(redis, keys, queues, config.worker.prefetch_lead_ms);
  await queues.ticks.waitUntilReady();
  const before = await usedMemory(redis);
  process.stderr.write(`storing ${LOOPS} loops, ${PARALLEL} at a time; load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}\n`);
  const started = performance.now();
  const firstDue = Date.now() + 3_600_000;
  let next = 0;
  async function lane(): Promise<void> {
    for (let i = next++; i < LOOPS; i = next++) {
      const record = createLoop({
        kind: 'loop', loopId: `l${i}`, sessionId: `scale-${i}`, prompt: 'check the deploy and report anything unusual',
        intervalSeconds: 3600, times: null, until: null, maxTicks: config.loops.max_ticks,
        selfPacedFloorSeconds: config.loops.self_paced_floor_seconds, runner: { kind: 'agent' }, origin: { surface: 'cli' }, now: Date.now(),
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
  const sample = 'scale-7';
  const schedulerId = keys.schedulerId(sample, 'loop');
  const bull = `${keys.bullPrefix}:ticks`;
  const scheduler = await queues.ticks.getJobScheduler(schedulerId);
  const parts: Record<string, string> = {
    record: keys.schedule(sample, 'loop'),
    'job scheduler hash': `${bull}:repeat:${schedulerId}`,
    'pending delayed job hash': `${bull}:repeat:${schedulerId}:${scheduler?.next}`,
  };
  const usage: Record<string, number> = {};
  for (const [name, key] of Object.entries(parts)) usage[name] = Number(await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) || 0;
  const rate = LOOPS / seconds;
  if (JSON_OUT) {
    console.log(JSON.stringify({
      loops: LOOPS, bytes_per_loop: Math.round(perLoop), store_rate_per_s: Math.round(rate),
      record_bytes: usage.record, scheduler_bytes: usage['job scheduler hash'], delayed_job_bytes: usage['pending delayed job hash'],
    }));
  } else {
    console.log('| measure | value |\n|---|---|');
    console.log(`| loops stored | ${LOOPS} |`);
    console.log(`| store rate (${PARALLEL} in parallel) | ${rate.toFixed(0)} loops/s (${seconds.toFixed(1)} s) |`);
    console.log(`| Redis memory per loop (all keys) | ${perLoop.toFixed(0)} B (${(perLoop / 1024).toFixed(2)} KiB) |`);
    for (const [name, bytes] of Object.entries(usage)) console.log(`| of which the ${name} (MEMORY USAGE) | ${bytes} B |`);
  }
  await queues.close();
  redis.disconnect();
  queueConn.disconnect();
} finally {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
}
