/**
 * Benchmark (not a test): the top of the hour — N cron jobs whose next occurrence is the same
 * instant, through hermes-scheduler and through raw BullMQ job schedulers with the same pattern,
 * in one run on one private Redis.
 *
 *   npx tsx ops/bench/top-of-hour.ts [--jobs 10000] [--agent-jobs 2000] [--model-latency-ms 3000] [--agent-turns <n>]
 *                                    [--workers 1] [--raw-concurrency 1000] [--no-raw] [--command-stats] [--script-stats]
 *                                    [--cpu-profile <file>] [--heap-profile <file>] [--profile-phase noop|agent]
 *                                    [--list-schedules 100000] [--json]
 *
 * It runs under the Node options `hermes` starts a worker with (those of the `#!` line of
 * cli/hermes.mjs): run without them, it runs itself again with them.
 *
 * Phase 1, no-op turns: N cron jobs (`S M H * * *` in UTC, all due at one instant T a little after
 * they are registered) run by one in-process `hermes worker` at the defaults, whose agent runner
 * answers at once and stamps its start, so the figures are the scheduling path (gate, claim,
 * commit); `--workers N` adds N − 1 worker processes (this script forked, the same runners), a fleet
 * sharing the burst. Then raw BullMQ: N job schedulers with the same kind of pattern, due at one instant,
 * a no-op processor at `--raw-concurrency`. Phase 2, agent turns: `--agent-jobs` cron jobs due
 * at one instant, the real agent runner against the local model server answering after
 * `--model-latency-ms` (0 jobs: skipped), on `worker.max_agent_turns` at its default or `--agent-turns`.
 *
 * Reports (stderr, and the last line with `--json`): `{"jobs", "started_p99_ms", "all_started_ms",
 * "all_committed_ms", "failed", "redis_cpu_us_per_occurrence", "raw_started_p99_ms",
 * "raw_all_started_ms", "raw_redis_cpu_us_per_job", "worker_cpu_ms_per_occurrence", "worker_cpu_ms_at_instant_per_occurrence",
 * "worker_rss_mb",
 * "agent_jobs", "agent_started_p99_ms", "agent_all_committed_ms", "agent_worker_rss_mb", "list_schedules", "list_page_p99_ms"}`.
 * - started: the turn's start (the runner called) minus the due instant; `all_started_ms` the last one;
 * - committed: a run record's commit (`CronStore.commitRun` resolved) minus the due instant;
 * - Redis CPU: `used_cpu_sys + used_cpu_user` of `INFO cpu` from 1 s before the first job of the burst
 *   is released (the instant less `cron.prefetch_lead_ms`; raw BullMQ: the instant) until every occurrence
 *   committed (raw: every job processed), divided by the occurrences;
 * - worker CPU and peak RSS: this process (the in-process worker, and little else; with `--workers`, the first
 *   worker's) over the same window; its CPU
 *   at the instant: from the due instant on only (what the occurrences cost once they wake, which decides the p99).
 * - list pages: last, on a Redis of their own, `--list-schedules` cron jobs and as many loops stored (0: skipped);
 *   the p99 of one page of `/api/cron/jobs`, `/api/sessions` and `hermes cron list`, the largest of the three
 *   (`./list-page-timing.ts`; `ops/bench/list-page.ts` prints each).
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { fork, type ChildProcess } from 'node:child_process';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue, Worker, type Job } from 'bullmq';
import { loadConfig, type HermesConfig } from '../../scheduler/config/config.ts';
import { createLogger } from '../../scheduler/logger.ts';
import { CronStore } from '../../scheduler/cron/cron-store.ts';
import { Keys } from '../../scheduler/store/keys.ts';
import { openRedisClient, type RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { JOB_RETENTION, schedulerJobMillis } from '../../scheduler/store/queues.ts';
import { cronServiceFor, openQueues } from '../../scheduler/services.ts';
import { startEmbeddedRedis } from '../../scheduler/store/redis/embedded-redis.ts';
import { WorkerProcess } from '../../worker/worker-process.ts';
import { RunnerFactory } from '../../worker/turn-runners/create-runner.ts';
import type { TurnRunner } from '../../worker/turn-runners/turn-runner.ts';
import { startFakeOpenAI } from '../../test/support/fake-openai.ts';
import { redisCpuSeconds, underLauncherNodeOptions } from './bench-support.ts';
import { listPageP99, timeListPages } from './list-page-timing.ts';

underLauncherNodeOptions();

const args = process.argv.slice(2);
const arg = (name: string, def: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : def;
};
const JOBS = Number(arg('jobs', '10000'));
const AGENT_JOBS = Number(arg('agent-jobs', '2000'));
const MODEL_LATENCY_MS = Number(arg('model-latency-ms', '3000'));
/** `worker.max_agent_turns` of the agent phase (empty: the default). */
const AGENT_TURNS = arg('agent-turns', '');
const RAW_CONCURRENCY = Number(arg('raw-concurrency', '1000'));
/** Worker processes of each burst: this one and `--workers` − 1 forked (`childWorker`). */
const WORKERS = Number(arg('workers', '1'));
const JSON_OUT = args.includes('--json');
/** Skip the raw BullMQ phase (while working on the product's path; its figures then read `null`). */
const NO_RAW = args.includes('--no-raw');
/** Write a CPU profile of this process over a burst (`--profile-phase`) to this file (`--cpu-profile <file>`); its `instantUs` is the due instant on the profile's clock. */
const CPU_PROFILE = arg('cpu-profile', '');
/**
 * Write V8's sampling heap profile of this process from a burst's (`--profile-phase`) due instant on to this file
 * (`--heap-profile <file>`, a .heapprofile): what the occurrences allocate once they wake, the objects
 * collected since included.
 */
