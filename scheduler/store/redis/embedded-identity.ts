/**
 * Whose embedded Redis this is.
 *
 * The embedded Redis of a `HERMES_HOME` (started by `hermes up`, `embedded-supervisor.ts`)
 * listens only on the unix socket `<home>/redis/redis.sock` — no TCP port — in a folder only
 * this user may enter, requires the password kept in `<home>/redis/redis.pass`, and holds a
 * random run id (key `EMBEDDED_RUN_ID_KEY`) that its starter also wrote to `<home>/redis/redis.run`.
 * All three files are 0600 in the 0700 folder.
 *
 * Before a process uses it — on every connection, reconnects included (the connector of
 * `connection-factory.ts`) — it checks, and refuses anything else with `UntrustedRedisError`:
 *
 *   1. `HERMES_HOME` belongs to this user (or root) and others cannot write to it; the `redis`
 *      folder is a real folder (not a symlink) of this user with mode 0700;
 *   2. the socket is a socket of this user (`lstat`: a symlink, a file or another user's socket
 *      is refused), so only this user's processes can have bound it;
 *   3. on that very connection, before any other command: `AUTH` with the password succeeds and
 *      `GET` of the run id key returns the run file's content. A server that says OK to any
 *      password still cannot know the run id.
 *
 * A socket of this user that nobody listens on (a crash left it) is "not running", never a
 * reason to look elsewhere: there is no other address to fall back to.
 */
import { timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';
import { join } from 'node:path';
import { StoreUnavailableError } from '../../errors/store-unavailable-error.ts';
import { UntrustedRedisError } from '../../errors/untrusted-redis-error.ts';
import { currentUid, lstatOrUndefined, modeText, OPEN_TO_OTHERS } from '../../private-files.ts';
import { EMBEDDED_RUN_ID_KEY } from '../keys.ts';

/** Where the embedded Redis of a home keeps its socket, secrets and data. */
export interface EmbeddedPaths {
  home: string;
  /** `<home>/redis`: data (AOF), log, socket and secrets; mode 0700. */
  dir: string;
  /** `<home>/redis/redis.sock`, the only address the server listens on. */
  socket: string;
  /** `<home>/redis/redis.pass`: the server's `requirepass` (0600). */
  passwordFile: string;
  /** `<home>/redis/redis.run`: the run id the starter stored in the server (0600). */
  runFile: string;
  /** `<home>/redis/redis.log` */
  logFile: string;
  /** `<home>/redis/redis.url`: the TCP address earlier versions published; never read. */
  legacyUrlFile: string;
}

/** Longest unix socket path the kernel takes (`sun_path` is 108 bytes with its NUL). */
export const MAX_SOCKET_PATH_BYTES = 107;

/** The paths of the embedded Redis of `home`. */
export function embeddedPaths(home: string): EmbeddedPaths {
  const dir = join(home, 'redis');
  return {
    home,
    dir,
    socket: join(dir, 'redis.sock'),
    passwordFile: join(dir, 'redis.pass'),
    runFile: join(dir, 'redis.run'),
    logFile: join(dir, 'redis.log'),
    legacyUrlFile: join(dir, 'redis.url'),
  };
}

function untrusted(paths: EmbeddedPaths, why: string): UntrustedRedisError {
  return new UntrustedRedisError(
    `Refusing the embedded Redis at ${paths.socket}: ${why}. Only a server started by \`hermes up\` of this HERMES_HOME, ` +
      'as this user, is used (docs/OPERATIONS.md, "The embedded Redis").',
    { target: paths.socket },
  );
}

/**
 * Check `HERMES_HOME` and the `redis` folder (point 1 above).
 * @throws UntrustedRedisError naming what is wrong
 */
export function assertPrivateFolder(paths: EmbeddedPaths): void {
  const uid = currentUid();
  const home = statSync(paths.home);
  if (home.uid !== uid && home.uid !== 0)
    throw untrusted(paths, `HERMES_HOME ${paths.home} belongs to uid ${home.uid}, not to this user (uid ${uid})`);
  if ((home.mode & 0o022) !== 0)
    throw untrusted(paths, `others may write to HERMES_HOME ${paths.home} (mode ${modeText(home.mode)}); chmod 700 it`);
  const dir = lstatOrUndefined(paths.dir);
  if (!dir) throw new StoreUnavailableError(`No embedded Redis: ${paths.dir} does not exist.`, { target: paths.socket });
  if (!dir.isDirectory()) throw untrusted(paths, `${paths.dir} is not a folder (a symlink or a file)`);
  if (dir.uid !== uid) throw untrusted(paths, `${paths.dir} belongs to uid ${dir.uid}, not to this user (uid ${uid})`);
  if ((dir.mode & OPEN_TO_OTHERS) !== 0)
    throw untrusted(paths, `${paths.dir} is open to others (mode ${modeText(dir.mode)}, expected 0700)`);
}

/**
 * Whether a socket is there, after checking the folder and the socket (points 1 and 2).
 * @returns false when there is no socket (no embedded Redis runs)
 * @throws UntrustedRedisError for a folder or socket that is not this user's own
 */
export function checkEmbeddedSocket(paths: EmbeddedPaths): boolean {
  if (!lstatOrUndefined(paths.dir)) return false;
  const sock = lstatOrUndefined(paths.socket);
  if (!sock) return false;
  assertPrivateFolder(paths);
  if (sock.isSymbolicLink()) throw untrusted(paths, 'the socket path is a symlink');
  if (!sock.isSocket()) throw untrusted(paths, 'the socket path is not a socket');
  const uid = currentUid();
  if (sock.uid !== uid) throw untrusted(paths, `the socket belongs to uid ${sock.uid}, not to this user (uid ${uid})`);
  return true;
}

/** The password and the run id of the embedded Redis, from their files. */
export interface EmbeddedSecrets {
  password: string;
  runId: string;
}

function readSecretFile(paths: EmbeddedPaths, file: string, what: string): string {
  const st = lstatOrUndefined(file);
  if (!st) {
    throw what === 'run id'
      ? new StoreUnavailableError(
          `The embedded Redis at ${paths.socket} has no run id file (${file}): it is starting, or it was not started by \`hermes up\`.`,
          { target: paths.socket },
        )
      : untrusted(paths, `there is no ${what} file (${file})`);
  }
  if (!st.isFile() || st.uid !== currentUid()) throw untrusted(paths, `${file} is not a file of this user`);
  if ((st.mode & OPEN_TO_OTHERS) !== 0) throw untrusted(paths, `${file} is open to others (mode ${modeText(st.mode)}, expected 0600)`);
  const value = readFileSync(file, 'utf8').trim();
  if (!/^[0-9a-f]{32,128}$/.test(value)) throw untrusted(paths, `${file} does not hold a ${what}`);
  return value;
}

/**
 * The password and the run id (the caller has checked the folder).
 * @throws UntrustedRedisError when the password file is missing or not this user's 0600 file;
 *   StoreUnavailableError when the run file is missing (a start in progress)
 */
export function readEmbeddedSecrets(paths: EmbeddedPaths): EmbeddedSecrets {
  return { password: readSecretFile(paths, paths.passwordFile, 'password'), runId: readSecretFile(paths, paths.runFile, 'run id') };
}

/**
 * Open a connection to the embedded Redis of `paths` and prove it is this home's own (points
 * 1–3 above), on the connection that is then used: the socket is returned authenticated, with
 * nothing left to read.
 * @param onSocket - gets the socket as soon as it exists (so a caller can close it early)
 * @throws UntrustedRedisError for a server that is not this home's; StoreUnavailableError when
 *   none runs there (no socket, nobody listening), it is still loading its data, or it does
 *   not answer within `timeoutMs`
 */
export async function openVerifiedSocket(paths: EmbeddedPaths, timeoutMs: number, onSocket?: (socket: Socket) => void): Promise<Socket> {
  if (!checkEmbeddedSocket(paths)) {
    throw new StoreUnavailableError(`No embedded Redis runs on ${paths.socket}.`, { target: paths.socket });
  }
  const socket = createConnection({ path: paths.socket });
  onSocket?.(socket);
  try {
    await withTimeout(
      connected(socket),
      timeoutMs,
      () =>
        new StoreUnavailableError(`The embedded Redis at ${paths.socket} did not accept a connection within ${timeoutMs} ms.`, {
          target: paths.socket,
        }),
    );
  } catch (err) {
    socket.destroy();
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ECONNREFUSED' || code === 'ENOENT') {
      throw new StoreUnavailableError(`No embedded Redis runs on ${paths.socket} (nobody listens on it).`, {
        target: paths.socket,
        cause: err,
      });
    }
    throw err;
  }
  try {
    // Read after the connect: a socket nobody listens on is "not running" whatever the files say.
    const secrets = readEmbeddedSecrets(paths);
    const [auth, run] = await withTimeout(
      exchange(socket, [
        ['AUTH', secrets.password],
        ['GET', EMBEDDED_RUN_ID_KEY],
      ]),
      timeoutMs,
      () =>
        new StoreUnavailableError(`The embedded Redis at ${paths.socket} did not answer within ${timeoutMs} ms.`, { target: paths.socket }),
    );
    if (auth!.error) throw untrusted(paths, "the server does not accept this home's password");
    if (run!.error?.startsWith('LOADING')) {
      throw new StoreUnavailableError(`The embedded Redis at ${paths.socket} is loading its data.`, { target: paths.socket });
    }
    if (run!.error) throw untrusted(paths, `the server refused to show its run id (${run!.error.split(' ')[0]})`);
    if (!sameText(run!.value, secrets.runId)) throw untrusted(paths, 'the server holds another run id than the one its starter stored');
    return socket;
  } catch (err) {
    socket.destroy();
    if (err instanceof UntrustedRedisError || err instanceof StoreUnavailableError) throw err;
    throw untrusted(paths, `the server does not speak Redis's protocol (${(err as Error).message})`);
  }
}

