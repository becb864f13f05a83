/**
 * A private `redis-server` from PATH: AOF on, `noeviction`, its files made with umask 077
 * (0600 files, 0700 folders), and hash values up to {@link HASH_LISTPACK_VALUE} bytes in
 * the small encoding. `hermes up` runs one on a unix socket with a password
 * (`embedded-supervisor.ts`); tests and benchmarks run them on a free loopback port.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { openRedisClient, type RedisTopology } from './connection-factory.ts';
import { StoreUnavailableError } from '../../errors/store-unavailable-error.ts';
import { ensurePrivateDir } from '../../private-files.ts';

/**
 * `hash-max-listpack-value` of the servers started here (redis-server's default: 64). The job hash
 * BullMQ writes for each schedule's pending job holds its options as one JSON value of 180–300
 * bytes, so under the default every such hash is a hashtable (~780 B for a loop's, ~490 B as a
 * listpack; docs/BENCHMARKS.md, scale). Only the servers the product starts set it: an operator's
 * Redis is used as configured. Passed as `hash-max-ziplist-value`, the name Redis 6 knows too.
 */
export const HASH_LISTPACK_VALUE = 512;

/** A running server. */
export interface EmbeddedRedis {
  /** `redis://127.0.0.1:<port>`, or the socket path of a server on a unix socket. */
  url: string;
  /** How to reach it (with its password, if it has one). */
  topology: RedisTopology;
  /** The server process id. */
  pid: number;
  /** Resolves when the server process has exited, however it ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Shuts the server down (AOF is flushed by SHUTDOWN). Idempotent. */
  stop(): Promise<void>;
}

/** Ports this process has handed out lately: the kernel may offer a just-closed port again before its first taker binds it. */
const recentlyGiven: number[] = [];

/**
 * Ask the kernel for a free loopback TCP port, never one this process handed
 * out among its last 64 (two servers started back to back must not share one).
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await kernelFreePort();
    if (recentlyGiven.includes(port)) continue;
    recentlyGiven.push(port);
    if (recentlyGiven.length > 64) recentlyGiven.shift();
    return port;
  }
}

async function kernelFreePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * Start a private `redis-server`.
 *
 * @param options.dir - data folder (created 0700); AOF and the log live here
 * @param options.socket - listen on this unix socket only (mode 0700), no TCP port
 * @param options.port - else this loopback port (default a free one)
 * @param options.password - `requirepass`, handed over on the server's stdin (never on its command line)
 * @param options.appendonly - AOF on (default true); tests turn it off for speed
 * @param options.startTimeoutMs - how long to wait for PONG (default 10000)
 * @param options.stock - redis-server's own encoding defaults instead of {@link HASH_LISTPACK_VALUE}
 *   (a benchmark's figures for an operator's Redis)
 * @throws StoreUnavailableError when `redis-server` is not on PATH or does not answer
 */
export async function startEmbeddedRedis(options: {
  dir: string;
  socket?: string;
  port?: number;
  password?: string;
  appendonly?: boolean;
  startTimeoutMs?: number;
  stock?: boolean;
}): Promise<EmbeddedRedis> {
  ensurePrivateDir(options.dir);
  const port = options.socket ? 0 : (options.port ?? (await freePort()));
  const where = options.socket ? `unix:${options.socket}` : `127.0.0.1:${port}`;
  const listen = options.socket
    ? ['--port', '0', '--unixsocket', options.socket, '--unixsocketperm', '700']
    : ['--port', String(port), '--bind', '127.0.0.1'];
  const args = [
    // The password comes on stdin (`-`: read more configuration there): /proc/<pid>/cmdline is world-readable.
    ...(options.password ? ['-'] : []),
    ...listen,
    '--dir',
    options.dir,
    '--appendonly',
    options.appendonly === false ? 'no' : 'yes',
    '--save',
    '',
    '--maxmemory-policy',
    'noeviction',
    ...(options.stock ? [] : ['--hash-max-ziplist-value', String(HASH_LISTPACK_VALUE)]),
    '--logfile',
    'redis.log',
    '--daemonize',
    'no',
  ];
  let child: ChildProcess;
  // umask 077 for the server: its AOF, RDB, log and socket are this user's alone (the child
  // inherits the mask at spawn, which is synchronous; this process's own mask is restored).
  const umask = process.umask(0o077);
  try {
    // Its own process group (detached): a Ctrl+C typed into the terminal reaches `hermes up`, not
    // the server, so the server stays up while the worker drains and is then stopped by `stop()`.
    child = spawn('redis-server', args, { stdio: [options.password ? 'pipe' : 'ignore', 'ignore', 'ignore'], detached: true });
  } catch (err) {
    throw notFound(err);
  } finally {
    process.umask(umask);
  }
  if (options.password) {
    child.stdin!.on('error', () => {}); // an early exit is reported below
    child.stdin!.end(`requirepass ${options.password}\n`);
  }
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.once('error', () => resolve({ code: null, signal: null }));
  });
  // Whatever ends this process (an error, process.exit), the server does not outlive it:
  // SIGTERM makes redis-server flush the AOF and exit. Only SIGKILL of this process leaves it behind.
  const killOnExit = () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      child.kill('SIGCONT');
    }
  };
  process.once('exit', killOnExit);
  child.once('exit', () => process.off('exit', killOnExit));
  const spawnError = new Promise<never>((_, reject) => {
    child.once('error', (err) => reject(notFound(err)));
    child.once('exit', (code) =>
      reject(
        new StoreUnavailableError(`redis-server exited with code ${code} at start; see ${join(options.dir, 'redis.log')}`, {
          target: where,
        }),
      ),
    );
  });
  spawnError.catch(() => {});
  const url = options.socket ?? `redis://127.0.0.1:${port}`;
  const topology: RedisTopology = { kind: 'single', url, ...(options.password ? { password: options.password } : {}) };
  const deadline = Date.now() + (options.startTimeoutMs ?? 10_000);
  for (;;) {
    const ok = await Promise.race([ping(topology), spawnError]);
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new StoreUnavailableError(`redis-server on ${where} did not answer within the start timeout`, { target: where });
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  let stopping: Promise<void> | undefined;
  return {
    url,
    topology,
    pid: child.pid!,
    exited,
    stop() {
      stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        child.kill('SIGTERM'); // redis-server treats SIGTERM as SHUTDOWN: AOF is flushed
        child.kill('SIGCONT'); // a stopped (SIGSTOP) server handles it too
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      })();
      return stopping;
    },
  };
}

function notFound(err: unknown): StoreUnavailableError {
  return new StoreUnavailableError(
    'Could not start the embedded Redis: no `redis-server` binary on PATH. ' +
      'Install Redis 6.2 or newer (e.g. `apt-get install redis-server`) or set REDIS_URL=redis://host:6379.',
    { cause: err },
  );
}

/**
 * How long `ping` waits for a connection, ms. A refused connection fails at once whatever it is; this bounds a
 * server that does not answer. A second was too short for a busy host: a live Redis was reported unreachable
 * while other work kept both cores busy.
 */
const PING_CONNECT_TIMEOUT_MS = 5_000;

/** True when a Redis at `url` (or a single-server topology) answers PING once connected (`PING_CONNECT_TIMEOUT_MS`). */
export async function ping(url: string | RedisTopology): Promise<boolean> {
  const client = openRedisClient(typeof url === 'string' ? { kind: 'single', url } : url, 'commands', {
    lazyConnect: true,
    connectTimeout: PING_CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}
