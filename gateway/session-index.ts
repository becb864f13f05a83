/**
 * Which sessions exist: those that were sent input (the shards' session index, written with each
 * input by `enqueueInput`) and those that have a loop, heartbeat or goal (set from the shell or
 * over `/api` without any input). Cron jobs' own sessions (`cron:<id>`) are not listed.
 *
 * The sessions of a shard in id order are its session order (`Keys.sessionOrder`, scheduler/store/lex-index.ts),
 * added to by the scripts that take input and write loops, heartbeats and goals. A store written before the
 * order existed has none: the first list makes it from the three indexes and then marks it made
 * (`Keys.sessionOrderBuilt`); `hermes admin reshard` drops both, and the next list makes them again.
 * During a rolling upgrade a session that only an older version wrote to is listed once a newer one writes to it.
 */
import type { Keys } from '../scheduler/store/keys.ts';
import type { RedisClient } from '../scheduler/store/redis/connection-factory.ts';
import { cronSessionId } from '../scheduler/cron/cron-job.ts';
import { lexRange } from '../scheduler/store/lex-index.ts';

/** Sessions `cron:<id>` hold a cron job's own stream, not a conversation. */
const cronSessionPrefix = cronSessionId('');
/** Above every `cron:<id>` session id (ids are ASCII, below DEL). */
const cronSessionsEnd = `${cronSessionPrefix}\x7f`;

/**
 * Up to `count` session ids after `after` in id order (of every shard), starting with `prefix` when given;
 * cron jobs' sessions left out.
 */
export async function sessionIdsAfter(
  redis: RedisClient,
  keys: Keys,
  range: { after?: string | undefined; prefix?: string | undefined },
  count: number,
): Promise<string[]> {
  const shards = keys.shards();
  await Promise.all(shards.map((k) => ensureSessionOrder(redis, k)));
  const orders = shards.map((k) => k.sessionOrder);
  const got = await lexRange(redis, orders, range, count);
  const kept = got.filter((id) => !id.startsWith(cronSessionPrefix));
  if (kept.length === got.length || got.length < count) return kept;
  // The cron sessions lie together: read on past them (or past the last id read, when that lies beyond them).
  const last = got.at(-1)!;
  const after = last.startsWith(cronSessionPrefix) ? cronSessionsEnd : last;
  const more = await lexRange(redis, orders, { after, prefix: range.prefix }, count - kept.length);
  return [...kept, ...more.filter((id) => !id.startsWith(cronSessionPrefix))];
}

/** Make the shard's session order from its indexes, once (`Keys.sessionOrderBuilt`). */
async function ensureSessionOrder(redis: RedisClient, k: Keys): Promise<void> {
  if ((await redis.exists(k.sessionOrderBuilt)) === 1) return;
  const ids = new Set<string>(await redis.smembers(k.sessionIndex));
  for (const id of await redis.smembers(k.goalIndex)) ids.add(id);
  for (const m of await redis.smembers(k.scheduleIndex)) ids.add(k.parseScheduleIndexMember(m).sessionId);
  const all = [...ids];
  for (let i = 0; i < all.length; i += 1000) await redis.zadd(k.sessionOrder, ...all.slice(i, i + 1000).flatMap((id) => [0, id]));
  await redis.set(k.sessionOrderBuilt, '1');
}
