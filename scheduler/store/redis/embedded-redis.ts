/**
 * The embedded default Redis: a private `redis-server` from PATH, with its data
 * folder under `$HERMES_HOME/redis`, AOF on and `noeviction`, bound to loopback
 * on a free port. Its URL is written to `$HERMES_HOME/redis/redis.url` so other
 * `hermes` processes of the same home find it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync, rmSync, readFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { openRedisClient } from './connection-factory.ts';
import { StoreUnavailableError } from '../../errors/store-unavailable-error.ts';

/** A running embedded server. */
export interface EmbeddedRedis {
  /** `redis://127.0.0.1:<port>` */
  url: string;
  /** The server process id. */
  pid: number;
  /** Shuts the server down (AOF is flushed by SHUTDOWN) and removes the URL file. Idempotent. */
  stop(): Promise<void>;
}

/** Path of the URL file of the embedded server of `home`. */
export function embeddedUrlFile(home: string): string {
  return join(home, 'redis', 'redis.url');
}

/** URL of a previously started embedded server of `home`, if its file exists (it may be stale). */
export function readEmbeddedUrl(home: string): string | undefined {
  const file = embeddedUrlFile(home);
  if (!existsSync(file)) return undefined;
  const url = readFileSync(file, 'utf8').trim();
  return url.length > 0 ? url : undefined;
}

/** Ask the kernel for a free loopback TCP port. */
export async function freePort(): Promise<number> {
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
 * @param options.dir - data folder (created); AOF and the log live here
 * @param options.urlFile - where to publish the URL (optional)
 * @param options.appendonly - AOF on (default true); tests turn it off for speed
 * @param options.startTimeoutMs - how long to wait for PONG (default 10000)
 * @throws StoreUnavailableError when `redis-server` is not on PATH or does not answer
 */
export async function startEmbeddedRedis(options: {
  dir: string;
  urlFile?: string;
  appendonly?: boolean;
  port?: number;
  startTimeoutMs?: number;
}): Promise<EmbeddedRedis> {
  mkdirSync(options.dir, { recursive: true });
  const port = options.port ?? (await freePort());
  const args = [
    '--port', String(port),
    '--bind', '127.0.0.1',
    '--dir', options.dir,
    '--appendonly', options.appendonly === false ? 'no' : 'yes',
    '--save', '',
    '--maxmemory-policy', 'noeviction',
    '--logfile', 'redis.log',
    '--daemonize', 'no',
  ];
  let child: ChildProcess;
  try {
    // Its own process group (detached): a Ctrl+C typed into the terminal reaches `hermes up`, not
    // the server, so the server stays up while the worker drains and is then stopped by `stop()`.
    child = spawn('redis-server', args, { stdio: 'ignore', detached: true });
  } catch (err) {
    throw notFound(err);
  }
  // Whatever ends this process (an error, process.exit), the server does not outlive it:
  // SIGTERM makes redis-server flush the AOF and exit. Only SIGKILL of this process leaves it behind.
  const killOnExit = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  process.once('exit', killOnExit);
  child.once('exit', () => process.off('exit', killOnExit));
  const spawnError = new Promise<never>((_, reject) => {
    child.once('error', (err) => reject(notFound(err)));
    child.once('exit', (code) =>
      reject(
        new StoreUnavailableError(
          `redis-server exited with code ${code} at start; see ${join(options.dir, 'redis.log')}`,
          { target: `127.0.0.1:${port}` },
        ),
      ),
    );
  });
  spawnError.catch(() => {});
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + (options.startTimeoutMs ?? 10_000);
  for (;;) {
    const ok = await Promise.race([ping(url), spawnError]);
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new StoreUnavailableError(`redis-server on port ${port} did not answer within the start timeout`, {
        target: `127.0.0.1:${port}`,
      });
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  if (options.urlFile) writeFileSync(options.urlFile, `${url}\n`);
  let stopping: Promise<void> | undefined;
  return {
    url,
    pid: child.pid!,
    stop() {
      stopping ??= (async () => {
        if (options.urlFile) rmSync(options.urlFile, { force: true });
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise<void>((r) => child.once('exit', () => r()));
        child.kill('SIGTERM'); // redis-server treats SIGTERM as SHUTDOWN: AOF is flushed
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

/** True when a Redis at `url` answers PING within a second. */
export async function ping(url: string): Promise<boolean> {
  const client = openRedisClient({ kind: 'single', url }, 'commands', {
    lazyConnect: true,
    connectTimeout: 1000,
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
