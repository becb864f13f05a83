/**
 * Benchmark (not a test): tick lateness and throughput for N loops at a 1 s
 * cadence, through hermes-scheduler and through raw BullMQ job schedulers,
 * measured in the same run on the same private Redis.
 *
 *   npx tsx ops/bench/tick-lateness.ts [--n 1,100,1000] [--seconds 10] [--workers K] [--json]
 *
 * `--product-concurrency C` and `--lead MS` set the product's `worker.concurrency`
 * (read as both turn limits, `worker.max_agent_turns` and `worker.max_command_turns`)
 * and `worker.prefetch_lead_ms` (default: the product's defaults; held ticks are
 * bounded by `worker.max_held_ticks` either way).
 * `--workers K` runs the product's worker as K child processes (default: one,
 * inside the benchmark process). `--json` measures raw BullMQ only at
 * `--concurrency` (default 32) and prints, per N, one JSON line (the last line
 * is the last N): `{"n", "product_p50_ms", "product_p99_ms", "product_stamped_p50_ms",
 * "product_stamped_p99_ms", "raw_p50_ms", "raw_p99_ms", "product_ticks_per_s", "raw_ticks_per_s",
 * "due_ticks_per_s", "product_redis_cpu_us_per_tick", "raw_redis_cpu_us_per_job"}`; the machine's load
 * average at the start and end of each N goes to stderr.
 *
 * It runs under the Node options `hermes` starts a worker with (those of the `#!` line of
 * cli/hermes.mjs), both paths alike: run without them, it runs itself again with them.
 *
 * Both paths register their N schedules the same way (32 at a time) and measure
 * a window that starts 3 s after every schedule is in place.
 *
 * Lateness = actual start of the work minus its due time. For the product the
 * start is the start of the turn: its runner called, after the gate read
 * (state, coalescing, user input) and the claim script's answer (the session
 * lock taken, the in-flight mark set, the transcript read; for a held tick made
 * `worker.claim_lead_ms` before the due time, worker/loop/claim-ahead.ts); for raw
 * BullMQ it is the first line of the processor. `product_stamped_*` is the start
 * the product records for a tick (the `startedAt` of its reply event and
 * `hermes_tick_lateness_seconds`): the turn's start for a tick claimed ahead, else
 * taken when its claim script is sent, before that round trip — what
 * docs/BENCHMARKS.md reported as the product's lateness until the "turn start" rows
 * of 2026-12-05. All schedules of a run are aligned (due at the same instants).
 * The turn runner is a no-op in both, so the figures are the scheduling path.
 *
 * Redis CPU per tick = the server's CPU time (`INFO cpu`) over the window ÷ the ticks due in the
 * window that started (both paths share one server and run one after the other).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue, Worker, type Job } from 'bullmq';
import { loadConfig } from '../../scheduler/config/config.ts';
import { createLogger } from '../../scheduler/logger.ts';
import { Keys } from '../../scheduler/store/keys.ts';
import { openRedisClient, type RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { JOB_RETENTION, schedulerJobMillis } from '../../scheduler/store/queues.ts';
import { createLoop } from '../../scheduler/loop/loop-state.ts';
import { loopStoreFor, sessionStoreFor, openQueues } from '../../scheduler/services.ts';
import { startEmbeddedRedis } from '../../scheduler/store/redis/embedded-redis.ts';
import { WorkerProcess } from '../../worker/worker-process.ts';
import { RunnerFactory } from '../../worker/turn-runners/create-runner.ts';
import type { TurnRunner } from '../../worker/turn-runners/turn-runner.ts';
import { redisCpuSeconds, underLauncherNodeOptions } from './bench-support.ts';

underLauncherNodeOptions();

const args = process.argv.slice(2);
const arg = (name: string, def: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : def;
};
const SIZES = arg('n', '1,100,1000').split(',').map(Number);
const SECONDS = Number(arg('seconds', '10'));
const WARMUP_MS = 3000;
const CONCURRENCY = Number(arg('concurrency', '32'));
const WORKERS = Number(arg('workers', '0'));
const JSON_OUT = args.includes('--json');
/** The product row's settings (default: the product's defaults): `--product-concurrency C`, `--lead MS`. */
const PRODUCT: { concurrency?: number; leadMs?: number } = {
  ...(args.includes('--product-concurrency') ? { concurrency: Number(arg('product-concurrency', '')) } : {}),
  ...(args.includes('--lead') ? { leadMs: Number(arg('lead', '')) } : {}),
};
/** Optional extra product row with other settings, e.g. `--tuned 256,800` (concurrency, prefetch lead ms). */
const TUNED = arg('tuned', '').split(',').filter(Boolean).map(Number);

