/**
 * The gateway process (`hermes gateway`, and part of `hermes up`): a sidecar
 * that only relays messages (docs/DESIGN.md §1, §8). It holds no schedule and no session
 * state — everything it relays is in Redis before it is acknowledged — so
 * restarting it loses nothing.
 *
 * What it runs:
 * - the HTTP server: `/v1` (queued as `v1-runs` jobs for workers), `/api`, `/health`, behind
 *   the home's API key (`resolveApiAuth`: `API_SERVER_KEY`, else `$HERMES_HOME/api.key`, made
 *   at the first start) unless the operator opted out with `api_server.insecure_no_auth`;
 * - platform adapters, loaded lazily through the platform registry and kept
 *   alive by the reconnect watcher, each on its own (Telegram when
 *   `telegram.bot_token` is set, Slack when `slack.bot_token` is, Discord when
 *   `discord.bot_token` is); a platform's own
 *   HTTP paths (`POST /slack/events`) answer 503 until its adapter is ready.
 *
 * Drain (docs/DESIGN.md §9): `drain()` stops taking new work and waits for in-flight `/v1`
 * callers up to `agent.cron_drain_timeout`; `close()` then releases everything.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { chooseTopology, openRedisClient, type RedisClient, type RedisTopology } from '../scheduler/store/redis/connection-factory.ts';
import type { Logger } from 'pino';
import type { HermesConfig } from '../scheduler/config/config.ts';
import { resolveApiAuth, summariseApiAuth, type ApiAuthSummary } from '../scheduler/config/api-key.ts';
import { Keys } from '../scheduler/store/keys.ts';
import { assertShardCount } from '../scheduler/store/redis/shard-count.ts';
import { ConfigError } from '../scheduler/errors/config-error.ts';
import {
  goalServiceFor,
  loopStoreFor,
  modelStateFor,
  runStoreFor,
  loopServiceFor,
  sessionStoreFor,
  openQueues,
  cronServiceFor,
} from '../scheduler/services.ts';
import { CreationLedger } from '../scheduler/store/creation-ledger.ts';
import { v1RunsQueue } from '../scheduler/v1/v1-runs.ts';
import { outboundQueue, telegramOutboundQueue } from '../scheduler/delivery/outbound.ts';
import { fleetReadings, HermesMetrics } from '../scheduler/metrics.ts';
import { InflightRuns } from './drain.ts';
import { StreamFanout } from './stream-fanout.ts';
import { GatewayHealth } from './health.ts';
import type { CronApi } from './http/cron-routes.ts';
import { assertBindAllowed } from './http/auth.ts';
import { startHttpServer, type HttpServerHandle } from './http/server.ts';
import type { PlatformPlugin } from './plugins/platform-plugin.ts';
import { PlatformRegistry, type PlatformStatus } from './plugins/platform-registry.ts';
import { ReconnectWatcher } from './plugins/reconnect-watcher.ts';
import { PlatformStatePublisher } from './plugins/platform-state-publisher.ts';
import { telegramPlugin } from './telegram/telegram-plugin.ts';
import { slackPlugin } from './slack/slack-plugin.ts';
import { discordPlugin } from './discord/discord-plugin.ts';
import type { PlatformRoute } from './http/server.ts';
import { startTracing } from '../scheduler/telemetry/start-tracing.ts';
import { wireKeys } from '../scheduler/text/wire-case.ts';

/** Options of `startGateway`. */
export interface GatewayOptions {
  config: HermesConfig;
  /** Where Redis is (single, cluster, sentinel); default: `redisUrl`, else the configuration's. */
  topology?: RedisTopology;
  /** A single Redis at this URL (shorthand for a `single` topology). */
  redisUrl?: string;
  log: Logger;
  /** The cron service behind `/api/cron`; without it those routes answer 501. */
  cron?: CronApi;
  /** Platform plugins besides the built-in Telegram one. */
  plugins?: PlatformPlugin[];
  /** Metrics to record into and serve (a worker's in the same process); default: the gateway's own. */
  metrics?: HermesMetrics;
  /** The product's version, as `/mcp` tells its clients. @defaultValue 0.0.0 */
  version?: string;
}

