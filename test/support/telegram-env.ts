/** Test environments with Telegram pointed at the fake Bot API, and an inbox reader. */
import { Queue, Worker } from 'bullmq';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import type { InboxJobData } from '../../scheduler/session/inbox.ts';
import { openRedisClient, topologyFromConfig } from '../../scheduler/store/redis/connection-factory.ts';
import { QUEUES } from '../../scheduler/store/keys.ts';
import { REDACTED_KEYS } from '../../scheduler/logger.ts';
import { testEnv, type TestEnv } from './env.ts';
import type { FakeTelegram } from './fake-telegram.ts';

export const BOT_TOKEN = '424242:AAFakeSecretTokenForTests_xyz';
export const ALLOWED_USER = 111;

/** Config for a gateway polling `fake` with small timings. */
export function telegramEnv(fake: FakeTelegram, overrides: Record<string, unknown> = {}): TestEnv {
  return testEnv({
    'api_server.port': 0,
    'telegram.bot_token': BOT_TOKEN,
    'telegram.allowed_users': String(ALLOWED_USER),
    'telegram.api_root': fake.apiRoot,
    'gateway.poll_timeout_seconds': 1,
    'gateway.poll_lease_ttl_seconds': 1,
    'gateway.poll_retry_initial_seconds': 0.05,
    'gateway.poll_retry_max_seconds': 0.2,
    'gateway.watcher_interval_seconds': 0.05,
    'gateway.reconnect_backoff_seconds': '0.1,0.2,0.4',
    ...overrides,
  });
}

/** A logger that keeps every line (all levels) in memory, with the product's redaction. */
export function memoryLogger(): { log: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n')) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  const log = pino({ level: 'debug', redact: { paths: REDACTED_KEYS.flatMap((k) => [k, `*.${k}`]), censor: '[redacted]' } }, stream);
  return { log, lines };
}

/**
 * Consumes the inbox queue like a worker would and records what the agent sees, in order. A competing
 * consumer: not for a test with a worker running (it would take that worker's jobs).
 */
export interface InboxReader {
  seen: InboxJobData[];
  close(): Promise<void>;
  /** Jobs in the inbox queue in any state. */
  count(): Promise<number>;
}

export async function readInbox(env: TestEnv): Promise<InboxReader> {
  const connection = openRedisClient(topologyFromConfig(env.config), 'bullmq');
  const seen: InboxJobData[] = [];
  const worker = new Worker<InboxJobData>(
    QUEUES.inbox,
    async (job) => {
      seen.push(job.data);
    },
    { connection, prefix: env.prefix, concurrency: 1 },
  );
  await worker.waitUntilReady();
  const queue = new Queue(QUEUES.inbox, { connection, prefix: env.prefix });
  return {
    seen,
    count: async () => await queue.getJobCountByTypes('waiting', 'prioritized', 'active', 'completed', 'failed', 'delayed'),
    async close() {
      await worker.close();
      await queue.close();
      connection.disconnect();
    },
  };
}