/** A runner that answers at once, so only the scheduling path is measured; its reply is the time its turn began (epoch ms). */
class NoopRunners extends RunnerFactory {
  private readonly noop: TurnRunner = { kind: 'agent', run: async () => ({ reply: `ok ${Date.now()}`, steps: [] }) };
  override forSpec(): TurnRunner {
    return this.noop;
  }
}

interface Stats {
  p50: number;
  p99: number;
  max: number;
  count: number;
  perSecond: number;
  /** Redis CPU µs per tick started in the window (the server's CPU time over the window ÷ those ticks). */
  redisUsPerTick: number;
}

function stats(lateness: number[], windowMs: number, redisUs: number): Stats {
  const s = [...lateness].sort((a, b) => a - b);
  const q = (p: number) => (s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))]! : NaN);
  return {
    p50: q(0.5),
    p99: q(0.99),
    max: s.at(-1) ?? NaN,
    count: s.length,
    perSecond: s.length / (windowMs / 1000),
    redisUsPerTick: s.length ? redisUs / s.length : NaN,
  };
}

/** Redis `INFO commandstats`: calls and CPU µs by command. */
async function commandStats(client: { info(section: string): Promise<string> }): Promise<Map<string, { calls: number; usec: number }>> {
  const out = new Map<string, { calls: number; usec: number }>();
  for (const m of (await client.info('commandstats')).matchAll(/cmdstat_([^:]+):calls=(\d+),usec=(\d+)/g)) {
    out.set(m[1]!, { calls: Number(m[2]), usec: Number(m[3]) });
  }
  return out;
}

/** Redis CPU time spent in commands between two `commandStats` (to stderr: where the server's time went). */
function reportRedisTime(
  label: string,
  a: Map<string, { calls: number; usec: number }>,
  b: Map<string, { calls: number; usec: number }>,
): void {
  const rows = [...b]
    .map(([cmd, v]) => ({ cmd, calls: v.calls - (a.get(cmd)?.calls ?? 0), usec: v.usec - (a.get(cmd)?.usec ?? 0) }))
    .filter((r) => r.calls > 0)
    .sort((x, y) => y.usec - x.usec);
  const total = rows.reduce((t, r) => t + r.usec, 0);
  process.stderr.write(
    `  ${label}: Redis command time ${(total / 1000).toFixed(0)} ms; top: ${rows
      .slice(0, 6)
      .map((r) => `${r.cmd} ${r.calls}×${(r.usec / r.calls).toFixed(0)}µs`)
      .join(', ')}\n`,
  );
}

/** CPU time between epoch ms `from` and `to` (waits until `to`): this process's (ms, user + system) and the Redis server's (µs). */
async function cpuInWindow(from: number, to: number, redis: RedisClient): Promise<{ ownMs: number; redisUs: number }> {
  await sleep(from - Date.now());
  const a = process.cpuUsage();
  const redis0 = await redisCpuSeconds(redis);
  await sleep(to - Date.now());
  const b = process.cpuUsage(a);
  return { ownMs: (b.user + b.system) / 1000, redisUs: ((await redisCpuSeconds(redis)) - redis0) * 1e6 };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const nextAligned = (ms: number) => Math.ceil((Date.now() + ms) / 1000) * 1000;

/** Schedules registered at once by {@link registerAll} (both paths alike). */
const REGISTER_PARALLEL = 32;

/**
 * Register `n` schedules with `register(i)`, {@link REGISTER_PARALLEL} at a time, then choose the
 * measured window: it starts {@link WARMUP_MS} after the first aligned instant at which every
 * schedule is in place (not before `first`). On a loaded machine registering 1,000 schedules can
 * outlast a fixed warm-up; a window that starts before the last schedule is armed measures fewer
 * schedules than `n` (or none), for either path.
 * @returns the window, epoch ms `[from, to)`
 */
async function registerAll(
  label: string,
  n: number,
  first: number,
  register: (i: number) => Promise<void>,
): Promise<{ from: number; to: number }> {
  const started = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(REGISTER_PARALLEL, n) }, async () => {
      while (next < n) await register(next++);
    }),
  );
  const from = Math.max(first, nextAligned(0)) + WARMUP_MS;
  process.stderr.write(
    `  ${label}: ${n} schedules registered in ${Date.now() - started} ms; window starts ${from - first} ms after the first due time\n`,
  );
  return { from, to: from + SECONDS * 1000 };
}

