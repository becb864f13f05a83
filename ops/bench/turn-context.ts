/**
 * Benchmark (not a test): what a long-running loop's turns send the model, on a
 * private Redis started for the run (never 127.0.0.1:6379), against the local
 * model server that counts tokens (o200k) and refuses a request over its window:
 *
 *   npx tsx ops/bench/turn-context.ts [--ticks 500] [--window 32000] [--json]
 *
 * A loop whose every tick calls `read_file` on a 12 KB CI log (two model calls
 * per tick: the tool call, then the answer) runs `--ticks` ticks through the
 * real worker (BullMQ job scheduler, claim, turn, commit), twice in the same run:
 * - compaction on (the product): `agent.context_window_tokens` = the server's window;
 * - the naive path (every tick sends the whole transcript, capped only by
 *   `worker.transcript_max_messages`): the same product with a window too large to
 *   ever compact, against a server with no window; its first request over the
 *   window is the tick a real model of that window would have refused.
 * Then a `--watch read_file:` loop over an unchanged file: model calls per unchanged tick.
 *
 * Reports input tokens per tick at ticks 10, 100 and the last (the tick's calls,
 * summaries included), model calls per tick, requests refused for length, and
 * the total input tokens of both paths. Last line with `--json`:
 * {"ticks","input_tokens_tick10","input_tokens_tick100","input_tokens_tick500","refused",
 *  "total_input_tokens","naive_total_input_tokens","naive_first_refused_tick",
 *  "watch_unchanged_model_calls_per_tick"}
 * Targets (docs/BENCHMARKS.md): tick-500 input ≤ 1.25 × tick-10 input; 0 refused; total input
 * ≥ 90 % below the naive path's; 0 model calls per unchanged watch tick.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, type HermesConfig } from '../../scheduler/config/config.ts';
import { createLogger } from '../../scheduler/logger.ts';
import { topologyFromConfig, openRedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { startEmbeddedRedis } from '../../scheduler/store/redis/embedded-redis.ts';
import { loopServiceFor, loopStoreFor, openQueues } from '../../scheduler/services.ts';
import { Keys } from '../../scheduler/store/keys.ts';
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from '../../test/support/fake-openai.ts';
import { WorkerProcess } from '../../worker/worker-process.ts';
import { runBench } from './bench-support.ts';

const args = process.argv.slice(2);
const arg = (name: string, def: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : def;
};
const TICKS = Number(arg('ticks', '500'));
const WINDOW = Number(arg('window', '32000'));
const JSON_OUT = args.includes('--json');
const WATCH_TICKS = 20;
/** Seconds between ticks: the worker runs them back to back (a tick that overruns coalesces the next). */
const INTERVAL_SECONDS = 0.1;

function ciLog(kb: number): string {
  const lines: string[] = [];
  for (let i = 0; lines.join('\n').length < kb * 1024; i++) {
    lines.push(
      `2026-12-01T02:${String(i % 60).padStart(2, '0')}:00Z [step ${i}] compiling module pkg/service-${i % 37}/handler.go ... ok (${(i * 7) % 1000} ms)`,
    );
  }
  lines.push('BUILD STATUS: running');
  return lines.join('\n');
}

const isSummary = (req: RecordedRequest) => req.tools.length === 0 && /summar/i.test(req.messages[0]?.content ?? '');
const tickOf = (req: RecordedRequest) => {
  const user = [...req.messages].reverse().find((m) => m.role === 'user');
  const m = /(?:Loop wakeup|Heartbeat) #(\d+)/.exec(user?.content ?? '');
  return m ? Number(m[1]) : undefined;
};

/** The CI watcher model: read the log, then say how the build stands; summaries on request. */
function ciModel(model: FakeOpenAI, path: string): void {
  model.respond((req) => {
    if (isSummary(req))
      return 'Summary: the loop read the CI log at every tick; each time the build was still running; nothing else happened.';
    const last = req.messages[req.messages.length - 1]!;
    if (last.role === 'tool') return `Checked: ${/BUILD STATUS: (\w+)/.exec(last.content)?.[1] ?? 'unknown'}.`;
    return { toolCalls: [{ name: 'read_file', arguments: { path } }] };
  });
}

interface Run {
  perTick: Map<number, { input: number; calls: number }>;
  refused: number;
  total: number;
  calls: number;
}

/** Per tick: the input tokens and calls of its requests (a summary belongs to the tick whose turn follows it). */
function perTick(model: FakeOpenAI): Run {
  const perTick = new Map<number, { input: number; calls: number }>();
  let pending = { input: 0, calls: 0 };
  for (const r of model.requests) {
    if (isSummary(r)) {
      pending = { input: pending.input + r.promptTokens, calls: pending.calls + 1 };
      continue;
    }
    const t = tickOf(r)!;
    const cur = perTick.get(t) ?? { input: 0, calls: 0 };
    perTick.set(t, { input: cur.input + r.promptTokens + pending.input, calls: cur.calls + 1 + pending.calls });
    pending = { input: 0, calls: 0 };
  }
  return {
    perTick,
    refused: model.refusedForLength,
    total: model.requests.filter((r) => !r.refusedForLength).reduce((n, r) => n + r.promptTokens, 0),
    calls: model.requests.length,
  };
}

