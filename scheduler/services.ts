/**
 * The stores and services over one connection, built in one place from the
 * connection, the key space and the parsed config, so every surface (worker,
 * gateway, chat client, CLI commands) reads the same settings the same way.
 * Cron jobs: `cronServiceFor` / `cronStoreFor` in `cron/cron-service.ts`.
 */
import type { Logger } from 'pino';
import type { HermesConfig } from './config.ts';
import type { Keys } from './keys.ts';
import { LoopStore } from './loop-store.ts';
import type { HermesQueues } from './queues.ts';
import type { RedisClient } from './redis/connection-factory.ts';
import { ScheduleService } from './schedule-service.ts';
import { SessionStore } from './session-store.ts';

/** A commands connection with the key space and the BullMQ queues over it. */
export interface StoreConnection {
  redis: RedisClient;
  keys: Keys;
  queues: HermesQueues;
}

/** The loop/heartbeat records and their job schedulers (`worker.prefetch_lead_ms`). */
export function loopStoreFor(config: HermesConfig, conn: StoreConnection): LoopStore {
  return new LoopStore(conn.redis, conn.keys, conn.queues, config.worker.prefetch_lead_ms);
}

/** Applying loop/heartbeat commands (`loops.max_ticks`, `loops.self_paced_floor_seconds`). */
export function scheduleServiceFor(config: HermesConfig, loops: LoopStore, log: Logger): ScheduleService {
  return new ScheduleService(loops, { maxTicks: config.loops.max_ticks, selfPacedFloorSeconds: config.loops.self_paced_floor_seconds }, log);
}

/**
 * Transcripts and event streams (`worker.transcript_max_messages`,
 * `worker.occurrence_window_seconds`). `redis` may be a blocking connection of
 * its own for readers that wait on a stream.
 */
export function sessionStoreFor(config: HermesConfig, redis: RedisClient, keys: Keys): SessionStore {
  return new SessionStore(redis, keys, config.worker.transcript_max_messages, config.worker.occurrence_window_seconds * 1000);
}
