/**
 * What "a worker is alive" means, in one place. Each worker process writes
 * its id with the current time into the fleet's liveness sorted set
 * (`Keys.workers`) every `WORKER_HEARTBEAT_MS`; it counts as alive while that
 * entry is younger than `WORKER_ALIVE_MS` (three missed beats, so one slow
 * beat on a busy machine does not count a live worker as gone). Used by
 * `hermes status`, `hermes cron status`/`doctor`, the `hermes_workers_alive`
 * gauge and housekeeping's "no worker is alive" warning. The gateway's
 * `/health/ready` has its own operator setting (`gateway.ready_worker_max_age_seconds`).
 */
import type { RedisClient } from './store/redis/connection-factory.ts';

/** The one command counting needs (a full client, or a narrow fake in a unit test). */
type LivenessReader = Pick<RedisClient, 'zcount'>;

/** Milliseconds between liveness heartbeats of a worker process. */
export const WORKER_HEARTBEAT_MS = 5_000;

/** A worker counts as alive while its last heartbeat is younger than this, ms (three missed beats). */
export const WORKER_ALIVE_MS = 3 * WORKER_HEARTBEAT_MS;

/**
 * Number of workers alive at `now`.
 * @param workersKey - `Keys.workers`
 * @param now - epoch ms
 */
export async function countAliveWorkers(redis: LivenessReader, workersKey: string, now = Date.now()): Promise<number> {
  return await redis.zcount(workersKey, now - WORKER_ALIVE_MS, '+inf');
}

/**
 * Ids of the workers alive at `now` (`<host>:<pid>:<random>`).
 * @param workersKey - `Keys.workers`
 * @param now - epoch ms
 */
export async function aliveWorkerIds(redis: RedisClient, workersKey: string, now = Date.now()): Promise<string[]> {
  return await redis.zrangebyscore(workersKey, now - WORKER_ALIVE_MS, '+inf');
}
