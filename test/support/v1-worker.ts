/**
 * An in-process worker for `v1-runs` jobs in gateway tests: a real BullMQ
 * Worker calling `processV1Run` with real worker dependencies (Redis stores,
 * the agent runner against a local model server, a TurnTracker).
 */
import { Worker } from 'bullmq';
import { createLogger } from '../../scheduler/logger.ts';
import { QUEUES } from '../../scheduler/store/keys.ts';
import { openRedisClient, topologyFromConfig } from '../../scheduler/store/redis/connection-factory.ts';
import type { V1RunJobData } from '../../scheduler/v1/v1-runs.ts';
import { processV1Run, type V1RunJobResult } from '../../worker/v1/v1-run-processor.ts';
import type { WorkerDeps } from '../../worker/worker-deps.ts';
import { createWorkerDeps } from '../../worker/create-worker-deps.ts';
import type { TestEnv } from './env.ts';

export interface TestV1Worker {
  worker: Worker<V1RunJobData, V1RunJobResult>;
  deps: WorkerDeps;
  /**
   * Abort every running turn the way a worker drain does at its deadline
   * (marks them `abortedByDrain`, fires their AbortControllers).
   */
  abortAll(): void;
  close(): Promise<void>;
}

/** Start a `v1-runs` worker on the test's prefix. */
export async function startV1Worker(env: TestEnv, options: { concurrency?: number } = {}): Promise<TestV1Worker> {
  const { config } = env;
  const topology = topologyFromConfig(config);
  const redis = openRedisClient(topology, 'commands');
  const bull = openRedisClient(topology, 'bullmq');
  const log = createLogger({ level: config.log_level, name: 'test-worker' });
  const deps = createWorkerDeps({ config, redis, queueConnection: bull, log, workerId: `test:${process.pid}` });
  const { keys, queues, outboundTelegram } = deps;
  const workerConnection = openRedisClient(topology, 'bullmq');
  const worker = new Worker<V1RunJobData, V1RunJobResult>(QUEUES.v1Runs, (job, token, signal) => processV1Run(job, token, signal, deps), {
    connection: workerConnection,
    prefix: keys.bullPrefix,
    concurrency: options.concurrency ?? 4,
    lockDuration: config.worker.lock_duration_ms,
    stalledInterval: config.worker.stalled_interval_ms,
  });
  await worker.waitUntilReady();
  // A liveness heartbeat like a worker process's, so the gateway's /health/ready sees a worker.
  const beat = () => redis.zadd(keys.workers, Date.now(), deps.workerId).catch(() => {});
  await beat();
  const beating = setInterval(() => void beat(), 5_000);
  beating.unref();
  return {
    worker,
    deps,
    abortAll() {
      for (const t of deps.turns.list()) {
        t.abortedByDrain = true;
        t.controller.abort(new Error('drain deadline'));
      }
    },
    async close() {
      // a test ends with turns still running (slow model): abort them like a drain deadline, then close
      for (const t of deps.turns.list()) t.controller.abort(new Error('test worker closing'));
      clearInterval(beating);
      await worker.close();
      await Promise.allSettled([queues.close(), outboundTelegram.close()]);
      redis.disconnect();
      bull.disconnect();
      workerConnection.disconnect();
    },
  };
}
