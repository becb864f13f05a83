/**
 * The shard count a store was written with, and the refusal to change it.
 *
 * A session's keys live on the shard `shardOf(sessionId, N)`; with another N
 * the same session hashes elsewhere and its schedules, transcript and queues
 * would be out of sight (still stored, never fired). So the first process that
 * opens a store records its `redis.shards` in a fleet-wide marker, and every
 * process refuses to start with a different count. A store without a marker
 * that already holds data under the one-shard layout counts as one shard.
 * Moving a store to another count is `hermes admin reshard --to N` (cli/reshard.ts);
 * while one is under way (its `reshard-to` marker exists) every process refuses to start.
 */
import type { Keys } from '../keys.ts';
import { ConfigError } from '../../errors/config-error.ts';
import type { RedisClient } from './connection-factory.ts';
import { luaScript, runLuaScript } from './lua-script.ts';

const CLAIM_SHARD_COUNT = luaScript('claim-shard-count-1.lua');

/**
 * Record the store's shard count on first use, and check it on every later one.
 * @returns the count the store has (equal to `keys.shardCount`)
 * @throws ConfigError naming `redis.shards` when the store was written with another count
 */
export async function assertShardCount(redis: RedisClient, keys: Keys): Promise<number> {
  const resharding = await redis.get(keys.reshardTarget);
  if (resharding !== null) {
    throw new ConfigError(
      `This store is being moved to ${resharding} shard(s) and the move has not finished. ` +
        `Finish it with \`hermes admin reshard --to ${resharding}\` (workers stopped), then start with HERMES_REDIS_SHARDS=${resharding}.`,
      { key: 'redis.shards' },
    );
  }
  let stored = await redis.get(keys.shardCountMarker);
  if (stored === null) {
    // No marker: a store from before shards existed has its data under the one-shard layout.
    let legacy = 0;
    if (keys.shardCount !== 1) for (const k of keys.unshardedIndexes) legacy += await redis.exists(k);
    stored =
      legacy > 0 ? '1' : ((await runLuaScript(redis, CLAIM_SHARD_COUNT, [keys.shardCountMarker], [String(keys.shardCount)])) as string);
  }
  const count = Number(stored);
  if (count !== keys.shardCount) {
    throw new ConfigError(
      `Invalid setting redis.shards: this store was written with ${count} shard(s), not ${keys.shardCount}. ` +
        `Set HERMES_REDIS_SHARDS=${count} (redis.shards: ${count}); a different count would hide every session and cron job ` +
        `stored so far. To move the store to ${keys.shardCount} shard(s), stop the workers and run \`hermes admin reshard --to ${keys.shardCount}\`.`,
      { key: 'redis.shards' },
    );
  }
  return count;
}