/** What a home's embedded Redis is: none, a socket nobody listens on, or this home's own server. */
export type EmbeddedState = 'absent' | 'stale' | 'running';

/**
 * Look at the embedded Redis of `home`.
 * @throws UntrustedRedisError for a server (or folder, or socket) that is not this home's own;
 *   StoreUnavailableError when one runs but cannot be checked now (loading, not answering, starting)
 */
export async function probeEmbeddedRedis(home: string, timeoutMs = 2_000): Promise<EmbeddedState> {
  const paths = embeddedPaths(home);
  if (!checkEmbeddedSocket(paths)) return 'absent';
  try {
    (await openVerifiedSocket(paths, timeoutMs)).destroy();
    return 'running';
  } catch (err) {
    if (err instanceof StoreUnavailableError && /nobody listens on it/.test(err.message)) return 'stale';
    throw err;
  }
}

function sameText(a: string | null, b: string): boolean {
  if (a === null) return false;
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function connected(socket: Socket): Promise<void> {
  return new Promise((resolve, reject) => {
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve();
    });
    socket.once('error', reject);
  });
}

async function withTimeout<T>(p: Promise<T>, ms: number, error: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(error()), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** One RESP2 reply: a status, an error, an integer or a bulk string (`null` for nil). */
interface Reply {
  error?: string;
  value: string | null;
}

function encodeCommand(args: string[]): Buffer {
  const parts = [`*${args.length}\r\n`];
  for (const a of args) parts.push(`$${Buffer.byteLength(a)}\r\n${a}\r\n`);
  return Buffer.from(parts.join(''));
}

/** Parse one reply at the start of `buf`; `undefined` while it is incomplete. */
function parseReply(buf: Buffer): { reply: Reply; length: number } | undefined {
  const eol = buf.indexOf('\r\n');
  if (eol < 0) return undefined;
  const head = buf.subarray(1, eol).toString('utf8');
  switch (String.fromCharCode(buf[0]!)) {
    case '+':
    case ':':
      return { reply: { value: head }, length: eol + 2 };
    case '-':
      return { reply: { error: head, value: null }, length: eol + 2 };
    case '$': {
      const n = Number(head);
      if (!Number.isInteger(n) || n < -1 || n > 1024) throw new Error('unexpected bulk length');
      if (n === -1) return { reply: { value: null }, length: eol + 2 };
      if (buf.length < eol + 2 + n + 2) return undefined;
      return { reply: { value: buf.subarray(eol + 2, eol + 2 + n).toString('utf8') }, length: eol + 2 + n + 2 };
    }
    default:
      throw new Error('unexpected reply type');
  }
}

/** Send `commands` pipelined and read exactly one reply each; anything more is a protocol error. */
function exchange(socket: Socket, commands: string[][]): Promise<Reply[]> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const replies: Reply[] = [];
    const finish = (err?: Error) => {
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('close', onClose);
      if (err) reject(err);
      else resolve(replies);
    };
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (buf.length > 64 * 1024) return finish(new Error('reply too long'));
      try {
        for (let r = parseReply(buf); r; r = parseReply(buf)) {
          replies.push(r.reply);
          buf = buf.subarray(r.length);
          if (replies.length > commands.length) break;
        }
      } catch (err) {
        return finish(err as Error);
      }
      if (replies.length > commands.length || (replies.length === commands.length && buf.length > 0))
        return finish(new Error('more replies than commands'));
      if (replies.length === commands.length) finish();
    };
    const onError = (err: Error) => finish(err);
    const onClose = () => finish(new Error('connection closed during the check'));
    socket.on('data', onData);
    socket.once('error', onError);
    socket.once('close', onClose);
    socket.write(Buffer.concat(commands.map(encodeCommand)));
  });
}
