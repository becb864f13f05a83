/**
 * The embedded Redis of a `HERMES_HOME`, as `hermes up` runs it: on the unix socket
 * `<home>/redis/redis.sock` only (no TCP port), in a 0700 folder, with a random
 * `requirepass` kept in `<home>/redis/redis.pass` (0600, made once and reused) and a new
 * random run id per start, stored in the server and in `<home>/redis/redis.run` (0600).
 * Every process checks all of it before it uses the server (`embedded-identity.ts`).
 *
 * Supervised: a server that exits without being asked (a crash, `kill -9`) is logged and
 * started again on the same socket with the same data (AOF), password and run id; clients
 * reconnect by themselves. At most `maxRestarts` restarts within `RESTART_WINDOW_MS`; past that
 * (or when a restart cannot bring it up) `failed` resolves with the reason, and the owner stops
 * the stack.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { StoreUnavailableError } from '../../errors/store-unavailable-error.ts';
import { UntrustedRedisError } from '../../errors/untrusted-redis-error.ts';
import { currentUid, ensurePrivateDir, lstatOrUndefined, OPEN_TO_OTHERS, writePrivateFile } from '../../private-files.ts';
import { EMBEDDED_RUN_ID_KEY } from '../keys.ts';
import { closeClient, openRedisClient, type RedisTopology } from './connection-factory.ts';
import { startEmbeddedRedis, type EmbeddedRedis } from './embedded-redis.ts';
import { assertPrivateFolder, embeddedPaths, MAX_SOCKET_PATH_BYTES, probeEmbeddedRedis, type EmbeddedPaths } from './embedded-identity.ts';

/** Restarts are counted over this window: more than `maxRestarts` in it and the supervisor gives up. */
export const RESTART_WINDOW_MS = 5 * 60_000;

/** Waits before the n-th restart in a row (the last one repeats). */
const RESTART_BACKOFF_MS = [100, 500, 1_000, 2_000, 5_000];

