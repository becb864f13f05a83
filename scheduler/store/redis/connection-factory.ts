/**
 * The one place product connections to Redis are made, for the three
 * topologies the product runs on (docs/DESIGN.md §2):
 *
 * - **single**: one Redis at `REDIS_URL` (`redis://` or `rediss://` with TLS);
 * - **embedded**: the embedded server of a `HERMES_HOME`, on its unix socket; every
 *   connection (reconnects included) is checked to be that home's own server before it is
 *   used (`embedded-identity.ts`: the socket's owner, the password, the run id);
 * - **cluster**: a Redis Cluster reached through `REDIS_CLUSTER_NODES`
 *   (`host:port,host:port,…`; any reachable node will do, ioredis discovers the
 *   rest), opened as an ioredis `Cluster`;
 * - **sentinel**: a Sentinel-managed primary, `REDIS_SENTINELS`
 *   (`host:port,…`) with `REDIS_SENTINEL_NAME`; ioredis asks the sentinels for
 *   the current primary and follows a failover.
 *
 * Every process, the CLI and the tests' helpers open their clients here, so a
 * process works on every topology with no code of its own. Each client has a
 * role: `commands` (the product's own keys; commands fail after 3 retries so a
 * caller sees an outage), `bullmq` (BullMQ queues and workers, blocking reads:
 * no retry cap, as BullMQ requires).
 *
 * Every key the product writes carries a hash tag (`scheduler/store/keys.ts`), so
 * every multi-key script runs in one slot of a cluster.
 */
import { Socket } from 'node:net';
import { AbstractConnector, Cluster, Redis, type ClusterNode, type RedisOptions } from 'ioredis';
import { StoreUnavailableError } from '../../errors/store-unavailable-error.ts';
import { embeddedPaths, openVerifiedSocket, type EmbeddedPaths } from './embedded-identity.ts';

/** A client of any topology; `Redis` and `Cluster` share the command API. */
export type RedisClient = Redis | Cluster;

/** A `host:port` address. */
export interface RedisAddress {
  host: string;
  port: number;
}

/** Where the product's Redis is and how it is laid out. */
export type RedisTopology =
  /** `url` is `redis[s]://…`, or a unix socket path; `password`/`username` apply when the URL has none. */
  | { kind: 'single'; url: string; password?: string; username?: string }
  /** The embedded Redis of the `HERMES_HOME` `home` (`embedded-identity.ts`). */
  | { kind: 'embedded'; home: string }
  | { kind: 'cluster'; nodes: RedisAddress[]; password?: string; username?: string; tls: boolean }
  | { kind: 'sentinel'; sentinels: RedisAddress[]; name: string; password?: string; username?: string; tls: boolean };

/** What a client is for. */
export type RedisRole = 'commands' | 'bullmq';

/**
 * Per-role ioredis options: BullMQ's clients need `maxRetriesPerRequest: null` (blocking commands).
 *
 * `blockingTimeout` (ms) on the BullMQ role is ioredis's client-side limit on a blocking command
 * (its own timeout plus 100 ms of grace; 10 s for one that would block forever). Without it, when
 * a Redis Cluster master is SIGKILLed and its replica promoted, a worker's BZPOPMIN on the dead
 * master never settles and BullMQ's own fetch watchdog does not recover the connection: that
 * queue's worker stops taking jobs until the process restarts. With it the command is rejected,
 * BullMQ reconnects its blocking client, and the next read follows the new master.
 */
const ROLE_OPTIONS: Record<RedisRole, RedisOptions> = {
  commands: { maxRetriesPerRequest: 3 },
  bullmq: { maxRetriesPerRequest: null, enableReadyCheck: true, blockingTimeout: 10_000 },
};

/**
 * What the connection code reads of the configuration (`HermesConfig` has it). Stated here, not
 * imported: config/ validates its values with the parsers of the packages above store/ (cron/,
 * delivery/), so store/ may not import config/.
 */
export interface RedisConfig {
  /** `HERMES_HOME`: the embedded server's folder. */
  home: string;
  redis: {
    url?: string;
    embedded: boolean;
    embedded_max_restarts: number;
    cluster_nodes: string[];
    sentinels: string[];
    sentinel_name?: string;
    password?: string;
    username?: string;
    tls: boolean;
  };
}

/**
 * Parse a comma list of `host:port` (or `redis://[user:pass@]host:port`) addresses.
 * @throws StoreUnavailableError naming the setting and the bad entry
 */
export function parseAddresses(list: string[], setting: string): RedisAddress[] {
  if (list.length === 0) throw new StoreUnavailableError(`${setting} is empty; expected host:port,host:port,…`, { target: setting });
  return list.map((entry) => {
    const m = /^(?:rediss?:\/\/(?:[^@/]*@)?)?\[?([^\]\s/]+?)\]?:(\d{1,5})\/?$/.exec(entry.trim());
    const port = Number(m?.[2]);
    if (!m || !(port > 0 && port < 65536)) {
      throw new StoreUnavailableError(`${setting} entry "${entry}" is not host:port.`, { target: setting });
    }
    return { host: m[1]!, port };
  });
}

