/**
 * Which sessions exist: those that were sent input (the shards' session index, written with each
 * input by `enqueueInput`) and those that have a loop, heartbeat or goal (set from the shell or
 * over `/api` without any input). Cron jobs' own sessions (`cron:<id>`) are not listed.
 */
import type { Keys } from '../scheduler/store/keys.ts';
import type { RedisClient } from '../scheduler/store/redis/connection-factory.ts';
import { cronSessionId } from '../scheduler/cron/cron-job.ts';

/** Sessions `cron:<id>` hold a cron job's own stream, not a conversation. */
const cronSessionPrefix = cronSessionId('');

/** Every session id known to the store, sorted; `alsoKnown` adds ids found elsewhere (loop and goal records). */
export async function listSessionIds(redis: RedisClient, keys: Keys, alsoKnown: Iterable<string> = []): Promise<string[]> {
  const ids = new Set<string>(alsoKnown);
  for (const k of keys.shards()) for (const id of await redis.smembers(k.sessionIndex)) ids.add(id);
  return [...ids].filter((id) => !id.startsWith(cronSessionPrefix)).sort();
}
