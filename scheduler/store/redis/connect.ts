/**
 * Finding and checking the Redis the product runs on.
 *
 * Order (docs/DESIGN.md §10):
 *   1. `REDIS_CLUSTER_NODES` (a Redis Cluster) or `REDIS_SENTINELS` (a
 *      Sentinel-managed primary) when set;
 *   2. `REDIS_URL` / `redis.url` when set;
 *   3. the embedded server of this `HERMES_HOME` when it runs (on its unix socket, checked to be
 *      this home's own: `embedded-identity.ts`; anything else there is refused, never used);
 *   4. when the caller may start one (`hermes up`, the demo): a new, supervised embedded server.
 * If none works: one `StoreUnavailableError` naming what was tried and how to get Redis.
 * A Redis the operator runs is theirs to secure; a process is warned when one that is not on
 * loopback has no password. Clients are opened by `connection-factory.ts`.
 */
import type { Redis, RedisOptions } from 'ioredis';
import { pino, type Logger } from 'pino';
import { StoreUnavailableError } from '../../errors/store-unavailable-error.ts';
import { ping } from './embedded-redis.ts';
import { probeEmbeddedRedis } from './embedded-identity.ts';
import { startSupervisedRedis, type SupervisedRedis } from './embedded-supervisor.ts';
import {
  closeClient,
  connectRedisClient,
  describeTopology,
  primariesOf,
  topologyFromConfig,
  type RedisAddress,
  type RedisConfig,
  type RedisClient,
  type RedisTopology,
} from './connection-factory.ts';

/** Lowest Redis version BullMQ job schedulers need. */
export const MIN_REDIS_VERSION = '6.2.0';

/** Where the product's Redis is and whether this process owns it. */
export interface RedisTarget {
  /** How to reach it (single, cluster, sentinel). */
  topology: RedisTopology;
  /** `redis://…` of a single Redis, or the topology described without credentials. */
  url: string;
  /** Set when this process started the embedded server (it supervises it and stops it on exit). */
  embedded?: SupervisedRedis;
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
 * @param options.log - the process's logger: warnings (an operator's Redis without a password
 *   off loopback) and the embedded server's supervision go there
 * @throws StoreUnavailableError naming what was tried; UntrustedRedisError when what is at the
 *   embedded server's address is not this home's own
 */
export async function resolveRedis(config: RedisConfig, options: { allowStart: boolean; log?: Logger }): Promise<RedisTarget> {
  if (config.redis.cluster_nodes.length > 0 || config.redis.sentinels.length > 0) {
    const topology = topologyFromConfig(config);
    warnIfOpen(topology, options.log);
    const probe = await connectRedisClient(topology, 'commands');
    closeClient(probe);
    return { topology, url: describeTopology(topology) };
  }
  if (config.redis.url) {
    if (!/^rediss?:\/\/[^\s]+$/.test(config.redis.url) || describeUrl(config.redis.url).startsWith('(')) {
      throw new StoreUnavailableError('REDIS_URL is not a Redis URL; expected redis://[user:password@]host:port[/db].', {
        target: 'REDIS_URL',
      });
    }
    const topology = topologyFromConfig(config);
    warnIfOpen(topology, options.log);
    if (await ping(topology)) return { topology, url: config.redis.url };
    const where = describeUrl(config.redis.url);
    throw new StoreUnavailableError(
      `Redis at ${where} (REDIS_URL) is unreachable. Start it (e.g. \`redis-server --port ${where.split(':')[1]}\`) or fix REDIS_URL.`,
      { target: where },
    );
  }
  const embeddedTopology: RedisTopology = { kind: 'embedded', home: config.home };
  // Throws for anything at the embedded address that is not this home's own server: never used.
  const state = await probeEmbeddedRedis(config.home);
  if (state === 'running') return { topology: embeddedTopology, url: describeTopology(embeddedTopology) };
  if (options.allowStart && config.redis.embedded) {
    const embedded = await startSupervisedRedis({
      home: config.home,
      log: options.log ?? pino({ level: 'silent' }),
      maxRestarts: config.redis.embedded_max_restarts,
    });
    return { topology: embedded.topology, url: describeTopology(embedded.topology), embedded };
  }
  throw new StoreUnavailableError(
    `No Redis to connect to: REDIS_URL is not set and no embedded Redis of ${config.home} is running. ` +
      'Run `hermes up` (starts one from the redis-server on PATH) or set REDIS_URL=redis://host:6379.',
    { target: 'embedded' },
  );
}

/** True for `localhost`, `127.0.0.0/8`, `::1` (and a unix socket path). */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return (
    h === 'localhost' ||
    h.endsWith('.localhost') ||
    /^127\.\d+\.\d+\.\d+$/.test(h) ||
    h === '::1' ||
    h === '0:0:0:0:0:0:0:1' ||
    h.startsWith('/')
  );
}

/**
 * The warning for an operator's Redis that is not on loopback and has no password (a URL without
 * one and no `redis.password`), or `undefined`. The embedded Redis has its own (and a socket).
 */
export function openRedisWarning(topology: RedisTopology): string | undefined {
  let hosts: string[];
  let password: string | undefined;
  if (topology.kind === 'embedded') return undefined;
  if (topology.kind === 'single') {
    if (topology.url.startsWith('/')) return undefined;
    try {
      const u = new URL(topology.url);
      hosts = [u.hostname];
      password = decodeURIComponent(u.password) || topology.password;
    } catch {
      return undefined;
    }
  } else {
    hosts = (topology.kind === 'cluster' ? topology.nodes : topology.sentinels).map((n: RedisAddress) => n.host);
    password = topology.password;
  }
  const open = hosts.filter((h) => !isLoopbackHost(h));
  if (password || open.length === 0) return undefined;
  return (
    `Redis at ${describeTopology(topology)} is not on loopback and no password is set: anyone who can reach it can ` +
    'rewrite schedules, and a command turn is a field of a schedule. Set requirepass (or an ACL user) on it and ' +
    'REDIS_PASSWORD (redis.password) or a password in REDIS_URL here.'
  );
}

function warnIfOpen(topology: RedisTopology, log: Logger | undefined): void {
  const warning = openRedisWarning(topology);
  if (warning && log) log.warn({ redis: describeTopology(topology) }, warning);
}

/** ioredis options for BullMQ connections (blocking commands need no retry cap). */
export const BULLMQ_REDIS_OPTIONS: RedisOptions = { maxRetriesPerRequest: null, enableReadyCheck: true };

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
    throw new StoreUnavailableError(`Redis ${version} is too old: hermes-scheduler needs Redis ${MIN_REDIS_VERSION} or newer.`);
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