/** Settings of one product row: `undefined` keeps the product's default. */
interface ProductSettings {
  concurrency?: number;
  leadMs?: number;
}

function benchConfig(prefix: string, home: string, s: ProductSettings) {
  return loadConfig({
    env: { HERMES_HOME: home },
    overrides: {
      'redis.prefix': prefix,
      log_level: 'silent',
      'loops.max_ticks': 0,
      ...(s.concurrency !== undefined ? { 'worker.concurrency': s.concurrency } : {}),
      ...(s.leadMs !== undefined ? { 'worker.prefetch_lead_ms': s.leadMs } : {}),
    },
  });
}

/** Start the product's worker: in this process (`workers` 0) or as `workers` child processes. @returns stop */
async function startWorkers(url: string, prefix: string, home: string, s: ProductSettings, workers: number): Promise<() => Promise<void>> {
  if (workers <= 0) {
    const config = benchConfig(prefix, home, s);
    const wp = await WorkerProcess.start({
      config,
      redisUrl: url,
      log: createLogger({ level: 'silent' }),
      runners: new NoopRunners(config),
    });
    return async () => {
      // Ticks handed back instead of run (by reason): a tick path that defers a burst is slow for that reason.
      const deferred = (await wp.metrics.ticksDeferred.get()).values.filter((v) => v.value > 0);
      if (deferred.length > 0)
        process.stderr.write(`  hermes-scheduler: ticks deferred: ${deferred.map((v) => `${v.labels.reason} ${v.value}`).join(', ')}\n`);
      const { admission } = wp.deps.turns;
      process.stderr.write(
        `  hermes-scheduler: most ticks held at once ${admission.peakHeld} (max ${admission.limits.heldTicks}), most turns at once ${admission.slots.peak('agent')} (max ${admission.slots.limit('agent')})\n`,
      );
      await wp.drain();
    };
  }
  const children: ChildProcess[] = [];
  for (let i = 0; i < workers; i++) {
    const child = fork(fileURLToPath(import.meta.url), ['--child-worker', JSON.stringify({ url, prefix, home, s })], { stdio: 'inherit' });
    children.push(child);
    await new Promise<void>((resolve, reject) => {
      child.once('message', () => resolve());
      child.once('exit', (code) => reject(new Error(`worker process exited (${code}) before it was ready`)));
    });
  }
  return async () => {
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((resolve) => {
            c.once('exit', () => resolve());
            c.send('drain');
          }),
      ),
    );
  };
}

/** Child mode: one worker process; `ready` to the parent once started, drains and exits on `drain`. */
async function childWorker(spec: string): Promise<void> {
  const { url, prefix, home, s } = JSON.parse(spec) as { url: string; prefix: string; home: string; s: ProductSettings };
  const stop = await startWorkers(url, prefix, home, s, 0);
  process.on('message', () => {
    void stop().finally(() => process.exit(0));
  });
  process.send!('ready');
}