async function runLoop(
  redisUrl: string,
  home: string,
  root: string,
  prefix: string,
  overrides: Record<string, unknown>,
  model: FakeOpenAI,
  loop: { ticks: number; watch?: string },
): Promise<void> {
  const config: HermesConfig = loadConfig({
    env: { HERMES_HOME: home },
    overrides: {
      'redis.url': redisUrl,
      'redis.prefix': prefix,
      log_level: 'silent',
      'agent.base_url': model.baseUrl,
      'agent.api_key': 'bench',
      'agent.max_retries': 0,
      'tools.files.roots': [root],
      'loops.max_ticks': 0,
      'worker.prefetch_lead_ms': 50,
      ...overrides,
    },
  });
  const log = createLogger({ level: 'silent' });
  const worker = await WorkerProcess.start({ config, topology: topologyFromConfig(config), log });
  const topology = topologyFromConfig(config);
  const redis = openRedisClient(topology, 'commands');
  const queueConn = openRedisClient(topology, 'bullmq');
  const keys = new Keys(config.redis.prefix, { shards: config.redis.shards });
  const queues = openQueues(keys, queueConn);
  const loops = loopStoreFor(config, { redis, keys, queues });
  const schedules = loopServiceFor(config, loops, log);
  try {
    await schedules.set(
      'bench',
      'loop',
      {
        prompt: 'watch the CI build and tell me when it is green',
        intervalSeconds: INTERVAL_SECONDS,
        times: loop.ticks,
        until: null,
        notes: [],
        economy: loop.watch ? { watch: loop.watch } : {},
      },
      { origin: { surface: 'cli' }, runner: { kind: 'agent' } },
    );
    for (;;) {
      const r = await loops.get('bench', 'loop');
      if (r && r.status !== 'active') break;
      await new Promise((res) => setTimeout(res, 250));
    }
  } finally {
    await worker.drain();
    await queues.close();
    redis.disconnect();
    queueConn.disconnect();
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'hermes-bench-context-'));
  const redis = await startEmbeddedRedis({ dir: join(dir, 'redis'), appendonly: false });
  const root = join(dir, 'root');
  mkdirSync(root);
  const logPath = join(root, 'ci.log');
  writeFileSync(logPath, ciLog(12));
  writeFileSync(join(root, 'status.txt'), 'build 41: running\n');
  const compacted = await startFakeOpenAI({ usage: 'counted', contextWindow: WINDOW });
  const naive = await startFakeOpenAI({ usage: 'counted' });
  const watched = await startFakeOpenAI({ usage: 'counted', contextWindow: WINDOW });
  ciModel(compacted, logPath);
  ciModel(naive, logPath);
  watched.respond(() => 'Build 41 is still running.');
  const t0 = Date.now();
  try {
    await Promise.all([
      runLoop(redis.url, dir, root, '{bench-ctx-on}', { 'agent.context_window_tokens': WINDOW }, compacted, { ticks: TICKS }),
      runLoop(redis.url, dir, root, '{bench-ctx-naive}', { 'agent.context_window_tokens': 1_000_000_000 }, naive, { ticks: TICKS }),
      runLoop(redis.url, dir, root, '{bench-ctx-watch}', { 'agent.context_window_tokens': WINDOW }, watched, {
        ticks: WATCH_TICKS,
        watch: `read_file:${join(root, 'status.txt')}`,
      }),
    ]);
  } finally {
    await Promise.all([compacted.close(), naive.close(), watched.close()]);
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const on = perTick(compacted);
  const off = perTick(naive);
  const ticks = on.perTick.size;
  const at = (run: Run, t: number) => run.perTick.get(Math.min(t, ticks))?.input ?? 0;
  const naiveFirstOver = [...naive.requests].find((r) => !isSummary(r) && r.promptTokens > WINDOW);
  const watchUnchangedTicks = WATCH_TICKS - watched.requests.length;
  const result = {
    ticks,
    input_tokens_tick10: at(on, 10),
    input_tokens_tick100: at(on, 100),
    input_tokens_tick500: at(on, 500),
    refused: on.refused,
    total_input_tokens: on.total,
    naive_total_input_tokens: off.total,
    naive_first_refused_tick: naiveFirstOver ? tickOf(naiveFirstOver)! : null,
    watch_unchanged_model_calls_per_tick: watchUnchangedTicks > 0 ? (watched.requests.length - 1) / watchUnchangedTicks : null,
  };
  const n = (x: number) => x.toLocaleString('en-US');
  console.log(
    `turn context: ${ticks} ticks of a loop reading a 12 KB log, ${n(WINDOW)}-token window, ${((Date.now() - t0) / 1000).toFixed(0)} s\n`,
  );
  console.log("| | compaction on | naive (today's path before compaction) |");
  console.log('| --- | ---: | ---: |');
  for (const t of [10, 100, 500]) console.log(`| input tokens, tick ${Math.min(t, ticks)} | ${n(at(on, t))} | ${n(at(off, t))} |`);
  console.log(`| model calls per tick | ${(on.calls / ticks).toFixed(2)} | ${(off.calls / off.perTick.size).toFixed(2)} |`);
  console.log(`| requests refused for length | ${on.refused} | first over the window at tick ${result.naive_first_refused_tick ?? '—'} |`);
  console.log(`| total input tokens | ${n(on.total)} | ${n(off.total)} (${((1 - on.total / off.total) * 100).toFixed(1)} % saved) |`);
  console.log(
    `\n--watch over an unchanged file: ${watched.requests.length} model call(s) in ${WATCH_TICKS} ticks → ${result.watch_unchanged_model_calls_per_tick} calls per unchanged tick`,
  );
  const targets = [
    result.input_tokens_tick500 <= 1.25 * result.input_tokens_tick10,
    result.refused === 0,
    result.total_input_tokens <= 0.1 * result.naive_total_input_tokens,
    result.watch_unchanged_model_calls_per_tick === 0,
  ];
  console.log(`targets: ${targets.every(Boolean) ? 'all met' : `missed (${targets.map((ok) => (ok ? 'ok' : 'MISSED')).join(', ')})`}`);
  if (JSON_OUT) console.log(JSON.stringify(result));
}

runBench(main);
