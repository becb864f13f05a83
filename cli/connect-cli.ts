import { Redis } from 'ioredis';
import type { HermesConfig } from '../scheduler/config.ts';
import { Keys } from '../scheduler/keys.ts';
import { HermesQueues } from '../scheduler/queues.ts';
import { BULLMQ_REDIS_OPTIONS, resolveRedis } from '../scheduler/redis/connect.ts';
import type { CliConnection } from './cli-context.ts';

/**
 * Connect a CLI command to the product's Redis.
 * @param url - a known URL (e.g. the one `hermes up` started); otherwise resolved from config
 * @throws StoreUnavailableError when no Redis can be found
 */
export async function connectCli(config: HermesConfig, url?: string): Promise<CliConnection> {
  const target = url ?? (await resolveRedis(config, { allowStart: false })).url;
  const redis = new Redis(target, { maxRetriesPerRequest: 3 });
  const queueConn = new Redis(target, BULLMQ_REDIS_OPTIONS);
  redis.on('error', () => {});
  queueConn.on('error', () => {});
  const keys = new Keys(config.redis.prefix);
  const queues = new HermesQueues(keys, queueConn);
  return {
    redis, keys, queues, url: target,
    async close() {
      await queues.close();
      redis.disconnect();
      queueConn.disconnect();
    },
  };
}
