/**
 * Test stack on the shared test Redis: in-process worker processes, child
 * `hermes worker` processes, and clients for the stores.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { Keys } from '../../scheduler/store/keys.ts';
import type { HermesQueues } from '../../scheduler/store/queues.ts';
import { LoopStore } from '../../scheduler/loop/loop-store.ts';
import { LoopService } from '../../scheduler/loop/loop-service.ts';
import { SessionStore, type SessionEvent } from '../../scheduler/session/session-store.ts';
import { createLogger } from '../../scheduler/logger.ts';
import { openRedisClient, topologyFromConfig, type RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { WorkerProcess, type WorkerProcessOptions } from '../../worker/worker-process.ts';
import type { CleanUp } from './cleanup.ts';
import { killAfter, track } from './child-processes.ts';
import { assertChildEnv, testEnv, type TestEnv } from './env.ts';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const HERMES_BIN = join(ROOT, 'cli', 'hermes.mjs');

/**
 * How long a spawned `hermes` process may take to start (node, tsx and ~700 module
 * files: about 2.5 s of CPU, far longer on a loaded machine). Waiting for the start
 * event costs nothing when it comes early.
 */
export const SPAWN_START_TIMEOUT_MS = 45_000;

/** Clients of the stores for a test, with `close()`. */
export interface TestClients {
  redis: RedisClient;
  keys: Keys;
  queues: HermesQueues;
  loops: LoopStore;
  sessions: SessionStore;
  schedules: LoopService;
  close(): Promise<void>;
}

export function clients(env: TestEnv, config: HermesConfig = env.config): TestClients {
  const topology = topologyFromConfig(config);
  const redis = openRedisClient(topology, 'commands');
  const queueConn = openRedisClient(topology, 'bullmq');
  const keys = new Keys(config.redis.prefix, { shards: config.redis.shards });
  const queues = openQueues(keys, queueConn);
  const loops = loopStoreFor(config, { redis, keys, queues });
  const log = createLogger({ level: config.log_level });
  return {
    redis,
    keys,
    queues,
    loops,
    sessions: sessionStoreFor(config, redis, keys),
    schedules: loopServiceFor(config, loops, log),
    async close() {
      await queues.close();
      redis.disconnect();
      queueConn.disconnect();
    },
  };
}

/**
 * A test environment and its clients, both stopped through `cleanups` (test/support/cleanup.ts).
 * @param overrides - config overrides by dotted key (see `testEnv`)
 * @param makeEnv - builds the environment (`testEnv`, or another Redis's: `clusterEnv`)
 */
export function openTestClients(
  cleanups: CleanUp[],
  overrides: Record<string, unknown> = {},
  makeEnv: (overrides: Record<string, unknown>) => TestEnv = testEnv,
): { env: TestEnv; c: TestClients } {
  const env = makeEnv(overrides);
  const c = clients(env);
  cleanups.push(
    () => env.cleanup(),
    () => c.close(),
  );
  return { env, c };
}

/** `openTestClients` and an in-process worker on the same environment, drained first. */
export async function startWorkerStack(
  cleanups: CleanUp[],
  overrides: Record<string, unknown> = {},
  makeEnv: (overrides: Record<string, unknown>) => TestEnv = testEnv,
): Promise<{ env: TestEnv; c: TestClients; worker: WorkerProcess }> {
  const { env, c } = openTestClients(cleanups, overrides, makeEnv);
  const worker = await startWorker(env);
  cleanups.push(() => worker.drain());
  return { env, c, worker };
}

/** Start an in-process worker process. */
export async function startWorker(env: TestEnv, options: Partial<WorkerProcessOptions> = {}): Promise<WorkerProcess> {
  const config = options.config ?? env.config;
  return await WorkerProcess.start({
    config,
    topology: topologyFromConfig(config),
    log: createLogger({ level: config.log_level, name: 'test-worker' }),
    ...options,
  });
}

/**
 * Spawn `hermes worker` as a child process; resolves once it is registered alive. `cleanups` SIGKILLs it
 * (and waits for its exit) when the test ends, failed or not, even when it never registered; a test that
 * stops it otherwise (SIGTERM, to drain) pushes its own clean-up after this call, which runs first.
 */
