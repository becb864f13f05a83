/**
 * What a `hermes` subcommand gets from the entry point: the validated
 * configuration, and a way to open Redis (only when the subcommand needs it,
 * so commands like `hermes cron next` work without a running Redis).
 */
import type { Redis } from 'ioredis';
import type { HermesConfig } from '../scheduler/config.ts';
import type { Keys } from '../scheduler/keys.ts';
import type { HermesQueues } from '../scheduler/queues.ts';

/** An open connection to the product's Redis; `close()` closes the queues and the client. */
export interface CliConnection {
  redis: Redis;
  keys: Keys;
  queues: HermesQueues;
  close(): Promise<void>;
}

export interface CliContext {
  config: HermesConfig;
  /**
   * Connect to the product's Redis.
   * @throws StoreUnavailableError naming what was tried when no Redis answers
   */
  connect(): Promise<CliConnection>;
}
