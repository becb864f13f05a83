/**
 * The cron part of the gateway's `/api`, backed by `CronService`. Jobs made
 * over HTTP are never trusted: they cannot carry a `--script` (SPEC §3).
 */
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { HermesConfig } from '../scheduler/config.ts';
import { Keys } from '../scheduler/keys.ts';
import { HermesQueues } from '../scheduler/queues.ts';
import { BULLMQ_REDIS_OPTIONS } from '../scheduler/redis/connect.ts';
import { CronStore } from '../scheduler/cron/cron-store.ts';
import { CronService } from '../scheduler/cron/cron-service.ts';
import { cronJobView } from '../scheduler/cron/cron-job.ts';
import type { CronApi } from '../gateway/http/cron-routes.ts';

/**
 * Open a `CronApi` over its own Redis connections.
 * @returns the API and a `close()` for its connections
 */
export function openCronApi(config: HermesConfig, redisUrl: string, log: Logger): { api: CronApi; close(): Promise<void> } {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 3 });
  const bull = new Redis(redisUrl, BULLMQ_REDIS_OPTIONS);
  redis.on('error', () => {});
  bull.on('error', () => {});
  const keys = new Keys(config.redis.prefix);
  const queues = new HermesQueues(keys, bull);
  const service = new CronService(
    new CronStore(redis, keys, queues, { historyLimit: config.cron.history_limit }),
    {
      timezone: config.timezone, minIntervalSeconds: config.cron.min_interval_seconds,
      maxPromptChars: config.agent.max_prompt_chars, historyLimit: config.cron.history_limit,
    },
    log,
  );
  const caller = { origin: { surface: 'api' as const }, trusted: false };
  const api: CronApi = {
    list: async ({ all }) => (await service.list({ all })).map(cronJobView),
    add: async (input) => cronJobView(await service.add(input, caller)),
    pause: async (ref) => cronJobView((await service.pause(ref)).job),
    resume: async (ref, { runNow }) => cronJobView((await service.resume(ref, { runNow })).job),
    runNow: async (ref) => {
      const r = await service.runNow(ref);
      return { ...cronJobView(r.job), manual_job_id: r.manualJobId };
    },
    remove: async (ref) => cronJobView(await service.remove(ref)),
  };
  return {
    api,
    async close() {
      await queues.close();
      redis.disconnect();
      bull.disconnect();
    },
  };
}
