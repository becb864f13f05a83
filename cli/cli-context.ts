/**
 * What a CLI command gets: the validated configuration and a way to connect
 * to the product's Redis (REDIS_URL or the running embedded server; never
 * starting one — only `hermes up` does).
 */
import type { RedisClient, RedisTopology } from '../scheduler/store/redis/connection-factory.ts';
import type { HermesConfig } from '../scheduler/config/config.ts';
import type { Keys } from '../scheduler/store/keys.ts';
import type { HermesQueues } from '../scheduler/store/queues.ts';

/** An open connection for one CLI command. `close()` closes queues and clients. */
export interface CliConnection {
  redis: RedisClient;
  keys: Keys;
  queues: HermesQueues;
  /** How Redis is reached (single, cluster, sentinel). */
  topology: RedisTopology;
  /** `redis://…` of a single server, or the topology described without credentials. */
  url: string;
  close(): Promise<void>;
}

/** The session `hermes up` attaches to, and every session flag's default. */
export const DEFAULT_SESSION = 'main';

export interface CliContext {
  config: HermesConfig;
  /** @throws StoreUnavailableError naming what was tried and how to get Redis */
  connect(): Promise<CliConnection>;
}