/** The product's lateness: `turn` from the turn's start (the runner called), `stamped` from the start it records (see the header). */
async function benchProduct(url: string, n: number, s: ProductSettings = {}, workers = WORKERS): Promise<{ turn: Stats; stamped: Stats }> {
  const prefix = `{bench-p${n}-${s.concurrency ?? 'd'}-${s.leadMs ?? 'd'}-${workers}}`;
  const home = mkdtempSync(join(tmpdir(), 'hermes-bench-'));
  const config = benchConfig(prefix, home, s);
  const stopWorkers = await startWorkers(url, prefix, home, s, workers);
  const redis = openRedisClient({ kind: 'single', url }, 'commands');
  const qconn = openRedisClient({ kind: 'single', url }, 'bullmq');
  const keys = new Keys(prefix);
  const queues = openQueues(keys, qconn);
  const loops = loopStoreFor(config, { redis, keys, queues });
  const first = nextAligned(2000);
  const statsBefore = await commandStats(redis);
  const { from, to } = await registerAll('hermes-scheduler', n, first, async (i) => {
    const record = createLoop({
      kind: 'loop',
      loopId: `b${i}`,
      sessionId: `bench-${i}`,
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
    const stored = await loops.put(record, 'any');
    await loops.arm(stored!, first);
  });
  const cpu = await cpuInWindow(from, to, redis);
  await sleep(to - Date.now() + 1500);
  reportRedisTime('hermes-scheduler', statsBefore, await commandStats(redis));
  if (workers <= 0)
    process.stderr.write(
      `  hermes-scheduler: worker CPU ${(cpu.ownMs / (n * SECONDS)).toFixed(3)} ms per due tick (this process, in the window)\n`,
    );
  const sessions = sessionStoreFor(config, redis, keys);
  const lateness: number[] = [];
  const stamped: number[] = [];
  for (let i = 0; i < n; i++) {
    for (const e of await sessions.readEvents(`bench-${i}`, '0', { count: 100_000 })) {
      if (e.type !== 'reply') continue;
      const due = Number(e.data.dueAt);
      if (due < from || due >= to) continue;
      lateness.push(Number(String(e.data.text).slice('ok '.length)) - due);
      stamped.push(Number(e.data.startedAt) - due);
    }
  }
  await stopWorkers();
  await queues.ticks.obliterate({ force: true });
  await queues.close();
  redis.disconnect();
  qconn.disconnect();
  rmSync(home, { recursive: true, force: true });
  return { turn: stats(lateness, SECONDS * 1000, cpu.redisUs), stamped: stats(stamped, SECONDS * 1000, cpu.redisUs) };
}

async function benchRaw(url: string, n: number, concurrency: number): Promise<Stats> {
  const prefix = `{bench-r${n}-${concurrency}}`;
  const conn = openRedisClient({ kind: 'single', url }, 'bullmq');
  const queue = new Queue('raw', { connection: conn, prefix });
  const lateness: number[] = [];
  const first = nextAligned(2000);
  let window = { from: Infinity, to: -Infinity };
  const workerConn = openRedisClient({ kind: 'single', url }, 'bullmq');
  const worker = new Worker(
    'raw',
    async (job: Job) => {
      const started = Date.now();
      const due = schedulerJobMillis(job.id)!;
      if (due >= window.from && due < window.to) lateness.push(started - due);
    },
    { connection: workerConn, prefix, concurrency, ...JOB_RETENTION },
  );
  const statsBefore = await commandStats(conn);
  window = await registerAll(`raw BullMQ c=${concurrency}`, n, first, async (i) => {
    await queue.upsertJobScheduler(`raw-${i}`, { every: 1000, startDate: first }, { name: 'tick', data: { i } });
  });
  const { from, to } = window;
  const cpu = await cpuInWindow(from, to, conn);
  await sleep(to - Date.now() + 1500);
  process.stderr.write(
    `  raw BullMQ c=${concurrency}: worker CPU ${(cpu.ownMs / (n * SECONDS)).toFixed(3)} ms per due tick (this process, in the window)\n`,
  );
  reportRedisTime(`raw BullMQ c=${concurrency}`, statsBefore, await commandStats(conn));
  await worker.close(true);
  await queue.obliterate({ force: true });
  await queue.close();
  conn.disconnect();
  workerConn.disconnect();
  return stats(lateness, SECONDS * 1000, cpu.redisUs);
}

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'hermes-bench-redis-'));
  const redis = await startEmbeddedRedis({ dir, appendonly: false });
  const rows: string[] = [];
  const fmt = (s: Stats) => `${s.p50} | ${s.p99} | ${s.max} | ${s.perSecond.toFixed(1)} | ${s.redisUsPerTick.toFixed(0)}`;
  const procs = WORKERS > 0 ? `, ${WORKERS} worker process(es)` : '';
  try {
    for (const n of SIZES) {
      process.stderr.write(`n=${n}: load average ${load()}\n`);
      const raw1 = JSON_OUT ? undefined : await benchRaw(redis.url, n, 1);
      process.stderr.write(`n=${n}: raw BullMQ, concurrency ${CONCURRENCY}\n`);
      const rawC = await benchRaw(redis.url, n, CONCURRENCY);
      process.stderr.write(`n=${n}: hermes-scheduler${procs}\n`);
      const { turn: product, stamped } = await benchProduct(redis.url, n, PRODUCT);
      process.stderr.write(`n=${n} done; load average ${load()}\n`);
      if (JSON_OUT) {
        console.log(
          JSON.stringify({
            n,
            product_p50_ms: product.p50,
            product_p99_ms: product.p99,
            product_stamped_p50_ms: stamped.p50,
            product_stamped_p99_ms: stamped.p99,
            raw_p50_ms: rawC.p50,
            raw_p99_ms: rawC.p99,
            product_ticks_per_s: product.perSecond,
            raw_ticks_per_s: rawC.perSecond,
            due_ticks_per_s: n,
            product_redis_cpu_us_per_tick: Math.round(product.redisUsPerTick),
            raw_redis_cpu_us_per_job: Math.round(rawC.redisUsPerTick),
          }),
        );
        continue;
      }
      rows.push(`| ${n} | raw BullMQ, concurrency 1 | ${fmt(raw1!)} |`);
      rows.push(`| ${n} | raw BullMQ, concurrency ${CONCURRENCY} | ${fmt(rawC)} |`);
      const settings =
        [
          PRODUCT.concurrency !== undefined ? `concurrency ${PRODUCT.concurrency}` : '',
          PRODUCT.leadMs !== undefined ? `lead ${PRODUCT.leadMs} ms` : '',
        ]
          .filter(Boolean)
          .join(', ') || 'defaults';
      rows.push(`| ${n} | hermes-scheduler, ${settings}${procs} | ${fmt(product)} |`);
      if (TUNED.length === 2) {
        process.stderr.write(`n=${n}: hermes-scheduler tuned\n`);
        const { turn: tuned } = await benchProduct(redis.url, n, { concurrency: TUNED[0], leadMs: TUNED[1] });
        rows.push(`| ${n} | hermes-scheduler, concurrency ${TUNED[0]}, lead ${TUNED[1]} ms${procs} | ${fmt(tuned)} |`);
      }
      const ratio = (a: number, b: number) => (b > 0 ? (a / b).toFixed(2) : a === 0 ? '1.00' : '∞');
      rows.push(
        `| ${n} | ratio hermes / raw (c=1), p50 · p99 · throughput · Redis CPU | ${ratio(product.p50, raw1!.p50)} | ${ratio(product.p99, raw1!.p99)} | | ${ratio(product.perSecond, raw1!.perSecond)} | ${ratio(product.redisUsPerTick, raw1!.redisUsPerTick)} |`,
      );
      rows.push(
        `| ${n} | ratio hermes / raw (c=${CONCURRENCY}), p50 · p99 · throughput · Redis CPU | ${ratio(product.p50, rawC.p50)} | ${ratio(product.p99, rawC.p99)} | | ${ratio(product.perSecond, rawC.perSecond)} | ${ratio(product.redisUsPerTick, rawC.redisUsPerTick)} |`,
      );
    }
  } finally {
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  if (JSON_OUT) return;
  console.log(
    `Tick lateness, ${SECONDS} s window after ${WARMUP_MS / 1000} s warm-up, aligned 1 s schedules (ms; ticks/s; Redis CPU µs per tick)\n`,
  );
  console.log('| loops | path | p50 | p99 | max | ticks/s | Redis CPU µs/tick |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) console.log(r);
}

const child = args.indexOf('--child-worker');
(child >= 0 ? childWorker(args[child + 1]!) : main()).catch((err: Error) => {
  console.error(err);
  process.exitCode = 1;
});