const HEAP_PROFILE = arg('heap-profile', '');
/** The burst `--cpu-profile` and `--heap-profile` cover: `noop` (the default) or `agent`. */
const PROFILE_PHASE = arg('profile-phase', 'noop');
/** Print Redis' `INFO commandstats` of each burst: where Redis' time went, by command and script. */
const COMMAND_STATS = args.includes('--command-stats');
/**
 * Print Redis' time by script (BullMQ's and ours, by name) and command over each burst, from its slow log
 * at a threshold of 0 (`--script-stats`). The slow log costs Redis time of its own: a diagnosis, not a figure.
 */
const SCRIPT_STATS = args.includes('--script-stats');
/** Schedules stored for the list pages, timed last (`./list-page-timing.ts`; 0: skipped). */
const LIST_SCHEDULES = Number(arg('list-schedules', '100000'));
/** Jobs registered at once. */
const PARALLEL = 32;

const say = (text: string) => process.stderr.write(`${text}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** Commit times (epoch ms) of cron runs in this process, by `CronStore.commitRun`. */
const commits: number[] = [];
// eslint-disable-next-line @typescript-eslint/unbound-method -- called with its instance below
const commitRun = CronStore.prototype.commitRun;
CronStore.prototype.commitRun = async function (this: CronStore, ...a: Parameters<CronStore['commitRun']>) {
  const res = await commitRun.apply(this, a);
  commits.push(Date.now());
  return res;
};

/** Turn starts (epoch ms), stamped by the runners. */
const starts: number[] = [];

/** Runners whose agent answers at once (phase 1), stamping the turn's start. */
class NoopRunners extends RunnerFactory {
  constructor(config: HermesConfig) {
    super(config);
    const noop: TurnRunner = {
      kind: 'agent',
      run: async () => {
        starts.push(Date.now());
        return { reply: 'ok', steps: [] };
      },
    };
    (this as unknown as { agent: TurnRunner }).agent = noop;
  }
}

/** The real agent runner (phase 2), stamping the turn's start. */
class StampedRunners extends RunnerFactory {
  constructor(config: HermesConfig) {
    super(config);
    const agent = this.agent;
    const run = agent.run.bind(agent);
    agent.run = async (req) => {
      starts.push(Date.now());
      return await run(req);
    };
  }
}

function p(values: number[], q: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))]! : NaN;
}

/** `INFO commandstats` as `{ command: [calls, usec] }`. */
async function commandStats(redis: RedisClient): Promise<Map<string, [number, number]>> {
  const out = new Map<string, [number, number]>();
  for (const m of (await redis.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm))
    out.set(m[1]!, [Number(m[2]), Number(m[3])]);
  return out;
}

/** The commands that took Redis' time between two `commandStats` reads, per occurrence (stderr). */
function sayCommandStats(before: Map<string, [number, number]>, after: Map<string, [number, number]>, n: number): void {
  const rows = [...after].map(([cmd, [calls, usec]]) => {
    const [c0, u0] = before.get(cmd) ?? [0, 0];
    return { cmd, calls: calls - c0, usec: usec - u0 };
  });
  rows.sort((a, b) => b.usec - a.usec);
  for (const r of rows.filter((r) => r.calls > 0).slice(0, 12))
    say(`    ${r.cmd.padEnd(14)} ${(r.calls / n).toFixed(2).padStart(6)} calls  ${(r.usec / n).toFixed(1).padStart(7)} µs  per occurrence`);
}

/** Script names by SHA1: BullMQ's (`bullmq/dist/esm/scripts`) and this project's (`scheduler/store/redis/scripts`). */
async function scriptNames(): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  const sha = (lua: string) => createHash('sha1').update(lua).digest('hex');
  const bull = new URL('../../node_modules/bullmq/dist/esm/scripts/', import.meta.url);
  for (const f of readdirSync(bull).filter((f) => f.endsWith('.js') && f !== 'index.js')) {
    for (const v of Object.values((await import(new URL(f, bull).href)) as Record<string, { name?: string; content?: string }>))
      if (v?.content && v.name) names.set(sha(v.content), `bullmq ${v.name}`);
  }
  const ours = new URL('../../scheduler/store/redis/scripts/', import.meta.url);
  for (const f of readdirSync(ours)) names.set(sha(readFileSync(new URL(f, ours), 'utf8')), f.replace(/-\d+\.lua$/, ''));
  return names;
}

/** Start logging every command with its time (the slow log at 0 µs), emptied. */
async function startScriptStats(redis: RedisClient): Promise<void> {
  await redis.config('SET', 'slowlog-max-len', '4000000');
  await redis.config('SET', 'slowlog-log-slower-than', '0');
  await redis.slowlog('RESET');
}

/** Redis' time by script name and command since `startScriptStats`, per occurrence (stderr); stops the logging. */
async function sayScriptStats(redis: RedisClient, n: number): Promise<void> {
  await redis.config('SET', 'slowlog-log-slower-than', '10000');
  const entries = (await redis.slowlog('GET', '-1')) as Array<[number, number, number, string[]]>;
  await redis.slowlog('RESET');
  const names = await scriptNames();
  const rows = new Map<string, [number, number]>();
  for (const [, , usec, argv] of entries) {
    const cmd = argv[0]!.toLowerCase();
    const name = cmd === 'evalsha' ? (names.get(argv[1]!) ?? `script ${argv[1]!.slice(0, 8)}`) : cmd;
    const [calls, total] = rows.get(name) ?? [0, 0];
    rows.set(name, [calls + 1, total + usec]);
  }
  for (const [name, [calls, usec]] of [...rows].sort((a, b) => b[1][1] - a[1][1]).slice(0, 16))
    say(`    ${name.padEnd(26)} ${(calls / n).toFixed(2).padStart(6)} calls  ${(usec / n).toFixed(1).padStart(7)} µs  per occurrence`);
}

/** Start the V8 CPU profiler; the returned function stops it and answers the profile. */
async function startProfile(): Promise<() => Promise<unknown>> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  return async () => {
    const { profile } = await session.post('Profiler.stop');
    session.disconnect();
    return profile;
  };
}

/** The whole second at least `leadMs` from now, and its `S M H * * *` pattern in UTC. */
function instantAfter(leadMs: number): { at: number; pattern: string } {
  const at = Math.ceil((Date.now() + leadMs) / 1000) * 1000;
  const d = new Date(at);
  return { at, pattern: `${d.getUTCSeconds()} ${d.getUTCMinutes()} ${d.getUTCHours()} * * *` };
}

async function inParallel(n: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(PARALLEL, n) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

/** Register time for `n` jobs, measured on a first batch registered the same way, with room: the due instant must come after the last one. */
function leadFor(n: number, msPerJob: number): number {
  return Math.max(8000, Math.ceil(n * msPerJob * 2) + 8000);
}

interface Burst {
  jobs: number;
  startedP99: number;
  allStarted: number;
  allCommitted: number;
  failed: number;
  redisCpuUsPerOccurrence: number;
  workerCpuMsPerOccurrence: number;
  workerCpuAtInstantMsPerOccurrence: number;
  workerRssMb: number;
}

/** One burst of `n` cron jobs due at one instant through the product. */
async function productBurst(
  url: string,
  n: number,
  phase: 'noop' | 'agent',
  modelUrl?: string,
  overrides: Record<string, unknown> = {},
): Promise<Burst> {
  const prefix = `{bench-toh-${phase}}`;
  const home = mkdtempSync(join(tmpdir(), 'hermes-bench-'));
  const config = loadConfig({
    env: { HERMES_HOME: home },
    overrides: {
      'redis.prefix': prefix,
      log_level: 'silent',
      ...(modelUrl ? { 'agent.base_url': modelUrl, 'agent.api_key': 'bench', 'agent.model': 'bench' } : {}),
      ...overrides,
    },
  });
  const redis = openRedisClient({ kind: 'single', url }, 'commands');
  const qconn = openRedisClient({ kind: 'single', url }, 'bullmq');
  const queues = openQueues(new Keys(prefix), qconn);
  const cron = cronServiceFor(config, { redis, keys: new Keys(prefix), queues }, createLogger({ level: 'silent' }));
  const caller = { origin: { surface: 'cli' as const }, trusted: true };
  // The add rate decides how far ahead the instant must be.
  const probeStart = Date.now();
  const probe = Math.min(500, n);
  const probeAt = instantAfter(24 * 3600_000); // a day off: not due during the probe
  await inParallel(probe, async (i) => {
    await cron.add({ schedule: probeAt.pattern, tz: 'UTC', prompt: 'p', name: `probe-${i}` }, caller);
  });
  const msPerJob = (Date.now() - probeStart) / probe;
  for (let i = 0; i < probe; i++) await cron.remove(`probe-${i}`);
  // The burst's first jobs are released the prefetch lead before the instant: what it costs is measured from then.
  const releasedBeforeMs = config.cron.prefetch_lead_ms;
  const { at, pattern } = instantAfter(leadFor(n, msPerJob) + releasedBeforeMs);
  const registered = Date.now();
  await inParallel(n, async (i) => {
    await cron.add({ schedule: pattern, tz: 'UTC', prompt: `check ${i}`, name: `job-${i}` }, caller);
  });
  say(`  ${phase}: ${n} cron jobs registered in ${Date.now() - registered} ms; due at +${at - Date.now()} ms`);
  if (Date.now() > at - releasedBeforeMs - 2000)
    throw new Error('the jobs were registered too late for their instant; the machine is too busy');
  starts.length = 0;
  commits.length = 0;
  const wp = await WorkerProcess.start({
    config,
    redisUrl: url,
    log: createLogger({ level: 'silent' }),
    runners: phase === 'noop' ? new NoopRunners(config) : new StampedRunners(config),
  });
  const children = await Promise.all(Array.from({ length: WORKERS - 1 }, () => forkWorker({ url, prefix, phase, modelUrl, overrides })));
  await sleep(at - releasedBeforeMs - 1000 - Date.now());
  const cpu0 = await redisCpuSeconds(redis);
  const stats0 = COMMAND_STATS ? await commandStats(redis) : undefined;
  if (SCRIPT_STATS) await startScriptStats(redis);
  const profiler = CPU_PROFILE && phase === PROFILE_PHASE ? await startProfile() : undefined;
  const own0 = process.cpuUsage();
  let ownAt = own0;
  const heap = HEAP_PROFILE && phase === PROFILE_PHASE ? new Session() : undefined;
  const atTimer = setTimeout(() => {
    ownAt = process.cpuUsage();
    if (heap) {
      heap.connect();
      void heap.post('HeapProfiler.enable').then(() =>
        heap.post('HeapProfiler.startSampling', {
          samplingInterval: 4096,
          includeObjectsCollectedByMajorGC: true,
          includeObjectsCollectedByMinorGC: true,
        }),
      );
    }
  }, at - Date.now());
  let rss = process.memoryUsage.rss();
  const rssTimer = setInterval(() => (rss = Math.max(rss, process.memoryUsage.rss())), 100);
  const deadline = at + 120_000 + (phase === 'agent' ? MODEL_LATENCY_MS * 4 : 0);
  while (commits.length < n && Date.now() < deadline) await sleep(50);
  const cpu1 = await redisCpuSeconds(redis);
  const own = process.cpuUsage(own0);
  const ownFromInstant = process.cpuUsage(ownAt);
  if (heap) {
    writeFileSync(HEAP_PROFILE, JSON.stringify((await heap.post('HeapProfiler.stopSampling')).profile));
    heap.disconnect();
  }
  clearTimeout(atTimer);
  if (profiler) {
    // The instant on the profile's clock (µs, monotonic like process.hrtime), to split its samples there.
    const instantUs = Number(process.hrtime.bigint() / 1000n) - (Date.now() - at) * 1000;
    writeFileSync(CPU_PROFILE, JSON.stringify({ ...((await profiler()) as object), instantUs }));
  }
  if (stats0) sayCommandStats(stats0, await commandStats(redis), n);
  if (SCRIPT_STATS) await sayScriptStats(redis, n);
  clearInterval(rssTimer);
  const failed = (await wp.metrics.turns.get()).values.filter((v) => v.labels.outcome === 'failed').reduce((t, v) => t + v.value, 0);
  await wp.drain();
  const childFailed = (await Promise.all(children.map(stopWorker))).reduce((t, f) => t + f, 0);
  await queues.ticks.obliterate({ force: true }).catch(() => undefined);
  await queues.close();
  redis.disconnect();
  qconn.disconnect();
  rmSync(home, { recursive: true, force: true });
  const lateness = starts.map((s) => s - at);
  say(
    `    started p1/p10/p50/p90: ${[0.01, 0.1, 0.5, 0.9].map((q) => p(lateness, q)).join('/')} ms; committed p10/p50: ${[0.1, 0.5].map((q) => p(commits, q) - at).join('/')} ms`,
  );
  return {
    jobs: n,
    startedP99: p(lateness, 0.99),
    allStarted: Math.max(...lateness),
    allCommitted: commits.length === n ? Math.max(...commits) - at : NaN,
    failed: failed + childFailed + (n - commits.length),
    redisCpuUsPerOccurrence: ((cpu1 - cpu0) * 1e6) / n,
    workerCpuMsPerOccurrence: (own.user + own.system) / 1000 / n,
    workerCpuAtInstantMsPerOccurrence: (ownFromInstant.user + ownFromInstant.system) / 1000 / n,
    workerRssMb: rss / 1024 / 1024,
  };
}

/** The same burst through raw BullMQ: `n` job schedulers with one instant's pattern, a no-op processor. */
async function rawBurst(url: string, n: number): Promise<{ startedP99: number; allStarted: number; redisCpuUsPerJob: number }> {
  const prefix = '{bench-toh-raw}';
  const conn = openRedisClient({ kind: 'single', url }, 'bullmq');
  const workerConn = openRedisClient({ kind: 'single', url }, 'bullmq');
  const redis = openRedisClient({ kind: 'single', url }, 'commands');
  const queue = new Queue('raw', { connection: conn, prefix });
  const probeStart = Date.now();
  await inParallel(Math.min(500, n), async (i) => {
    await queue.upsertJobScheduler(`probe-${i}`, { pattern: instantAfter(24 * 3600_000).pattern, tz: 'UTC' }, { name: 'tick' });
  });
  const msPerJob = (Date.now() - probeStart) / Math.min(500, n);
  for (let i = 0; i < Math.min(500, n); i++) await queue.removeJobScheduler(`probe-${i}`);
  const { at, pattern } = instantAfter(leadFor(n, msPerJob));
  await inParallel(n, async (i) => {
    await queue.upsertJobScheduler(`raw-${i}`, { pattern, tz: 'UTC' }, { name: 'tick', data: { i } });
  });
  if (Date.now() > at - 2000) throw new Error('raw BullMQ: the schedulers were registered too late for their instant');
  const started: number[] = [];
  const worker = new Worker(
    'raw',
    async (job: Job) => {
      const due = schedulerJobMillis(job.id);
      if (due === at) started.push(Date.now() - at);
    },
    { connection: workerConn, prefix, concurrency: RAW_CONCURRENCY, ...JOB_RETENTION },
  );
  await sleep(at - 1000 - Date.now());
  const cpu0 = await redisCpuSeconds(redis);
  const stats0 = COMMAND_STATS ? await commandStats(redis) : undefined;
  if (SCRIPT_STATS) await startScriptStats(redis);
  while (started.length < n && Date.now() < at + 120_000) await sleep(50);
  await sleep(200); // the last jobs' completion
  const cpu1 = await redisCpuSeconds(redis);
  if (stats0) sayCommandStats(stats0, await commandStats(redis), n);
  if (SCRIPT_STATS) await sayScriptStats(redis, n);
  await worker.close(true);
  await queue.obliterate({ force: true });
  await queue.close();
  conn.disconnect();
  workerConn.disconnect();
  redis.disconnect();
  return { startedP99: p(started, 0.99), allStarted: Math.max(...started), redisCpuUsPerJob: ((cpu1 - cpu0) * 1e6) / n };
}

/** What a forked worker is told: the burst's Redis, prefix, phase and config overrides. */
interface ChildSpec {
  url: string;
  prefix: string;
  phase: 'noop' | 'agent';
  modelUrl?: string;
  overrides: Record<string, unknown>;
}

/** Fork one more worker process (`--child-worker`); resolves once its worker runs. Its starts and commits join this process's. */
async function forkWorker(spec: ChildSpec): Promise<ChildProcess> {
  const child = fork(new URL(import.meta.url).pathname, ['--child-worker', JSON.stringify(spec)], { execArgv: process.execArgv });
  await new Promise<void>((resolve, reject) => {
    child.on('message', (m: { ready?: true; starts?: number[]; commits?: number[] }) => {
      if (m.ready) resolve();
      starts.push(...(m.starts ?? []));
      commits.push(...(m.commits ?? []));
    });
    child.once('exit', (code) => reject(new Error(`a forked worker exited (${code})`)));
  });
  return child;
}

/** Drain a forked worker; resolves with its failed turns once it exited. */
async function stopWorker(child: ChildProcess): Promise<number> {
  return await new Promise<number>((resolve) => {
    let failed = 0;
    child.on('message', (m: { failed?: number }) => (failed = m.failed ?? failed));
    child.removeAllListeners('exit');
    child.once('exit', () => resolve(failed));
    child.send({ stop: true });
  });
}

/** A forked worker (`--child-worker <spec>`): runs the burst's jobs with the same runners, its stamps sent to the parent. */
async function childWorker(spec: ChildSpec): Promise<void> {
  const home = mkdtempSync(join(tmpdir(), 'hermes-bench-'));
  const config = loadConfig({
    env: { HERMES_HOME: home },
    overrides: {
      'redis.prefix': spec.prefix,
      log_level: 'silent',
      ...(spec.modelUrl ? { 'agent.base_url': spec.modelUrl, 'agent.api_key': 'bench', 'agent.model': 'bench' } : {}),
      ...spec.overrides,
    },
  });
  const wp = await WorkerProcess.start({
    config,
    redisUrl: spec.url,
    log: createLogger({ level: 'silent' }),
    runners: spec.phase === 'noop' ? new NoopRunners(config) : new StampedRunners(config),
  });
  const flush = () => {
    if (starts.length || commits.length) process.send!({ starts: starts.splice(0), commits: commits.splice(0) });
  };
  const timer = setInterval(flush, 100);
  process.send!({ ready: true });
  await new Promise<void>((resolve) => process.once('message', () => resolve()));
  clearInterval(timer);
  flush();
  const failed = (await wp.metrics.turns.get()).values.filter((v) => v.labels.outcome === 'failed').reduce((t, v) => t + v.value, 0);
  await wp.drain();
  rmSync(home, { recursive: true, force: true });
  process.send!({ failed }, () => process.exit(0));
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'hermes-bench-redis-'));
  const server = await startEmbeddedRedis({ dir, appendonly: false });
  say(`top of the hour: ${JOBS} jobs, ${WORKERS} worker process${WORKERS > 1 ? 'es' : ''}, load average ${loadavg()[0]!.toFixed(2)}`);
  try {
    const product = await productBurst(server.url, JOBS, 'noop');
    say(
      `  hermes-scheduler: started p99 ${product.startedP99} ms, all started ${product.allStarted} ms, all committed ${product.allCommitted} ms, failed ${product.failed}; Redis CPU ${product.redisCpuUsPerOccurrence.toFixed(0)} µs/occurrence, worker CPU ${product.workerCpuMsPerOccurrence.toFixed(3)} ms/occurrence (${product.workerCpuAtInstantMsPerOccurrence.toFixed(3)} from the instant), peak RSS ${product.workerRssMb.toFixed(0)} MB`,
    );
    const raw = NO_RAW ? undefined : await rawBurst(server.url, JOBS);
    if (raw)
      say(
        `  raw BullMQ (concurrency ${RAW_CONCURRENCY}): started p99 ${raw.startedP99} ms, all started ${raw.allStarted} ms; Redis CPU ${raw.redisCpuUsPerJob.toFixed(0)} µs/job`,
      );
    let agent: Burst | undefined;
    if (AGENT_JOBS > 0) {
      const model = await startFakeOpenAI();
      model.respond(() => ({ delayMs: MODEL_LATENCY_MS, text: 'ok' }));
      try {
        agent = await productBurst(
          server.url,
          AGENT_JOBS,
          'agent',
          model.baseUrl,
          AGENT_TURNS ? { 'worker.max_agent_turns': Number(AGENT_TURNS) } : {},
        );
      } finally {
        await model.close();
      }
      say(
        `  agent turns (${MODEL_LATENCY_MS} ms model, max_agent_turns ${AGENT_TURNS || 'default'}): ${AGENT_JOBS} jobs, started p99 ${agent.startedP99} ms, all committed ${agent.allCommitted} ms, failed ${agent.failed}; peak RSS ${agent.workerRssMb.toFixed(0)} MB`,
      );
    }
    let pageP99: number | undefined;
    if (LIST_SCHEDULES > 0) {
      const pages = await timeListPages({ schedules: LIST_SCHEDULES, requests: 200, limit: 50, say: (t) => say(`  ${t}`) });
      pageP99 = listPageP99(pages);
      say(
        `  one page of 50 at ${LIST_SCHEDULES} cron jobs and loops, p99: /api/cron/jobs ${pages.jobs.p99.toFixed(1)} ms, /api/sessions ${pages.sessions.p99.toFixed(1)} ms, cron list ${pages.cronList.p99.toFixed(1)} ms`,
      );
    }
    say(`  load average at the end ${loadavg()[0]!.toFixed(2)}`);
    if (JSON_OUT) {
      process.stdout.write(
        `${JSON.stringify({
          jobs: JOBS,
          workers: WORKERS,
          started_p99_ms: product.startedP99,
          all_started_ms: product.allStarted,
          all_committed_ms: product.allCommitted,
          failed: product.failed,
          redis_cpu_us_per_occurrence: Math.round(product.redisCpuUsPerOccurrence),
          raw_started_p99_ms: raw?.startedP99 ?? null,
          raw_all_started_ms: raw?.allStarted ?? null,
          raw_redis_cpu_us_per_job: raw ? Math.round(raw.redisCpuUsPerJob) : null,
          worker_cpu_ms_per_occurrence: Number(product.workerCpuMsPerOccurrence.toFixed(3)),
          worker_cpu_ms_at_instant_per_occurrence: Number(product.workerCpuAtInstantMsPerOccurrence.toFixed(3)),
          worker_rss_mb: Math.round(product.workerRssMb),
          agent_jobs: AGENT_JOBS,
          agent_started_p99_ms: agent?.startedP99 ?? null,
          agent_all_committed_ms: agent?.allCommitted ?? null,
          agent_worker_rss_mb: agent ? Math.round(agent.workerRssMb) : null,
          list_schedules: LIST_SCHEDULES,
          list_page_p99_ms: pageP99 ?? null,
        })}\n`,
      );
    }
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (args[0] === '--child-worker') await childWorker(JSON.parse(args[1]!) as ChildSpec);
else await main();
