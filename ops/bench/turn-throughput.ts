/**
 * Benchmark (not a test): how many slow agent turns a worker keeps up with at the defaults.
 *
 *   npx tsx ops/bench/turn-throughput.ts --loops 2000 --interval-seconds 60 --model-latency-ms 3000 --seconds 120 [--workers K] [--json]
 *
 * `--loops` N agent loops at `--interval-seconds` S, their due times spread evenly over the
 * interval (N / S ticks due per second), run through the real worker — job scheduler, held tick,
 * gate, claim, the real agent runner (the `openai` client) against the local model server of the
 * tests answering every call after `--model-latency-ms` L, commit — on a private `redis-server`
 * started for the run. `--workers` K worker processes (default 1), each a child process at the
 * product's defaults (`worker.*` untouched; only `agent.base_url` points at the local server).
 * The window of `--seconds` W starts once every loop is in place (plus a warm-up of 5 s).
 *
 * Reported for the occurrences due in the window: due ticks per second (N / S), ticks started per
 * second (an occurrence counts once), start lateness (start minus due; the start is when the turn's
 * model call reached the model server — each loop's prompt names the loop and its wakeup text the tick
 * number, so a request is matched to its occurrence; until 2026-12-05 it was the `tick.started` event's
 * stream id, the moment its claim ran, which a claim made ahead, `worker.claim_lead_ms`, puts before the
 * due time) p50 and p99, failed ticks (`tick.failed`), the most turns one worker ran at once (its `agent`
 * pool's peak) and the largest resident memory of a worker process. On stderr: the load average
 * before and after, registration time, each worker's peak and memory. Last line with `--json`:
 * {"loops","due_ticks_per_s","started_ticks_per_s","start_lateness_p50_ms","start_lateness_p99_ms",
 *  "peak_running_turns","failed","worker_rss_mb"}
 * Targets (docs/BENCHMARKS.md): 2,000 loops at 60 s with a 3 s model — ≥ 99 % of due ticks start,
 * p99 ≤ 1,000 ms, no failed turn; with `--workers 3`, three times the loops likewise.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, type HermesConfig } from '../../scheduler/config/config.ts';
import { createLogger } from '../../scheduler/logger.ts';
import { Keys } from '../../scheduler/store/keys.ts';
import { openRedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { createLoop } from '../../scheduler/loop/loop-state.ts';
import { loopStoreFor, sessionStoreFor, openQueues } from '../../scheduler/services.ts';
import { startEmbeddedRedis } from '../../scheduler/store/redis/embedded-redis.ts';
import { startFakeOpenAI } from '../../test/support/fake-openai.ts';
import { WorkerProcess } from '../../worker/worker-process.ts';
import { percentiles, runBench } from './bench-support.ts';

const args = process.argv.slice(2);
const arg = (name: string, def: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : def;
};
const LOOPS = Number(arg('loops', '2000'));
const INTERVAL_S = Number(arg('interval-seconds', '60'));
const LATENCY_MS = Number(arg('model-latency-ms', '3000'));
const SECONDS = Number(arg('seconds', '120'));
const WORKERS = Math.max(1, Number(arg('workers', '1')));
const JSON_OUT = args.includes('--json');
/** After the last loop is in place, before the window. */
const WARMUP_MS = 5000;
/** Schedules registered at once. */
const REGISTER_PARALLEL = 32;
const PREFIX = '{bench-turns}';

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** The product's configuration, defaults everywhere but the model endpoint and the key space. */
function benchConfig(home: string, baseUrl: string): HermesConfig {
  return loadConfig({
    env: { HERMES_HOME: home },
    overrides: { 'redis.prefix': PREFIX, log_level: 'silent', 'loops.max_ticks': 0, 'agent.base_url': baseUrl, 'agent.api_key': 'bench' },
  });
}

/** What a worker child reports when it stops. */
interface WorkerReport {
  pid: number;
  peakAgentTurns: number;
  peakCommandTurns: number;
  rssMb: number;
}