/** A running gateway. */
export interface Gateway {
  /** Where the HTTP server listens. */
  readonly httpAddress: { host: string; port: number; url: string };
  /** What the HTTP API requires: the configured key, the home's key file (and where it is), or nothing (`insecure_no_auth`). */
  readonly auth: ApiAuthSummary;
  /** This instance's id (`<host>:<pid>:<random>`), as written into poll leases. */
  readonly instanceId: string;
  /** State of every platform plugin (`ready`, `adapter_unavailable`, …). */
  platforms(): PlatformStatus[];
  /** Call `listener` after each change of a platform's state. @returns the unsubscribe function */
  onPlatformChange(listener: (status: PlatformStatus) => void): () => void;
  /** This gateway's metrics (served at `/metrics`). */
  readonly metrics: HermesMetrics;
  /** The reconnect watcher (re-arms failed plugin loads). */
  readonly watcher: ReconnectWatcher;
  /**
   * Stop taking new work and wait for in-flight `/v1` callers up to
   * `agent.cron_drain_timeout` (then they get a 503). Memoised.
   * Resolves when no caller waits any more; the outbound senders keep running until `close()`.
   */
  drain(): Promise<void>;
  /** Drain (if not done) with no wait, then stop everything. Idempotent; each step's error is logged, none stops the rest. */
  close(): Promise<void>;
}

/**
 * Start the gateway.
 * @throws ConfigError when the API server would bind a non-loopback address without a key, or the
 *   home's key file is not this user's private file; the listen error when the port is taken
 */
