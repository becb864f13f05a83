/**
 * An in-process worker for `v1-runs` jobs in gateway tests: a real BullMQ
 * Worker calling `processV1Run` with real worker dependencies (Redis stores,
 * the agent runner against a local model server, a TurnTracker).
 */
import { Worker } from 'bullmq';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { createLogger } from '../../scheduler/logger.ts';
import { Keys, QUEUES } from '../../scheduler/keys.ts';
import { LoopStore } from '../../scheduler/loop-store.ts';
import type { TelegramOutboundData } from '../../scheduler/outbound.ts';
import { telegramOutboundQueue } from '../../scheduler/outbound.ts';
import { HermesQueues } from '../../scheduler/queues.ts';
import { BULLMQ_REDIS_OPTIONS } from '../../scheduler/redis/connect.ts';
import { ScheduleService } from '../../scheduler/schedule-service.ts';
import { SessionStore } from '../../scheduler/session-store.ts';
import type { V1RunJobData } from '../../scheduler/v1-runs.ts';
import { SessionLock } from '../../worker/session-lock.ts';
import { TurnTracker } from '../../worker/turn-tracker.ts';
import { RunnerFactory } from '../../worker/turn-runners/create-runner.ts';
import { processV1Run, type V1RunJobResult } from '../../worker/v1-run-processor.ts';
import type { WorkerDeps } from '../../worker/worker-deps.ts';
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
  const keys = new Keys(config.redis.prefix);
  const redis = new Redis(env.redisUrl, { maxRetriesPerRequest: 3 });
  const bull = new Redis(env.redisUrl, BULLMQ_REDIS_OPTIONS);
  const queues = new HermesQueues(keys, bull);
  const loops = new LoopStore(redis, keys, queues, config.worker.prefetch_lead_ms);
  const log = createLogger({ level: config.log_level, name: 'test-worker' });
  const outboundTelegram: Queue<TelegramOutboundData> = telegramOutboundQueue(keys, bull);
  const deps: WorkerDeps = {
    config, redis, keys, queues, loops, log,
    sessions: new SessionStore(redis, keys),
    schedules: new ScheduleService(loops, { maxTicks: config.loops.max_ticks, selfPacedFloorSeconds: config.loops.self_paced_floor_seconds }, log),
    runners: new RunnerFactory(config),
    lock: new SessionLock(redis, keys, config.worker.lock_duration_ms),
    outboundTelegram,
    turns: new TurnTracker(),
    workerId: `test:${process.pid}`,
  };
  const workerConnection = new Redis(env.redisUrl, BULLMQ_REDIS_OPTIONS);
  const worker = new Worker<V1RunJobData, V1RunJobResult>(
    QUEUES.v1Runs,
    (job, token, signal) => processV1Run(job, token, signal, deps),
    {
      connection: workerConnection, prefix: keys.bullPrefix,
      concurrency: options.concurrency ?? 4, lockDuration: config.worker.lock_duration_ms,
      stalledInterval: config.worker.stalled_interval_ms,
    },
  );
  await worker.waitUntilReady();
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
      await worker.close();
      await Promise.allSettled([queues.close(), outboundTelegram.close()]);
      redis.disconnect();
      bull.disconnect();
      workerConnection.disconnect();
    },
  };
}