/** A supervised embedded Redis. */
export interface SupervisedRedis {
  /** How every process reaches it (checked on each connection). */
  readonly topology: RedisTopology;
  readonly paths: EmbeddedPaths;
  /** The current server process id (a restart changes it). */
  readonly pid: number;
  /** Restarts so far. */
  readonly restarts: number;
  /** Resolves (never rejects) with the reason when the server died and could not be kept running. */
  readonly failed: Promise<Error>;
  /** Stops supervising, then the server (AOF flushed); removes the run file and the socket. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Start the embedded Redis of `home` and supervise it.
 * @param options.maxRestarts - restarts allowed within `RESTART_WINDOW_MS` (`redis.embedded_max_restarts`); 0 = none
 * @throws UntrustedRedisError when the folder or a socket there is not this user's own, or a
 *   server that is not this home's listens there; StoreUnavailableError when one of this home
 *   already runs, or `redis-server` cannot be started
 */
export async function startSupervisedRedis(options: {
  home: string;
  log: Logger;
  maxRestarts: number;
  appendonly?: boolean;
  startTimeoutMs?: number;
}): Promise<SupervisedRedis> {
  const { log } = options;
  const paths = embeddedPaths(options.home);
  if (Buffer.byteLength(paths.socket) > MAX_SOCKET_PATH_BYTES) {
    throw new StoreUnavailableError(
      `HERMES_HOME is too long for the embedded Redis's socket (${paths.socket} is over ${MAX_SOCKET_PATH_BYTES} bytes); use a shorter HERMES_HOME.`,
      { target: paths.socket },
    );
  }
  prepareFolder(paths);
  const state = await probeEmbeddedRedis(options.home);
  if (state === 'running') {
    throw new StoreUnavailableError(`The embedded Redis of ${options.home} is already running (${paths.socket}).`, {
      target: paths.socket,
    });
  }
  const password = ensurePassword(paths);
  const runId = randomBytes(16).toString('hex');
  // Until the new run id is stored, clients find no run file and wait (never an old run's id).
  rmSync(paths.runFile, { force: true });
  const launch = async (): Promise<EmbeddedRedis> => {
    removeStaleSocket(paths);
    const server = await startEmbeddedRedis({
      dir: paths.dir,
      socket: paths.socket,
      password,
      appendonly: options.appendonly ?? true,
      startTimeoutMs: options.startTimeoutMs ?? 30_000,
    });
    try {
      await storeRunId(server, runId, options.startTimeoutMs ?? 30_000);
      writePrivateFile(paths.runFile, `${runId}\n`);
      return server;
    } catch (err) {
      await server.stop();
      throw err;
    }
  };

  let current = await launch();
  let restarts = 0;
  let stopping = false;
  let restarting: Promise<void> | undefined;
  const recent: number[] = [];
  let fail!: (err: Error) => void;
  const failed = new Promise<Error>((resolve) => (fail = resolve));

  const watch = (server: EmbeddedRedis) => {
    void server.exited.then((how) => {
      if (stopping || server !== current) return;
      log.error(
        { code: how.code, signal: how.signal, redisPid: server.pid, socket: paths.socket },
        options.maxRestarts > 0
          ? 'embedded Redis exited unexpectedly; restarting it on the same socket with its data'
          : 'embedded Redis exited unexpectedly; restarts are off (redis.embedded_max_restarts: 0)',
      );
      restarting = restart(how);
    });
  };

  const restart = async (how: { code: number | null; signal: NodeJS.Signals | null }): Promise<void> => {
    const ended = how.signal ? `was killed (${how.signal})` : `exited with code ${how.code}`;
    for (let attempt = 0; !stopping; attempt++) {
      const now = Date.now();
      while (recent.length > 0 && now - recent[0]! > RESTART_WINDOW_MS) recent.shift();
      if (recent.length >= options.maxRestarts) {
        const why =
          options.maxRestarts === 0
            ? 'restarts are off (redis.embedded_max_restarts: 0)'
            : `it was restarted ${recent.length} time(s) in the last ${RESTART_WINDOW_MS / 60_000} minutes (redis.embedded_max_restarts: ${options.maxRestarts})`;
        fail(
          new StoreUnavailableError(
            `The embedded Redis (${paths.socket}) ${ended} and is not restarted again: ${why}. The stack stops; see ${paths.logFile}.`,
            { target: paths.socket },
          ),
        );
        return;
      }
      recent.push(now);
      await new Promise((r) => setTimeout(r, RESTART_BACKOFF_MS[Math.min(attempt, RESTART_BACKOFF_MS.length - 1)]));
      if (stopping) return;
      try {
        const server = await launch();
        current = server;
        restarts++;
        if (stopping) {
          await server.stop();
          return;
        }
        log.warn({ redisPid: server.pid, restarts, socket: paths.socket }, 'embedded Redis restarted');
        watch(server);
        return;
      } catch (err) {
        log.error({ err: (err as Error).message, attempt: attempt + 1 }, 'embedded Redis restart failed');
        if (err instanceof UntrustedRedisError) {
          fail(err);
          return;
        }
      }
    }
  };

  watch(current);
  let stopped: Promise<void> | undefined;
  return {
    topology: { kind: 'embedded', home: options.home },
    paths,
    get pid() {
      return current.pid;
    },
    get restarts() {
      return restarts;
    },
    failed,
    stop() {
      stopped ??= (async () => {
        stopping = true;
        await restarting;
        await current.stop();
        rmSync(paths.runFile, { force: true });
        // A server that had to be killed leaves its socket behind.
        removeStaleSocket(paths);
      })();
      return stopped;
    },
  };
}

/**
 * `HERMES_HOME` (created 0700 when missing; an existing one is left as it is: one others may
 * write is refused, here and by `loadConfig` before, `scheduler/config/home-check.ts`) and its
 * `redis` folder (created 0700; an earlier version's 0755 folder and 0644 files of this user are
 * narrowed to 0700/0600), then checked. The `redis.url` of earlier versions, which named a TCP
 * port, is removed: never read.
 * @throws UntrustedRedisError for a folder that is not this user's own
 */
function prepareFolder(paths: EmbeddedPaths): void {
  ensurePrivateDir(paths.home, { narrow: false });
  ensurePrivateDir(paths.dir);
  assertPrivateFolder(paths);
  narrowContents(paths.dir, 2);
  rmSync(paths.legacyUrlFile, { force: true });
}

function narrowContents(dir: string, depth: number): void {
  const uid = currentUid();
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = lstatOrUndefined(p);
    if (!st || st.uid !== uid || (st.mode & OPEN_TO_OTHERS) === 0) {
      if (st?.isDirectory() && depth > 1) narrowContents(p, depth - 1);
      continue;
    }
    if (st.isFile()) chmodSync(p, 0o600);
    else if (st.isDirectory()) {
      chmodSync(p, 0o700);
      if (depth > 1) narrowContents(p, depth - 1);
    }
  }
}

/** The password of `redis.pass`, made (64 hex digits, 0600) when there is none. */
function ensurePassword(paths: EmbeddedPaths): string {
  const st = lstatOrUndefined(paths.passwordFile);
  if (st) {
    if (!st.isFile() || st.uid !== currentUid()) {
      throw new UntrustedRedisError(`${paths.passwordFile} is not a file of this user; remove it.`, { target: paths.socket });
    }
    if ((st.mode & OPEN_TO_OTHERS) !== 0) chmodSync(paths.passwordFile, 0o600);
    const password = readFileSync(paths.passwordFile, 'utf8').trim();
    if (/^[0-9a-f]{64}$/.test(password)) return password;
  }
  const password = randomBytes(32).toString('hex');
  writePrivateFile(paths.passwordFile, `${password}\n`);
  return password;
}

/** Remove a socket left behind (this user's, in the checked folder); anything else there is refused. */
function removeStaleSocket(paths: EmbeddedPaths): void {
  const st = lstatOrUndefined(paths.socket);
  if (!st) return;
  if (!st.isSocket() || st.uid !== currentUid()) {
    throw new UntrustedRedisError(`${paths.socket} is not a socket of this user; it is left alone and not used.`, { target: paths.socket });
  }
  rmSync(paths.socket, { force: true });
}

/** SET the run id on the new server (retried while it is still loading its data). */
async function storeRunId(server: EmbeddedRedis, runId: string, timeoutMs: number): Promise<void> {
  const client = openRedisClient(server.topology, 'commands', {
    lazyConnect: true,
    connectTimeout: 2_000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  const deadline = Date.now() + timeoutMs;
  try {
    await client.connect();
    for (;;) {
      try {
        await client.set(EMBEDDED_RUN_ID_KEY, runId);
        return;
      } catch (err) {
        if (!/LOADING/.test((err as Error).message) || Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  } finally {
    closeClient(client);
  }
}