export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  const { config } = options;
  const log = options.log.child({ role: 'gateway' });
  // Before anything connects: a key file that cannot be trusted, or no key off loopback, stops the start.
  const auth = resolveApiAuth(config);
  assertBindAllowed(config.api_server.host, auth.mode === 'key' ? auth.key : undefined);
  const instanceId = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const keys = new Keys(config.redis.prefix, { shards: config.redis.shards });
  const topology = chooseTopology(config, options);
  // Every command of the gateway's own client is bounded, so no request waits on an absent Redis
  // for longer than this (blocking reads use the stream reader's connection).
  const redis: RedisClient = openRedisClient(topology, 'commands', { commandTimeout: config.gateway.redis_timeout_ms });
  redis.on('error', (err: Error) => log.warn({ err: err.message }, 'redis connection error'));
  // Start once the connection is ready, so the first requests are not refused as "Redis away";
  // a Redis that does not answer in time does not stop the start: /health/ready then says so.
  await whenReady(redis, Math.max(config.gateway.redis_timeout_ms, 5_000));
  // A gateway with another shard count would queue input where no worker looks. Redis may be
  // away at start (the gateway waits for it); only a count that disagrees stops the start.
  await assertShardCount(redis, keys).catch((err: unknown) => {
    if (err instanceof ConfigError) {
      redis.disconnect();
      throw err;
    }
    log.warn({ err: (err as Error).message }, 'shard count not checked: Redis did not answer');
  });
  const bull: RedisClient = openRedisClient(topology, 'bullmq');
  bull.on('error', () => {});
  const queues = openQueues(keys, bull, log);
  const v1Queue = v1RunsQueue(keys, bull, log);
  const runs = runStoreFor(config, redis, keys);
  const loops = loopStoreFor(config, { redis, keys, queues });
  const schedules = loopServiceFor(config, loops, log);
  const goals = goalServiceFor(config, { redis, keys, queues }, log);
  const inflight = new InflightRuns();
  // One blocking connection per shard serves every event stream and waiting `/v1` caller of this process.
  const fanout = new StreamFanout({
    shards: keys.shards().map((k) => ({ prefix: k.prefix, wakeKey: k.gatewayWake(instanceId) })),
    openBlocking: () => openRedisClient(topology, 'bullmq'),
    commands: redis,
    maxSubscriptions: config.api_server.max_streams,
    log,
  });
  const outbound = telegramOutboundQueue(keys, bull, log);
  const slackOutbound = outboundQueue('slack', keys, bull, log);
  const discordOutbound = outboundQueue('discord', keys, bull, log);
  // In one process with a worker (`hermes up`) the gateway serves the worker's metrics too.
  const metrics =
    options.metrics ??
    new HermesMetrics({
      fleet: fleetReadings({
        redis,
        workersKey: keys.workers,
        queues: [queues.acrossShards('ticks'), queues.acrossShards('inbox'), outbound, slackOutbound, discordOutbound, v1Queue],
        models: modelStateFor(redis, keys),
      }),
    });
  const gw = config.gateway;
  const registry = new PlatformRegistry(gw.plugin_load_timeout_seconds * 1000, log);
  registry.register(telegramPlugin({ config, redis, topology, keys, queues, outbound, instanceId, log, metrics }));
  registry.register(slackPlugin({ config, redis, topology, keys, queues, outbound: slackOutbound, log, metrics }));
  registry.register(discordPlugin({ config, redis, topology, keys, queues, outbound: discordOutbound, instanceId, log, metrics }));
  for (const plugin of options.plugins ?? []) registry.register(plugin);
  metrics.observePlatforms(() => registry.statuses());
  // Each enabled platform's own paths go to its adapter while it is ready; 503 (the platform retries) before.
  const platformRoutes: PlatformRoute[] = registry
    .names()
    .filter((name) => !registry.isGated(name))
    .flatMap((name) =>
      (registry.plugin(name)?.httpPaths ?? []).map((path) => ({
        path,
        handle: async (request) => {
          const adapter = registry.adapter(name);
          if (!adapter?.handleHttp)
            return { status: 503, json: { error: `platform ${name} is not ready (${registry.status(name)?.state})` } };
          return await adapter.handleHttp(request);
        },
      })),
    );
  const watcher: ReconnectWatcher = new ReconnectWatcher(registry, {
    backoffMs: gw.reconnect_backoff_seconds.map((s) => s * 1000),
    maxRearms: gw.max_plugin_load_rearms,
    intervalMs: Math.max(10, gw.watcher_interval_seconds * 1000),
    log,
    onGiveUp: () => publisher.publish(),
  });
  // What `hermes status` and the console show of this gateway's platforms (docs/OPERATIONS.md, "Platform state").
  const publisher = new PlatformStatePublisher({ redis, keys, instanceId, registry, progress: (name) => watcher.progress(name), log });

  const cleanups: Array<[string, () => Promise<unknown>]> = [];
  const runCleanups = async () => {
    for (const [name, fn] of cleanups.reverse()) {
      try {
        await fn();
      } catch (err) {
        log.warn({ step: name, err: (err as Error).message }, 'gateway close step failed');
      }
    }
    cleanups.length = 0;
  };
  // Sent last, after every close step: the spans of sends still ending are among them.
  cleanups.push(['send traces', await startTracing(config.telemetry)]);
  cleanups.push(['redis', () => redis.quit()], ['bullmq connection', () => bull.quit()], ['stream reader', () => fanout.close()]);
  cleanups.push(
    ['queues', () => queues.close()],
    ['v1 queue', () => v1Queue.close()],
    ['outbound queue', () => outbound.close()],
    ['slack outbound queue', () => slackOutbound.close()],
    ['discord outbound queue', () => discordOutbound.close()],
  );

  const cronService = cronServiceFor(config, { redis, keys, queues }, log);
  let http: HttpServerHandle;
  try {
    http = await startHttpServer({
      host: config.api_server.host,
      port: config.api_server.port,
      auth,
      log,
      v1: {
        runs,
        queue: v1Queue,
        keys,
        fanout,
        inflight,
        model: config.agent.model,
        models: Object.keys(config.agent.models),
        maxPromptChars: config.agent.max_prompt_chars,
        runTimeoutMs: config.gateway.run_timeout_seconds * 1000,
        queueTimeoutMs: config.gateway.redis_timeout_ms,
      },
      api: { config, keys, redis, fanout, loops, schedules, queues, goals, cron: options.cron, inflight },
      mcp: {
        deps: {
          config,
          redis,
          keys,
          queues,
          loops,
          schedules,
          cron: cronService,
          sessions: sessionStoreFor(config, redis, keys),
          ledger: new CreationLedger(redis),
        },
        version: options.version ?? '0.0.0',
      },
      hooks: { config, redis, keys, queues, sessions: sessionStoreFor(config, redis, keys), cron: cronService, schedules },
      console: {
        config,
        keys,
        redis,
        queues,
        fanout,
        loops,
        schedules,
        goals,
        sessions: sessionStoreFor(config, redis, keys),
        cron: options.cron,
      },
      metrics: { registry: metrics, public: config.metrics.public },
      limits: {
        connections: {
          maxConnections: config.api_server.max_connections,
          headersTimeoutMs: config.api_server.headers_timeout_ms,
          requestTimeoutMs: config.api_server.request_timeout_ms,
          keepAliveTimeoutMs: config.api_server.keep_alive_timeout_ms,
        },
        maxJsonDepth: config.api_server.max_json_depth,
        sseMaxBufferedBytes: config.api_server.sse_max_buffered_bytes,
      },
      dashboard: {
        queues: [...queues.shards().flatMap((q) => [q.ticks, q.inbox]), outbound, slackOutbound, discordOutbound, v1Queue],
        readOnly: config.dashboard.read_only,
      },
      platformRoutes,
      health: {
        checks: new GatewayHealth(redis, keys, {
          redisTimeoutMs: config.gateway.redis_timeout_ms,
          workerMaxAgeMs: config.gateway.ready_worker_max_age_seconds * 1000,
        }),
        details: () => ({
          instance: instanceId,
          draining: inflight.draining,
          streams: fanout.subscriptions,
          platforms: Object.fromEntries(
            registry.statuses().map((p) => [
              p.name,
              {
                state: p.state,
                loads: p.loads,
                rearms: watcher.rearms(p.name),
                ...(p.lastError ? { last_error: p.lastError } : {}),
                ...(p.heldInbound ? { held_inbound: p.heldInbound } : {}),
                // An adapter's own figures, in the wire's casing whatever it names them (scheduler/text/wire-case.ts).
                ...wireKeys(p.adapter ?? {}),
              },
            ]),
          ),
        }),
      },
    });
  } catch (err) {
    await runCleanups();
    throw err;
  }
  cleanups.push(['http', () => http.close()]);
  cleanups.push(['platform states', () => publisher.stop()]);
  cleanups.push(['platforms', () => registry.close()], ['reconnect watcher', async () => watcher.stop()]);

  // Platforms load lazily and in the background: a slow or failing plugin never blocks the HTTP API.
  for (const name of registry.names()) {
    if (registry.isGated(name)) {
      log.debug({ platform: name, state: registry.status(name)?.state }, 'platform not loaded');
      continue;
    }
    void registry.load(name);
  }
  watcher.start();
  publisher.start();

  let draining: Promise<void> | undefined;
  const drain = () => {
    draining ??= (async () => {
      log.info('gateway draining: no new work is taken');
      watcher.stop();
      // `/v1` refuses new work from this moment (the drain sets its flag before its first wait), not once the
      // platforms' inbound has stopped: stopping a poll can take a while, and a request let in meanwhile was run.
      const v1 = inflight.drain(config.agent.cron_drain_timeout, log);
      await Promise.all([registry.stopInbound(), v1]);
    })();
    return draining;
  };
  let closing: Promise<void> | undefined;
  const port = http.address.port;
  return {
    httpAddress: { host: config.api_server.host, port, url: http.url },
    auth: summariseApiAuth(auth),
    instanceId,
    watcher,
    metrics,
    platforms: () => registry.statuses(),
    onPlatformChange: (listener) => registry.onChange(listener),
    drain,
    close() {
      closing ??= (async () => {
        if (!draining) {
          watcher.stop();
          const v1 = inflight.drain(0, log);
          draining = Promise.all([registry.stopInbound(), v1]).then(() => undefined);
        }
        await draining;
        await runCleanups();
        log.info('gateway stopped');
      })();
      return closing;
    },
  };
}

/** Resolves when `client` is ready, or after `timeoutMs` (whichever comes first). */
async function whenReady(client: RedisClient, timeoutMs: number): Promise<void> {
  if (client.status === 'ready') return;
  let timer: NodeJS.Timeout | undefined;
  let onReady: (() => void) | undefined;
  await new Promise<void>((resolve) => {
    onReady = resolve;
    client.once('ready', onReady);
    timer = setTimeout(resolve, timeoutMs);
  });
  clearTimeout(timer);
  if (onReady) client.off('ready', onReady);
}
