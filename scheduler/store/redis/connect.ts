/**
 * Finding and checking the Redis the product runs on.
 *
 * Order (SPEC §10):
 *   1. `REDIS_CLUSTER_NODES` (a Redis Cluster) or `REDIS_SENTINELS` (a
 *      Sentinel-managed primary) when set;
 *   2. `REDIS_URL` / `redis.url` when set;
 *   3. an embedded server of this `HERMES_HOME` that is already running;
 *   4. when the caller may start one (`hermes up`, the demo): a new embedded server.
 * If none works: one `StoreUnavailableError` naming what was tried and how to get Redis.
 * Clients are opened by `connection-factory.ts`.
 */
import { join } from 'node:path';
import type { Redis, RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import type { HermesConfig } from '../../config/config.ts';
import { StoreUnavailableError } from '../../errors/store-unavailable-error.ts';
import { embeddedUrlFile, ping, readEmbeddedUrl, startEmbeddedRedis, type EmbeddedRedis } from './embedded-redis.ts';
import {
  closeClient, connectRedisClient, describeTopology, openRedisClient, primariesOf, topologyFromConfig,
  type RedisClient, type RedisTopology,
} from './connection-factory.ts';

/** Lowest Redis version BullMQ job schedulers need. */
export const MIN_REDIS_VERSION = '6.2.0';

/** Where the product's Redis is and whether this process owns it. */
export interface RedisTarget {
  /** How to reach it (single, cluster, sentinel). */
  topology: RedisTopology;
  /** `redis://…` of a single Redis, or the topology described without credentials. */
  url: string;
  /** Set when this process started the embedded server (it stops it on exit). */
  embedded?: EmbeddedRedis;
}

/** `host:port` of a URL without credentials, for messages and logs. */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || '6379'}`;
  } catch {
    return '(unparseable REDIS_URL)';
  }
}

/**
 * Resolve the Redis to use.
 * @param options.allowStart - may start an embedded server when none runs
 * @throws StoreUnavailableError naming what was tried
 */
export async function resolveRedis(
  config: HermesConfig,
  options: { allowStart: boolean },
): Promise<RedisTarget> {
  if (config.redis.cluster_nodes.length > 0 || config.redis.sentinels.length > 0) {
    const topology = topologyFromConfig(config);
    const probe = await connectRedisClient(topology, 'commands');
    closeClient(probe);
    return { topology, url: describeTopology(topology) };
  }
  if (config.redis.url) {
    if (!/^rediss?:\/\/[^\s]+$/.test(config.redis.url) || describeUrl(config.redis.url).startsWith('(')) {
      throw new StoreUnavailableError('REDIS_URL is not a Redis URL; expected redis://[user:password@]host:port[/db].', { target: 'REDIS_URL' });
    }
    if (await ping(config.redis.url)) return single(config.redis.url);
    const where = describeUrl(config.redis.url);
    throw new StoreUnavailableError(
      `Redis at ${where} (REDIS_URL) is unreachable. Start it (e.g. \`redis-server --port ${where.split(':')[1]}\`) or fix REDIS_URL.`,
      { target: where },
    );
  }
  const running = readEmbeddedUrl(config.home);
  if (running && (await ping(running))) return single(running);
  if (options.allowStart && config.redis.embedded) {
    const embedded = await startEmbeddedRedis({
      dir: join(config.home, 'redis'),
      urlFile: embeddedUrlFile(config.home),
    });
    return { ...single(embedded.url), embedded };
  }
  throw new StoreUnavailableError(
    `No Redis to connect to: REDIS_URL is not set and no embedded Redis of ${config.home} is running. ` +
      'Run `hermes up` (starts one from the redis-server on PATH) or set REDIS_URL=redis://host:6379.',
    { target: running ? describeUrl(running) : 'embedded' },
  );
}

function single(url: string): RedisTarget {
  return { topology: { kind: 'single', url }, url };
}

/** ioredis options for BullMQ connections (blocking commands need no retry cap). */
export const BULLMQ_REDIS_OPTIONS: RedisOptions = { maxRetriesPerRequest: null, enableReadyCheck: true };

/** Open a plain client for the product's own keys on a single Redis at `url` (see `openRedisClient` for every topology). */
export function openRedis(url: string, options: RedisOptions = {}): RedisClient {
  return openRedisClient({ kind: 'single', url }, 'commands', options);
}

/** Compare dotted versions: negative when a < b. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map((n) => Number.parseInt(n, 10) || 0);
  const pb = b.split('.').map((n) => Number.parseInt(n, 10) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * Check every primary behind a freshly opened client (the one server, or every
 * master of a cluster): version at least 6.2 (else throw), and warn unless
 * `maxmemory-policy` is `noeviction` (an evicting Redis can drop schedules).
 * Managed services that disable CONFIG are tolerated.
 * @returns the result of the first primary
 * @throws StoreUnavailableError when a server is older than 6.2
 */
export async function checkRedis(client: RedisClient, log: Logger): Promise<{ version: string; policy?: string }> {
  const primaries = await primariesOf(client);
  const results = [];
  for (const primary of primaries) results.push(await checkPrimary(primary, log));
  return results[0]!;
}

async function checkPrimary(client: Redis, log: Logger): Promise<{ version: string; policy?: string }> {
  const info = await client.info('server');
  const version = /redis_version:([^\r\n]+)/.exec(info)?.[1]?.trim() ?? '0';
  if (compareVersions(version, MIN_REDIS_VERSION) < 0) {
    throw new StoreUnavailableError(
      `Redis ${version} is too old: hermes-scheduler needs Redis ${MIN_REDIS_VERSION} or newer.`,
    );
  }
  let policy: string | undefined;
  try {
    const res = (await client.config('GET', 'maxmemory-policy')) as string[];
    policy = res[1];
  } catch {
    log.debug('CONFIG GET is not allowed on this Redis; eviction policy not checked');
  }
  if (policy && policy !== 'noeviction') {
    log.warn(
      { policy, server: `${client.options.host}:${client.options.port}` },
      `Redis maxmemory-policy is ${policy}: under memory pressure Redis may evict schedules. Set it to noeviction.`,
    );
  }
  return { version, policy };
}
