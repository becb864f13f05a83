/**
 * Benchmark (not a test): what held ticks cost a worker, on a private `redis-server` started for
 * the run.
 *
 *   npx tsx ops/bench/held-ticks.ts [--held 4096] [--lead-ms 10000] [--json]
 *
 * `--held` N loops whose ticks are all released at the same instant, `--lead-ms` before they are
 * due (the worker's `worker.prefetch_lead_ms`; `worker.max_held_ticks` is set to N), and one worker
 * process (a child started with `--expose-gc`) that fetches and holds them. Measured in the worker:
 * - fetch: from the release until all N are held (how long a lead a burst of N needs);
 * - memory per held tick: heap used and resident memory after a full GC with the N held, minus the
 *   same before the release (the same idle worker: the baseline of the same run), divided by N;
 * - hand-back: from `drain()` until every held tick is back in the queue.
 * Last line with `--json`: {"held","fetch_ms","heap_bytes_per_held_tick","rss_bytes_per_held_tick","hand_back_ms"}.
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, type HermesConfig } from '../../scheduler/config/config.ts';
import { createLogger } from '../../scheduler/logger.ts';
import { Keys } from '../../scheduler/store/keys.ts';
import { openRedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { createLoop } from '../../scheduler/loop/loop-state.ts';
import { loopStoreFor, openQueues } from '../../scheduler/services.ts';
import { startEmbeddedRedis } from '../../scheduler/store/redis/embedded-redis.ts';
import { WorkerProcess } from '../../worker/worker-process.ts';
import { runBench } from './bench-support.ts';

const args = process.argv.slice(2);
const arg = (name: string, def: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : def;
};
/** In the worker child, the parent's values come with its spec (`--child-worker`). */
const childSpec = args.includes('--child-worker')
  ? (JSON.parse(args[args.indexOf('--child-worker') + 1]!) as { held: number; leadMs: number })
  : undefined;
const HELD = childSpec?.held ?? Number(arg('held', '4096'));
const LEAD_MS = childSpec?.leadMs ?? Number(arg('lead-ms', '10000'));
const JSON_OUT = args.includes('--json');
const PREFIX = '{bench-held}';

function benchConfig(home: string): HermesConfig {
  return loadConfig({
    env: { HERMES_HOME: home },
    overrides: {
      'redis.prefix': PREFIX,
      log_level: 'silent',
      'loops.max_ticks': 0,
      'worker.prefetch_lead_ms': LEAD_MS,
      'worker.max_held_ticks': HELD,
    },
  });
}

/** What the worker child measures. */
interface ChildReport {
  fetchMs: number;
  heapPerTick: number;
  rssPerTick: number;
  handBackMs: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** Heap used and RSS after a full collection. */
async function settledMemory(): Promise<{ heap: number; rss: number }> {
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let i = 0; i < 3; i++) {
    gc?.();
    await sleep(50);
  }
  const m = process.memoryUsage();
  return { heap: m.heapUsed, rss: m.rss };
}

/** Child mode: the worker; told the release time, it measures and reports, then exits. */
async function childWorker(spec: string): Promise<void> {
  const { url, home } = JSON.parse(spec) as { url: string; home: string };
  const config = benchConfig(home);
  const wp = await WorkerProcess.start({ config, redisUrl: url, log: createLogger({ level: 'silent' }) });
  const { admission } = wp.deps.turns;
  process.on('message', (msg: { releaseAt: number }) => {
    void (async () => {
      await sleep(msg.releaseAt - Date.now() - 1000);
      const before = await settledMemory();
      while (admission.held < HELD) await sleep(2);
      const fetchMs = Date.now() - msg.releaseAt;
      const after = await settledMemory();
      const drainedAt = Date.now();
      const drained = wp.drain();
      while (admission.all().length > 0) await sleep(2);
      const handBackMs = Date.now() - drainedAt;
      await drained;
      const report: ChildReport = {
        fetchMs,
        heapPerTick: (after.heap - before.heap) / HELD,
        rssPerTick: (after.rss - before.rss) / HELD,
        handBackMs,
      };
      process.send!(report, () => process.exit(0));
    })();
  });
  process.send!('ready');
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'hermes-bench-held-'));
  const redisServer = await startEmbeddedRedis({ dir, appendonly: false });
  const config = benchConfig(dir);
  const redis = openRedisClient({ kind: 'single', url: redisServer.url }, 'commands');
  const qconn = openRedisClient({ kind: 'single', url: redisServer.url }, 'bullmq');
  const keys = new Keys(PREFIX);
  const queues = openQueues(keys, qconn);
  const loops = loopStoreFor(config, { redis, keys, queues });
  process.stderr.write(
    `held ticks: ${HELD} released together, lead ${LEAD_MS} ms; load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}\n`,
  );
  const child = fork(
    fileURLToPath(import.meta.url),
    ['--child-worker', JSON.stringify({ url: redisServer.url, home: dir, held: HELD, leadMs: LEAD_MS })],
    {
      stdio: 'inherit',
      execArgv: [...process.execArgv, '--expose-gc'],
    },
  );
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('message', () => resolve());
      child.once('exit', (code) => reject(new Error(`worker process exited (${code}) before it was ready`)));
    });
    // Registered well before the release (every job waits delayed until then), so the release is one instant.
    const releaseAt = Date.now() + 8_000 + HELD * 3;
    const reported = new Promise<ChildReport>((resolve) => child.once('message', (m) => resolve(m as ChildReport)));
    child.send({ releaseAt });
    const started = Date.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < HELD) {
          const i = next++;
          const record = createLoop({
            kind: 'loop',
            loopId: `h${i}`,
            sessionId: `held-${i}`,
            prompt: 'p',
            intervalSeconds: 3600,
            times: null,
            until: null,
            maxTicks: 0,
            selfPacedFloorSeconds: 60,
            runner: { kind: 'agent' },
            origin: { surface: 'cli' },
            now: Date.now(),
          });
          await loops.arm((await loops.put(record, 'any'))!, releaseAt + LEAD_MS);
        }
      }),
    );
    if (Date.now() > releaseAt - 1500)
      throw new Error(`registering ${HELD} loops took ${Date.now() - started} ms: past the release; run with fewer`);
    const r = await reported;
    const result = {
      held: HELD,
      fetch_ms: r.fetchMs,
      heap_bytes_per_held_tick: Math.round(r.heapPerTick),
      rss_bytes_per_held_tick: Math.round(r.rssPerTick),
      hand_back_ms: r.handBackMs,
    };
    if (!JSON_OUT) {
      console.log(`| held ticks | fetched in (ms) | heap per held tick | RSS per held tick | handed back in (ms) |`);
      console.log(`|---|---|---|---|---|`);
      console.log(
        `| ${HELD} | ${r.fetchMs} | ${result.heap_bytes_per_held_tick} B | ${result.rss_bytes_per_held_tick} B | ${r.handBackMs} |`,
      );
    }
    console.log(JSON.stringify(result));
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await queues.ticks.obliterate({ force: true }).catch(() => {});
    await queues.close();
    redis.disconnect();
    qconn.disconnect();
    await redisServer.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const child = args.indexOf('--child-worker');
if (child >= 0) {
  childWorker(args[child + 1]!).catch((err: Error) => {
    console.error(err);
    process.exit(1);
  });
} else {
  runBench(main);
}
