/**
 * The stores and services over one connection, built in one place from the
 * connection, the key space and the parsed config, so every surface (worker,
 * gateway, chat client, CLI commands, the chaos run and the benchmarks) reads
 * the same settings the same way. Nothing else calls their constructors
 * (tests may, to pin a setting).
 */
import { checkEconomy } from './economy/economy-check.ts';
import { noModelWarning } from './agent-model.ts';
import type { Logger } from 'pino';
import type { HermesConfig } from './config/config.ts';
import { CronService } from './cron/cron-service.ts';
import type { CronInputSettings } from './cron/cron-input.ts';
import { CronStore } from './cron/cron-store.ts';
import { GoalService } from './goal/goal-service.ts';
import type { Keys } from './store/keys.ts';
import { LoopStore } from './loop/loop-store.ts';
import { HermesQueues } from './store/queues.ts';
import type { RedisClient } from './store/redis/connection-factory.ts';
import { cronRepeatStrategy } from './cron/repeat-strategy.ts';
import type { ConnectionOptions } from 'bullmq';
import { LoopService } from './loop/loop-service.ts';
import { SessionStore } from './session/session-store.ts';
import { ReplicaAck } from './store/redis/replica-ack.ts';
import { TurnJournalStore } from './journal/turn-journal-store.ts';
import { RunStore } from './v1/v1-runs.ts';
import { parseWebhookAllow } from './delivery/webhook-policy.ts';
import { unconfiguredPlatformWarnings } from './delivery/unconfigured-platform.ts';
import { RedisModelState } from './models/model-state-store.ts';

/** A commands connection with the key space and the BullMQ queues over it. */
export interface StoreConnection {
  redis: RedisClient;
  keys: Keys;
  queues: HermesQueues;
}

/**
 * The product's queues over `connection` (see `HermesQueues`): the `ticks` queue with croner's
 * repeat strategy, so a cron job scheduler upserted here fires when the cron engine says.
 * @param log - where the queues' connection errors are logged
 */
export function openQueues(keys: Keys, connection: RedisClient | ConnectionOptions, log?: Logger): HermesQueues {
  return new HermesQueues(keys, connection, { ticksRepeatStrategy: cronRepeatStrategy, log });
}

/** The loop/heartbeat records and their job schedulers (`worker.prefetch_lead_ms`). */
export function loopStoreFor(config: HermesConfig, conn: StoreConnection): LoopStore {
  return new LoopStore(conn.redis, conn.keys, conn.queues, config.worker.prefetch_lead_ms, config.worker.events_max_entries);
}

/** Applying loop/heartbeat commands (`loops.max_ticks`, `loops.self_paced_floor_seconds`, `delivery.webhook_allow`; the bot tokens for `--deliver`'s warnings). */
export function loopServiceFor(config: HermesConfig, loops: LoopStore, log: Logger): LoopService {
  return new LoopService(
    loops,
    {
      maxTicks: config.loops.max_ticks,
      selfPacedFloorSeconds: config.loops.self_paced_floor_seconds,
      checkEconomy: (economy, surface) => checkEconomy(economy, config, surface),
      noModelWarning: (model, surface) => noModelWarning(config, model, surface === 'cli' ? SHELL_CONFIG : undefined),
      webhookAllow: parseWebhookAllow(config.delivery.webhook_allow),
      // The shell writes these on stderr (cli/commands/loop.ts), as `hermes cron add` does; elsewhere the reply ends with them.
      deliveryWarnings: (deliver, surface) =>
        surface === 'cli' ? [] : unconfiguredPlatformWarnings(config, deliver, 'This configuration'),
    },
    log,
  );
}

/**
 * Transcripts and event streams (`worker.transcript_max_messages`,
 * `worker.events_max_entries`, `worker.occurrence_window_seconds`). `redis` may be a blocking connection of
 * its own for readers that wait on a stream.
 */
export function sessionStoreFor(config: HermesConfig, redis: RedisClient, keys: Keys, log?: Logger): SessionStore {
  return new SessionStore(
    redis,
    keys,
    config.worker.transcript_max_messages,
    config.worker.occurrence_window_seconds * 1000,
    config.worker.events_max_entries,
    replicaAckFor(config, log),
  );
}