/**
 * The topology the configuration names: `redis.cluster_nodes`
 * (`REDIS_CLUSTER_NODES`), else `redis.sentinels` (`REDIS_SENTINELS`), else
 * a single Redis at `url` (`REDIS_URL`, or the embedded server's URL).
 * @param url - the single Redis's URL when neither cluster nor sentinels are configured
 * @throws StoreUnavailableError when an address list does not parse
 */
export function topologyFromConfig(config: RedisConfig, url?: string): RedisTopology {
  const r = config.redis;
  const auth = { ...(r.password ? { password: r.password } : {}), ...(r.username ? { username: r.username } : {}) };
  if (r.cluster_nodes.length > 0) {
    return {
      kind: 'cluster',
      nodes: parseAddresses(r.cluster_nodes, 'REDIS_CLUSTER_NODES'),
      tls: r.tls || r.cluster_nodes.some((n) => n.startsWith('rediss://')),
      ...auth,
    };
  }
  if (r.sentinels.length > 0) {
    return { kind: 'sentinel', sentinels: parseAddresses(r.sentinels, 'REDIS_SENTINELS'), name: r.sentinel_name!, tls: r.tls, ...auth };
  }
  const single = url ?? r.url;
  if (!single)
    throw new StoreUnavailableError('No Redis configured: set REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS.', { target: 'REDIS_URL' });
  // REDIS_PASSWORD / REDIS_USERNAME authenticate to a single Redis too, unless its URL has credentials.
  return urlHasCredentials(single) ? { kind: 'single', url: single } : { kind: 'single', url: single, ...auth };
}

function urlHasCredentials(url: string): boolean {
  try {
    const u = new URL(url);
    return u.username !== '' || u.password !== '';
  } catch {
    return false;
  }
}

/**
 * The topology a process runs on: `topology` when given, else a single Redis at
 * `url` when given, else what the configuration names.
 * @throws StoreUnavailableError when none is configured
 */
export function chooseTopology(config: RedisConfig, given: { topology?: RedisTopology; redisUrl?: string }): RedisTopology {
  if (given.topology) return given.topology;
  if (given.redisUrl) return { kind: 'single', url: given.redisUrl };
  return topologyFromConfig(config);
}