export async function spawnWorker(cleanups: CleanUp[], env: TestEnv, extraEnv: NodeJS.ProcessEnv = {}): Promise<ChildProcess> {
  assertChildEnv(env.childEnv);
  const child = spawn(process.execPath, [HERMES_BIN, 'worker'], {
    env: { ...env.childEnv, ...extraEnv },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  killAfter(cleanups, child);
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const redis = openRedisClient(topologyFromConfig(env.config), 'commands');
  const keys = new Keys(env.prefix);
  try {
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`worker exited: ${stderr}`);
        const members = await redis.zrange(keys.workers, 0, -1);
        return members.some((m) => m.includes(`:${child.pid}:`)) || undefined;
      },
      SPAWN_START_TIMEOUT_MS,
      'the worker registered',
    );
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  } finally {
    redis.disconnect();
  }
  return child;
}

/** Run the `hermes` CLI to completion. */
export async function runHermes(
  env: TestEnv,
  args: string[],
  extraEnv: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = track(
    spawn(process.execPath, [HERMES_BIN, ...args], {
      env: { ...env.childEnv, ...extraEnv },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  // 'close', not 'exit': the exit can come before the last output is read from the pipes
  const code = await new Promise<number | null>((r) => child.on('close', r));
  return { code, stdout, stderr };
}

export { waitFor, waitWhileAdvancing, sleep, blockEventLoopUntil } from './wait-for.ts';
import { WAIT_CEILING_MS, waitFor } from './wait-for.ts';
import { loopStoreFor, loopServiceFor, sessionStoreFor, openQueues } from '../../scheduler/services.ts';

/** All events of a session of one type (or all). */
export async function events(c: TestClients, sessionId: string, type?: string): Promise<SessionEvent[]> {
  const all = await c.sessions.readEvents(sessionId, '0', { count: 100_000 });
  return type ? all.filter((e) => e.type === type) : all;
}

/**
 * Wait until the session has at least `n` events of `type`.
 * @throws Error naming what was waited for and the session's events meanwhile (type, and a failure's error)
 */
export async function waitForEvents(
  c: TestClients,
  sessionId: string,
  type: string,
  n: number,
  timeoutMs = WAIT_CEILING_MS,
): Promise<SessionEvent[]> {
  try {
    return await waitFor(
      async () => {
        const evs = await events(c, sessionId, type);
        return evs.length >= n ? evs : undefined;
      },
      timeoutMs,
      `${n} ${type} event(s) on ${sessionId}`,
    );
  } catch (err) {
    // Each kind of event once, with how many (a long loop has thousands), a failure with its error.
    const seen = new Map<string, number>();
    for (const e of await events(c, sessionId).catch(() => [])) {
      const label = typeof e.data.error === 'string' ? `${e.type} (${e.data.error})` : e.type;
      seen.set(label, (seen.get(label) ?? 0) + 1);
    }
    const summary = [...seen].map(([label, n]) => (n > 1 ? `${label} ×${n}` : label)).join(', ');
    throw new Error(`${(err as Error).message}; the session's events: ${summary || 'none'}`, { cause: err });
  }
}

/**
 * Wait until the tick queue holds no job that could still start a turn
 * (active, waiting, delayed, prioritized). From then on nothing fires without
 * a new write, so counts of replies and runs are final: a test of "exactly N"
 * waits for this instead of sleeping.
 */
export async function waitForNoTickJobs(c: TestClients, timeoutMs = 15_000): Promise<void> {
  await waitFor(
    async () => {
      const counts = await c.queues.ticks.getJobCounts('active', 'waiting', 'delayed', 'prioritized');
      return Object.values(counts).every((n) => n === 0) || undefined;
    },
    timeoutMs,
    'no tick job left',
  );
}

/** Pending (delayed, waiting, prioritized) jobs of one job scheduler. */
export async function pendingSchedulerJobs(c: TestClients, schedulerId: string): Promise<string[]> {
  const jobs = await c.queues.ticks.getJobs(['delayed', 'waiting', 'prioritized']);
  return jobs.filter((j) => j?.repeatJobKey === schedulerId).map((j) => j.id!);
}
