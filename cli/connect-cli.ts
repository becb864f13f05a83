import type { HermesConfig } from '../scheduler/config/config.ts';
import { Keys } from '../scheduler/store/keys.ts';
import { openQueues } from '../scheduler/services.ts';
import { resolveRedis } from '../scheduler/store/redis/connect.ts';
import { assertShardCount } from '../scheduler/store/redis/shard-count.ts';
import { describeTopology, openRedisClient, type RedisTopology } from '../scheduler/store/redis/connection-factory.ts';
import type { CliConnection } from './cli-context.ts';

/**
 * Connect a CLI command to the product's Redis.
 * @param target - a known topology or single-Redis URL (e.g. the one `hermes up` started); otherwise resolved from config
 * @throws StoreUnavailableError when no Redis can be found
 */
export async function connectCli(config: HermesConfig, target?: RedisTopology | string): Promise<CliConnection> {
  const topology: RedisTopology =
    typeof target === 'string' ? { kind: 'single', url: target } : (target ?? (await resolveRedis(config, { allowStart: false })).topology);
  const redis = openRedisClient(topology, 'commands');
  // BullMQ's connection connects on its first command: a command that opens no queue never opens it.
  const queueConn = openRedisClient(topology, 'bullmq', { lazyConnect: true });
  redis.on('error', () => {});
  queueConn.on('error', () => {});
  const keys = new Keys(config.redis.prefix, { shards: config.redis.shards });
  try {
    await assertShardCount(redis, keys);
  } catch (err) {
    redis.disconnect();
    queueConn.disconnect();
    throw err;
  }
  const queues = openQueues(keys, queueConn);
  return {
    redis,
    keys,
    queues,
    topology,
    url: topology.kind === 'single' ? topology.url : describeTopology(topology),
    async close() {
      await queues.close();
      redis.disconnect();
      queueConn.disconnect();
    },
  };
}