/**
 * What commits wait for (`redis.wait_replicas`, `redis.wait_timeout_ms`); a shortfall is a warning on `log`.
 * The rule and what it does not promise: `store/redis/replica-ack.ts`.
 */
export function replicaAckFor(config: HermesConfig, log?: Logger): ReplicaAck {
  if (config.redis.wait_replicas === 0) return ReplicaAck.none;
  return new ReplicaAck(config.redis.wait_replicas, config.redis.wait_timeout_ms, (s) =>
    log?.warn(s, 'commit not acknowledged by the replicas asked for in time (redis.wait_replicas); it stands'),
  );
}

/** Journals of agent turns (`scheduler/journal/`), expiring with the occurrence window (`worker.occurrence_window_seconds`). */
export function turnJournalStoreFor(config: HermesConfig, redis: RedisClient, keys: Keys): TurnJournalStore {
  return new TurnJournalStore(redis, keys, config.worker.occurrence_window_seconds * 1000);
}

/** `/goal` records and their continuation jobs (`goals.max_turns`). */
export function goalServiceFor(config: HermesConfig, conn: StoreConnection, log: Logger): GoalService {
  return new GoalService(
    conn.redis,
    conn.keys,
    conn.queues,
    config.goals.max_turns,
    log,
    (economy, surface) => checkEconomy(economy, config, surface),
    (model, surface) => noModelWarning(config, model, surface === 'cli' ? SHELL_CONFIG : undefined),
  );
}

/** Whose configuration a CLI command read: the workers may have a model this shell lacks (`agent-model.ts`). */
export const SHELL_CONFIG = "this shell's configuration; workers started with OPENAI_BASE_URL of their own are fine";

/** The learned windows and circuit breakers of every endpoint and model (fleet-wide keys). */
export function modelStateFor(redis: RedisClient, keys: Keys): RedisModelState {
  return new RedisModelState(redis, keys);
}

/** `/v1` run records, events and idempotency keys (`gateway.run_ttl_seconds`). */
export function runStoreFor(config: HermesConfig, redis: RedisClient, keys: Keys): RunStore {
  return new RunStore(redis, keys, config.gateway.run_ttl_seconds);
}

/** The cron job records, runs and BullMQ side (`cron.history_limit`, `worker.occurrence_window_seconds`, `cron.retry_backoff_seconds`, `cron.prefetch_lead_ms`). */
export function cronStoreFor(config: HermesConfig, conn: StoreConnection, log?: Logger): CronStore {
  return new CronStore(conn.redis, conn.keys, conn.queues, {
    replicaAck: replicaAckFor(config, log),
    historyLimit: config.cron.history_limit,
    occurrenceWindowMs: config.worker.occurrence_window_seconds * 1000,
    retryBackoffMs: config.cron.retry_backoff_seconds * 1000,
    eventsMaxLen: config.worker.events_max_entries,
    prefetchLeadMs: config.cron.prefetch_lead_ms,
  });
}

/**
 * Managing cron jobs (`timezone`, `cron.min_interval_seconds`, `cron.history_limit`, `cron.max_backfill_occurrences`,
 * `agent.max_prompt_chars`, `delivery.webhook_allow`; `agent.models` and `tools.*` for `--model` and `--watch`).
 * @param conn - with `cron`, the cron store the caller built already (a worker builds each store once)
 * @param clock - epoch ms source (tests may pin it)
 */
export function cronServiceFor(
  config: HermesConfig,
  conn: StoreConnection & { cron?: CronStore },
  log: Logger,
  clock: () => number = Date.now,
): CronService {
  return new CronService(conn.cron ?? cronStoreFor(config, conn), cronInputSettingsOf(config), log, clock);
}

/** What cron input is checked against, from the configuration (also used without Redis: `newCronJob`). */
export function cronInputSettingsOf(config: HermesConfig): CronInputSettings {
  return {
    timezone: config.timezone,
    minIntervalSeconds: config.cron.min_interval_seconds,
    maxScheduleChars: config.cron.max_schedule_chars,
    maxPromptChars: config.agent.max_prompt_chars,
    historyLimit: config.cron.history_limit,
    maxBackfillOccurrences: config.cron.max_backfill_occurrences,
    webhookAllow: parseWebhookAllow(config.delivery.webhook_allow),
    checkEconomy: (economy, surface) => checkEconomy(economy, config, surface),
  };
}
