/**
 * In-process cron workers for tests: a real BullMQ Worker on the `ticks`
 * queue that hands `cron-tick` jobs to `processCronTick`, with `WorkerDeps`
 * built here (separate connections per worker, as separate processes would have).
 */
import { randomBytes } from 'node:crypto';
import { Worker, type Job } from 'bullmq';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { CronService } from '../../scheduler/cron/cron-service.ts';
import { cronServiceFor, openQueues } from '../../scheduler/services.ts';
import { CronStore, type CronTickData } from '../../scheduler/cron/cron-store.ts';
import { cronRepeatStrategy } from '../../scheduler/cron/repeat-strategy.ts';
import { Keys, QUEUES } from '../../scheduler/store/keys.ts';
import { createLogger } from '../../scheduler/logger.ts';
import type { HermesQueues } from '../../scheduler/store/queues.ts';
import { openRedisClient, topologyFromConfig, type RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { processCronTick, type CronTickResult } from '../../worker/cron/cron-processor.ts';
import type { WorkerDeps } from '../../worker/worker-deps.ts';
import { createWorkerDeps } from '../../worker/create-worker-deps.ts';
import { WORKER_HEARTBEAT_MS } from '../../scheduler/worker-liveness.ts';
import type { CleanUp } from './cleanup.ts';
import { testEnv, type TestEnv } from './env.ts';

/** A running test worker. */
export interface TestCronWorker {
  deps: WorkerDeps;
  worker: Worker<CronTickData, CronTickResult>;
  /** Results of processed ticks, in completion order. */
  results: CronTickResult[];
  close(): Promise<void>;
}

/** Worker dependencies over their own connection (no BullMQ Worker). `close()` closes them. */
export function createTestDeps(config: HermesConfig): WorkerDeps & { close(): Promise<void> } {
  const redis = openRedisClient(topologyFromConfig(config), 'commands');
  const log = createLogger({ level: config.log_level, name: 'test-worker' });
  const deps = createWorkerDeps({
    config,
    redis,
    queueConnection: redis,
    log,
    workerId: `test:${process.pid}:${randomBytes(3).toString('hex')}`,
  });
  const { queues } = deps;
  return {
    ...deps,
    async close() {
      await Promise.allSettled([queues.close(), deps.outboundTelegram.close()]);
      redis.disconnect();
    },
  };
}

/** Start one cron worker. */
export async function startCronWorker(config: HermesConfig, options: { concurrency?: number } = {}): Promise<TestCronWorker> {
  const deps = createTestDeps(config);
  const { keys, redis } = deps;
  const bull = openRedisClient(topologyFromConfig(config), 'bullmq');
  const results: CronTickResult[] = [];
  const worker = new Worker<CronTickData, CronTickResult>(
    QUEUES.ticks,
    async (job: Job<CronTickData>, token, signal) => {
      const r = await processCronTick(job, token, signal, deps);
      results.push(r);
      return r;
    },
    {
      connection: bull,
      prefix: keys.bullPrefix,
      concurrency: options.concurrency ?? 8,
      lockDuration: config.worker.lock_duration_ms,
      stalledInterval: config.worker.stalled_interval_ms,
      settings: { repeatStrategy: cronRepeatStrategy },
    },
  );
  worker.on('error', () => {});
  await worker.waitUntilReady();
  // Beats like a worker process, so `hermes status` and `cron doctor` count it alive however long the test runs.
  const beat = () => redis.zadd(keys.workers, Date.now(), deps.workerId);
  await beat();
  const beating = setInterval(() => void beat().catch(() => {}), WORKER_HEARTBEAT_MS);
  return {
    deps,
    worker,
    results,
    async close() {
      clearInterval(beating);
      await worker.close();
      await deps.close();
      bull.disconnect();
    },
  };
}

/** A service and store over their own connection (what the CLI or gateway would hold). */
export function openCronService(
  config: HermesConfig,
  now: () => number = Date.now,
): {
  service: CronService;
  store: CronStore;
  redis: RedisClient;
  keys: Keys;
  queues: HermesQueues;
  close(): Promise<void>;
} {
  const keys = new Keys(config.redis.prefix, { shards: config.redis.shards });
  const redis = openRedisClient(topologyFromConfig(config), 'commands');
  const queues = openQueues(keys, redis);
  const service = cronServiceFor(config, { redis, keys, queues }, createLogger({ level: config.log_level, name: 'test-cli' }), now);
  const store = service.store;
  return {
    service,
    store,
    redis,
    keys,
    queues,
    async close() {
      await queues.close();
      redis.disconnect();
    },
  };
}

/**
 * A test environment (`testEnv(overrides)`) and a cron service on it, both stopped through `cleanups`
 * (test/support/cleanup.ts).
 */
export function openTestCron(
  cleanups: CleanUp[],
  overrides: Record<string, unknown> = {},
): { env: TestEnv; api: ReturnType<typeof openCronService> } {
  const env = testEnv(overrides);
  const api = openCronService(env.config);
  cleanups.push(
    () => env.cleanup(),
    () => api.close(),
  );
  return { env, api };
}