/** Child mode: one worker process at the defaults; `ready` once started; on `stop`, its report, then drain and exit. */
async function childWorker(spec: string): Promise<void> {
  const { url, home, baseUrl } = JSON.parse(spec) as { url: string; home: string; baseUrl: string };
  const config = benchConfig(home, baseUrl);
  const wp = await WorkerProcess.start({ config, redisUrl: url, log: createLogger({ level: 'silent' }) });
  let rss = process.memoryUsage().rss;
  const sampler = setInterval(() => (rss = Math.max(rss, process.memoryUsage().rss)), 500);
  process.on('message', (msg) => {
    if (msg !== 'stop') return;
    clearInterval(sampler);
    const { slots } = wp.deps.turns;
    const report: WorkerReport = {
      pid: process.pid,
      peakAgentTurns: slots.peak('agent'),
      peakCommandTurns: slots.peak('command'),
      rssMb: rss / 2 ** 20,
    };
    process.send!(report, () => {
      void wp.drain().finally(() => process.exit(0));
    });
  });
  process.send!('ready');
}

async function startWorkers(
  url: string,
  home: string,
  baseUrl: string,
): Promise<{ children: ChildProcess[]; stop(): Promise<WorkerReport[]> }> {
  const children: ChildProcess[] = [];
  await Promise.all(
    Array.from({ length: WORKERS }, async () => {
      const child = fork(fileURLToPath(import.meta.url), ['--child-worker', JSON.stringify({ url, home, baseUrl })], { stdio: 'inherit' });
      children.push(child);
      await new Promise<void>((resolve, reject) => {
        child.once('message', () => resolve());
        child.once('exit', (code) => reject(new Error(`worker process exited (${code}) before it was ready`)));
      });
    }),
  );
  return {
    children,
    async stop() {
      return await Promise.all(
        children.map(
          (c) =>
            new Promise<WorkerReport>((resolve) => {
              c.once('message', (m) => resolve(m as WorkerReport));
              c.send('stop');
            }),
        ),
      );
    },
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'hermes-bench-turns-'));
  const redisServer = await startEmbeddedRedis({ dir, appendonly: false });
  const model = await startFakeOpenAI();
  model.respond(() => ({ delayMs: LATENCY_MS, text: 'Checked: nothing changed.' }));
  const config = benchConfig(dir, model.baseUrl);
  const redis = openRedisClient({ kind: 'single', url: redisServer.url }, 'commands');
  const qconn = openRedisClient({ kind: 'single', url: redisServer.url }, 'bullmq');
  const keys = new Keys(PREFIX);
  const queues = openQueues(keys, qconn);
  const loops = loopStoreFor(config, { redis, keys, queues });
  const sessions = sessionStoreFor(config, redis, keys);
  process.stderr.write(
    `turn throughput: ${LOOPS} agent loops every ${INTERVAL_S} s, model latency ${LATENCY_MS} ms, ${WORKERS} worker process(es), ${SECONDS} s window; load average ${load()}\n`,
  );
  const workers = await startWorkers(redisServer.url, dir, model.baseUrl);
  let reports: WorkerReport[] = [];
  try {
    // Due times spread evenly over the interval, from a little after registration ends (estimated generously).
    const intervalMs = INTERVAL_S * 1000;
    const first = Date.now() + 10_000 + LOOPS * 2;
    const offsetOf = (i: number) => Math.floor((i * intervalMs) / LOOPS);
    const started = Date.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(REGISTER_PARALLEL, LOOPS) }, async () => {
        while (next < LOOPS) {
          const i = next++;
          const record = createLoop({
            kind: 'loop',
            loopId: `t${i}`,
            sessionId: `turns-${i}`,
            prompt: `check the build of loop ${i}`,
            intervalSeconds: INTERVAL_S,
            times: null,
            until: null,
            maxTicks: 0,
            selfPacedFloorSeconds: config.loops.self_paced_floor_seconds,
            runner: { kind: 'agent' },
            origin: { surface: 'cli' },
            now: Date.now(),
          });
          const stored = await loops.put(record, 'any');
          await loops.arm(stored!, first + offsetOf(i));
        }
      }),
    );
    const from = Math.max(first, Date.now()) + WARMUP_MS;
    const to = from + SECONDS * 1000;
    process.stderr.write(
      `  ${LOOPS} loops registered in ${Date.now() - started} ms; window starts ${from - first} ms after the first due time\n`,
    );
    // Every occurrence due in the window has started (or failed to) well after its end.
    await sleep(to - Date.now() + LATENCY_MS + 5_000);
    reports = await workers.stop();
    process.stderr.write(`  load average after: ${load()}\n`);
    for (const r of reports)
      process.stderr.write(
        `  worker ${r.pid}: peak ${r.peakAgentTurns} agent turns, ${r.peakCommandTurns} command turns at once; max RSS ${r.rssMb.toFixed(1)} MB\n`,
      );

    let due = 0;
    let failed = 0;
    // The due time of each occurrence, by loop and tick number (from its `tick.started` event).
    const dueOf = new Map<string, number>();
    for (let i = 0; i < LOOPS; i++) {
      // Occurrences of loop i in the window: first + offset + k × interval.
      const o = first + offsetOf(i);
      due += Math.max(0, Math.ceil((to - o) / intervalMs) - Math.max(0, Math.ceil((from - o) / intervalMs)));
      for (const e of await sessions.readEvents(`turns-${i}`, '0', { count: 100_000 })) {
        const dueAt = Number(e.data.dueAt);
        if (!(dueAt >= from && dueAt < to)) continue;
        if (e.type === 'tick.started') dueOf.set(`${i}#${String(e.data.tick)}`, dueAt);
        if (e.type === 'tick.failed') failed++;
      }
    }
    // Started = its model call reached the model server; an occurrence counts once.
    const lateness: number[] = [];
    const seen = new Set<string>();
    for (const req of model.requests) {
      const text = req.messages.at(-1)?.content ?? '';
      const tick = /wakeup #(\d+)/.exec(text)?.[1];
      const loop = /check the build of loop (\d+)/.exec(text)?.[1];
      const key = `${loop}#${tick}`;
      const dueAt = dueOf.get(key);
      if (dueAt === undefined || seen.has(key)) continue;
      seen.add(key);
      lateness.push(req.at - dueAt);
    }
    const p = lateness.length > 0 ? percentiles(lateness) : { p50: NaN, p99: NaN, max: NaN, count: 0 };
    const result = {
      loops: LOOPS,
      due_ticks_per_s: Number((due / SECONDS).toFixed(2)),
      started_ticks_per_s: Number((lateness.length / SECONDS).toFixed(2)),
      start_lateness_p50_ms: p.p50,
      start_lateness_p99_ms: p.p99,
      peak_running_turns: Math.max(...reports.map((r) => r.peakAgentTurns)),
      failed,
      worker_rss_mb: Number(Math.max(...reports.map((r) => r.rssMb)).toFixed(1)),
    };
    if (!JSON_OUT) {
      console.log(`Turn throughput: ${LOOPS} loops / ${INTERVAL_S} s, model ${LATENCY_MS} ms, ${WORKERS} worker(s), ${SECONDS} s window\n`);
      console.log(
        `| due ticks/s | started ticks/s | started / due | lateness p50 ms | p99 ms | max ms | peak turns (one worker) | failed | worker RSS MB |`,
      );
      console.log(`|---|---|---|---|---|---|---|---|---|`);
      console.log(
        `| ${result.due_ticks_per_s} | ${result.started_ticks_per_s} | ${((lateness.length / Math.max(1, due)) * 100).toFixed(1)} % | ${p.p50} | ${p.p99} | ${p.max} | ${result.peak_running_turns} | ${failed} | ${result.worker_rss_mb} |`,
      );
    }
    console.log(JSON.stringify(result));
  } finally {
    if (reports.length === 0) for (const c of workers.children) c.kill('SIGKILL');
    await queues.ticks.obliterate({ force: true }).catch(() => {});
    await queues.close();
    redis.disconnect();
    qconn.disconnect();
    await model.close();
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