/** `host:port` of a URL without credentials (`unix:<path>` for a socket path), for messages and logs. */
function describeUrl(url: string): string {
  if (url.startsWith('/')) return `unix:${url.split('?')[0]}`;
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || '6379'}`;
  } catch {
    return '(unparseable REDIS_URL)';
  }
}

/** The topology for messages and logs, without credentials: `127.0.0.1:6379`, `cluster 10.0.0.1:7000,…`. */
export function describeTopology(t: RedisTopology): string {
  const list = (a: RedisAddress[]) => a.map((n) => `${n.host}:${n.port}`).join(',');
  if (t.kind === 'single') return describeUrl(t.url);
  if (t.kind === 'embedded') return `embedded unix:${embeddedPaths(t.home).socket}`;
  if (t.kind === 'cluster') return `cluster ${list(t.nodes)}`;
  return `sentinel ${t.name} via ${list(t.sentinels)}`;
}

/**
 * Open a client for `role` on `topology`. The client connects in the
 * background; commands queue until it is ready. Connection errors are not
 * thrown as events (a no-op `error` listener is attached; add one to log them).
 * @param extra - further ioredis options (e.g. `lazyConnect`, `connectTimeout`)
 */
export function openRedisClient(topology: RedisTopology, role: RedisRole, extra: RedisOptions = {}): RedisClient {
  const client = openClient(topology, role, extra);
  // A lost connection is reported by the calls that fail while ioredis reconnects (or follows a
  // failover); without a listener ioredis prints every reconnect error. Callers may add their own.
  client.on('error', () => undefined);
  return client;
}

function openClient(topology: RedisTopology, role: RedisRole, extra: RedisOptions): RedisClient {
  const options: RedisOptions = { ...ROLE_OPTIONS[role], ...extra };
  if (topology.kind === 'single') {
    const auth = {
      ...(topology.password ? { password: topology.password } : {}),
      ...(topology.username ? { username: topology.username } : {}),
    };
    return new Redis(topology.url, { ...options, ...auth });
  }
  if (topology.kind === 'embedded') {
    const paths = embeddedPaths(topology.home);
    // No password here: the connector authenticates each connection while it checks it.
    return new Redis({ ...options, path: paths.socket, Connector: embeddedConnector(paths) });
  }
  const auth = {
    ...(topology.password ? { password: topology.password } : {}),
    ...(topology.username ? { username: topology.username } : {}),
  };
  const tls = topology.tls ? { tls: {} } : {};
  if (topology.kind === 'sentinel') {
    return new Redis({
      ...options,
      ...auth,
      ...tls,
      sentinels: topology.sentinels,
      name: topology.name,
      // Sentinels themselves need no password here; TLS applies to them too when set.
      ...(topology.tls ? { enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
    });
  }
  const nodes: ClusterNode[] = topology.nodes.map((n) => ({ host: n.host, port: n.port }));
  return new Cluster(nodes, {
    redisOptions: { ...options, ...auth, ...tls },
    // BullMQ's blocking calls and a slot move during failover need the offline queue.
    enableOfflineQueue: true,
    enableReadyCheck: true,
    ...(options.lazyConnect ? { lazyConnect: true } : {}),
    ...(role === 'bullmq' ? { maxRedirections: 64 } : {}),
  });
}

/**
 * An ioredis connector for the embedded Redis of `paths`: each connection, the first and every
 * reconnect, is opened by `openVerifiedSocket` (the folder and the socket are this user's, the
 * server knows the home's password and run id) and handed to ioredis authenticated. A check that
 * fails is a connection error like a refused connection: ioredis logs it through the client's
 * `error` listeners and tries again by its retry strategy, and nothing is sent to that server.
 */
function embeddedConnector(paths: EmbeddedPaths) {
  return class EmbeddedConnector extends AbstractConnector {
    private readonly timeoutMs: number;

    constructor(given: unknown) {
      const options = given as RedisOptions;
      super(options.disconnectTimeout ?? 2_000);
      this.timeoutMs = options.connectTimeout ?? 10_000;
    }

    async connect(): Promise<Socket> {
      this.connecting = true;
      try {
        const socket = await openVerifiedSocket(paths, this.timeoutMs, (s) => {
          this.stream = s;
        });
        if (!this.connecting) {
          socket.destroy();
          throw new Error('Connection is closed.');
        }
        return socket;
      } catch (err) {
        // Closed by the client meanwhile: ioredis ends the connection for good, as it should.
        if (!this.connecting) throw err;
        // Anything else: a stream that has already failed with this error, so ioredis reports it
        // and reconnects by its retry strategy (a rejection here would end the client for good).
        this.firstError = err as Error;
        const failed = new Socket();
        failed.destroy();
        this.stream = failed;
        return failed;
      }
    }
  };
}

/**
 * Open a client and wait until it answers PING.
 * @throws StoreUnavailableError naming the topology when it does not answer within `timeoutMs`
 */
export async function connectRedisClient(topology: RedisTopology, role: RedisRole, timeoutMs = 5_000): Promise<RedisClient> {
  const client = openRedisClient(topology, role);
  client.on('error', () => {});
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      client.ping(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), timeoutMs);
      }),
    ]);
    return client;
  } catch (err) {
    client.disconnect();
    throw new StoreUnavailableError(`Redis (${describeTopology(topology)}) is unreachable: ${(err as Error).message}.`, {
      target: describeTopology(topology),
      cause: err,
    });
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The primaries behind a client: the client itself for a single Redis or a
 * Sentinel-managed primary, every master node of a cluster (after the client
 * has loaded the slot map).
 */
export async function primariesOf(client: RedisClient): Promise<Redis[]> {
  if (!(client instanceof Cluster)) return [client];
  if (client.status !== 'ready') {
    await new Promise<void>((resolve, reject) => {
      client.once('ready', () => resolve());
      client.once('end', () => reject(new StoreUnavailableError('The Redis Cluster connection ended before it was ready.')));
    });
  }
  return client.nodes('master');
}

/** Close a client without waiting for pending replies. */
export function closeClient(client: RedisClient | undefined): void {
  client?.disconnect();
}

/**
 * Hold `client`'s writes until the check phase of this turn of the event loop (`setImmediate`),
 * so the commands many callers issue in this turn leave in one write (one system call) instead of
 * one write each (the burst batching of `TickClaim.readGate`, `scheduler/loop/tick-claim.ts`). Nothing else changes: the commands, their order and their
 * replies are the same, and a held write waits at most until the end of this turn. A client that
 * is not connected, or a Cluster client (one connection per node), is left as it is. Holding
 * again in the same turn changes nothing.
 */
export function holdWritesThisTurn(client: RedisClient): void {
  if (client instanceof Cluster || client.status !== 'ready') return;
  const stream = client.stream;
  if (!stream || stream.destroyed || heldThisTurn.has(stream)) return;
  heldThisTurn.add(stream);
  stream.cork();
  setImmediate(() => {
    heldThisTurn.delete(stream);
    stream.uncork();
  });
}

/** Streams whose writes are held until the end of this turn: a second hold in the same turn is the first. */
const heldThisTurn = new WeakSet<object>();
