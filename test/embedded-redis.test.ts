/**
 * The embedded Redis belongs to this user (issue: "Nobody in", H1 and H2). Real processes:
 * `hermes up`, `hermes status`, `hermes worker`, `redis-server`, `redis-cli`; another local user
 * is `nobody`, through `runuser` (the suite runs as root).
 *
 * - H1: `hermes up`'s Redis listens on a unix socket only, refuses an unauthenticated client,
 *   keeps its files 0600 in 0700 folders; as `nobody` the socket cannot be reached (nor bound).
 * - H2: what sits at the embedded address and is not this home's own server (another user's, a
 *   server without the password, one without the run id, a symlink, a stale `redis.url`) is
 *   refused by every process; a `kill -9` of the embedded server is healed and a loop keeps
 *   firing; a server that cannot be kept running stops the stack.
 * - `hermes up` exits on SIGTERM within its stop deadline when Redis does not answer.
 * - A `config.yaml` others may read, and an operator's Redis off loopback without a password,
 *   are warned about.
 *
 * Each test has its own home, servers and processes, so they run concurrently (most of their time
 * is waiting: on a stop deadline, a restart, processes starting).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe } from 'vitest';
import { configFileWarning, loadConfig } from '../scheduler/config/config.ts';
import { createLogger } from '../scheduler/logger.ts';
import { UntrustedRedisError } from '../scheduler/errors/untrusted-redis-error.ts';
import { StoreUnavailableError } from '../scheduler/errors/store-unavailable-error.ts';
import { Keys } from '../scheduler/store/keys.ts';
import { openRedisWarning, resolveRedis } from '../scheduler/store/redis/connect.ts';
import { openRedisClient, topologyFromConfig } from '../scheduler/store/redis/connection-factory.ts';
import { embeddedPaths, probeEmbeddedRedis } from '../scheduler/store/redis/embedded-identity.ts';
import { freePort, startEmbeddedRedis } from '../scheduler/store/redis/embedded-redis.ts';
import { sessionStoreFor } from '../scheduler/services.ts';
import { connectCli } from '../cli/connect-cli.ts';
import { applyLoopCommand, runnerFromFlags } from '../cli/commands/loop.ts';
import { testEnv } from './support/env.ts';
import { HERMES_BIN, SPAWN_START_TIMEOUT_MS, waitFor } from './support/stack.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { captureLog } from './support/log-capture.ts';
import { alive } from './support/child-processes.ts';
import { tempDirFor } from './support/temp-dirs.ts';

const run = promisify(execFile);
const NOBODY_UID = Number((await run('id', ['-u', 'nobody'])).stdout.trim());

/** A fresh HERMES_HOME (0700, as mkdtemp makes it). */
function newHome(cleanups: CleanUp[]): string {
  return tempDirFor(cleanups, 'hermes-own-');
}

/** Environment of a `hermes` process on `home`'s embedded Redis (no REDIS_URL, no keys). */
function envFor(home: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, HERMES_HOME: home, API_SERVER_PORT: '0', HERMES_LOG_LEVEL: 'info', ...extra };
  for (const k of [
    'REDIS_URL',
    'REDIS_CLUSTER_NODES',
    'REDIS_SENTINELS',
    'REDIS_PASSWORD',
    'HERMES_REDIS_PREFIX',
    'TELEGRAM_BOT_TOKEN',
    'API_SERVER_HOST',
    'API_SERVER_KEY',
    'OPENAI_BASE_URL',
    'OPENAI_API_KEY',
  ]) {
    if (!(k in extra)) delete env[k];
  }
  return env;
}

/** A running `hermes` process whose JSON log lines (stderr) are parsed as they come. */
interface HermesRun {
  child: ChildProcess;
  logs: Array<Record<string, unknown>>;
  stdout(): string;
  stderr(): string;
  /** Wait for a log line with this `msg` (and `where`, if given). */
  log(msg: string, timeoutMs?: number, where?: (l: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  exited: Promise<number | null>;
}

function startHermes(cleanups: CleanUp[], args: string[], env: NodeJS.ProcessEnv): HermesRun {
  const child = spawn(process.execPath, [HERMES_BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let partial = '';
  const logs: Array<Record<string, unknown>> = [];
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
    partial += d.toString();
    const lines = partial.split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      try {
        logs.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // not a log line (a `hermes: …` error line)
      }
    }
  });
  const exited = new Promise<number | null>((r) => child.on('close', r));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
    // A `hermes up` killed by a failing test leaves its redis-server (own process group) behind.
    // Only a process that is still that server (its title names the socket), never a reused pid.
    for (const l of logs) {
      if (typeof l.redisPid !== 'number' || typeof l.socket !== 'string') continue;
      let title: string;
      try {
        title = readFileSync(`/proc/${l.redisPid}/cmdline`, 'utf8');
      } catch {
        continue;
      }
      if (title.includes('redis-server') && title.includes(l.socket)) process.kill(l.redisPid, 'SIGKILL');
    }
  });
  return {
    child,
    logs,
    exited,
    stdout: () => out,
    stderr: () => err,
    log: (msg, timeoutMs = SPAWN_START_TIMEOUT_MS, where = () => true) =>
      waitFor(
        () => {
          const found = logs.find((l) => l.msg === msg && where(l));
          if (!found && child.exitCode !== null) throw new Error(`exited (${child.exitCode}) before "${msg}": ${err.slice(-2000)}`);
          return found;
        },
        timeoutMs,
        `log "${msg}"`,
      ),
  };
}

/** Run a `hermes` command to its end. */
async function hermes(
  cleanups: CleanUp[],
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const r = startHermes(cleanups, args, env);
  const code = await r.exited;
  return { code, stdout: r.stdout(), stderr: r.stderr() };
}

/** Run a command; its exit code and output, whatever the code. */
async function sh(cmd: string, args: string[], env?: NodeJS.ProcessEnv): Promise<{ code: number; out: string }> {
  try {
    const r = await run(cmd, args, { env, timeout: 10_000 });
    return { code: 0, out: r.stdout + r.stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

/** TCP sockets (listening or not) held by process `pid`, from /proc. */
function tcpSocketsOf(pid: number): string[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const found: string[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length > 9 && inodes.has(cols[9]!)) found.push(`${table} ${cols[1]} state ${cols[3]}`);
    }
  }
  return found;
}

/** Every path under `dir` whose mode gives group or others any access. */
function openToOthers(dir: string): string[] {
  const bad: string[] = [];
  const walk = (p: string) => {
    const st = lstatSync(p);
    if ((st.mode & 0o077) !== 0) bad.push(`${p} ${(st.mode & 0o777).toString(8)}`);
    if (st.isDirectory()) for (const name of readdirSync(p)) walk(join(p, name));
  };
  walk(dir);
  return bad;
}

/** A `redis-server` run by `nobody` (killed with its process group at cleanup). */
async function nobodysRedis(cleanups: CleanUp[], args: string[], ready: () => boolean | Promise<boolean>): Promise<ChildProcess> {
  const child = spawn('runuser', ['-u', 'nobody', '--', 'redis-server', '--save', '', '--appendonly', 'no', '--daemonize', 'no', ...args], {
    stdio: 'ignore',
    detached: true,
  });
  cleanups.push(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // gone
    }
  });
  await waitFor(
    async () => (await ready()) || (child.exitCode !== null ? Promise.reject(new Error("nobody's redis-server exited")) : false),
    10_000,
    "nobody's redis-server",
  );
  return child;
}

/**
 * `hermes loop 1s tick --run 'echo x'` on `home`'s embedded Redis, run in this process (the command's
 * own code, connecting as `hermes` does: `hermes status` in H1 is the process that reaches it).
 */
async function setLoop(home: string): Promise<void> {
  const config = loadConfig({ env: { HERMES_HOME: home, HERMES_LOOPS_MIN_INTERVAL_SECONDS: '1' } });
  const reply = await applyLoopCommand(
    { config, connect: () => connectCli(config) },
    'main',
    '1s tick',
    runnerFromFlags(config, { run: 'echo x' }),
  );
  if (!reply.startsWith('Loop set')) throw new Error(reply);
}

/** Connections a server has accepted so far (this read is one of them). */
async function connectionsOf(args: string[]): Promise<number> {
  const r = await sh('redis-cli', [...args, 'INFO', 'stats']);
  return Number(/total_connections_received:(\d+)/.exec(r.out)?.[1]);
}

describe.concurrent('H1: the embedded Redis is reachable by this user only', () => {
  it('listens on a unix socket only, refuses a client without the password, keeps its files 0600 in 0700 folders; nobody can reach or take its socket', async ({
    cleanups,
    expect,
  }) => {
    const home = newHome(cleanups);
    const up = startHermes(cleanups, ['up', '--no-chat', '--no-gateway'], envFor(home));
    const started = await up.log('embedded Redis started');
    await up.log('worker started');
    const paths = embeddedPaths(home);
    expect(started.socket).toBe(paths.socket);
    const redisPid = Number(started.redisPid);

    // No TCP socket at all (the probe does see one of a TCP server), and CONFIG says port 0.
    const tcp = await startEmbeddedRedis({ dir: join(home, 'tcp-probe'), appendonly: false });
    cleanups.push(() => tcp.stop());
    expect(tcpSocketsOf(tcp.pid).length).toBeGreaterThan(0);
    expect(tcpSocketsOf(redisPid)).toEqual([]);

    // Without the password: NOAUTH. With the password file (the documented way to debug): PONG.
    expect((await sh('redis-cli', ['-s', paths.socket, 'ping'])).out).toMatch(/NOAUTH/);
    const password = readFileSync(paths.passwordFile, 'utf8').trim();
    expect(password).toMatch(/^[0-9a-f]{64}$/);
    expect((await sh('redis-cli', ['-s', paths.socket, 'ping'], { ...process.env, REDISCLI_AUTH: password })).out.trim()).toBe('PONG');
    expect((await sh('redis-cli', ['-s', paths.socket, 'CONFIG', 'GET', 'port'], { ...process.env, REDISCLI_AUTH: password })).out).toMatch(
      /^port\n0\n$/,
    );
    // The password is not on the server's command line (world-readable in /proc).
    expect(readFileSync(`/proc/${redisPid}/cmdline`, 'utf8')).not.toContain(password);

    // Files: 0600 (the socket 0700), folders 0700, HERMES_HOME included; the data is there.
    rmSync(join(home, 'tcp-probe'), { recursive: true, force: true });
    await tcp.stop();
    expect(openToOthers(home)).toEqual([]);
    for (const f of [paths.passwordFile, paths.runFile, paths.logFile]) expect(statSync(f).mode & 0o777).toBe(0o600);
    expect(readdirSync(join(paths.dir, 'appendonlydir')).length).toBeGreaterThan(0);

    // Another user, even with HERMES_HOME opened to all (an earlier version made it 0755):
    chmodSync(home, 0o755);
    const nobodyPing = await sh('runuser', ['-u', 'nobody', '--', 'redis-cli', '-s', paths.socket, 'ping']);
    expect(nobodyPing.out).toMatch(/Permission denied/);
    expect(nobodyPing.out).not.toMatch(/PONG|NOAUTH/);
    expect((await sh('runuser', ['-u', 'nobody', '--', 'cat', paths.passwordFile])).out).toMatch(/Permission denied/);
    expect((await sh('runuser', ['-u', 'nobody', '--', 'ls', paths.dir])).out).toMatch(/Permission denied/);
    const take = await sh('runuser', [
      '-u',
      'nobody',
      '--',
      'redis-server',
      '--port',
      '0',
      '--unixsocket',
      join(paths.dir, 'mine.sock'),
      '--save',
      '',
    ]);
    expect(take.code).not.toBe(0);
    expect(existsSync(join(paths.dir, 'mine.sock'))).toBe(false);
    chmodSync(home, 0o700);

    up.child.kill('SIGTERM');
    expect(await up.exited).toBe(0);
    expect(alive(redisPid)).toBe(false);
    expect(existsSync(paths.socket)).toBe(false);
    expect(existsSync(paths.runFile)).toBe(false);
  });

  it("an earlier version's open folders are narrowed (a home its group may write is refused) and its redis.url, naming another user's TCP Redis, is never followed", async ({
    cleanups,
    expect,
  }) => {
    const home = newHome(cleanups);
    const paths = embeddedPaths(home);
    const port = await freePort();
    await nobodysRedis(cleanups, ['--port', String(port), '--bind', '127.0.0.1', '--dir', '/tmp'], async () =>
      (await sh('redis-cli', ['-p', String(port), 'ping'])).out.includes('PONG'),
    );
    mkdirSync(join(paths.dir, 'appendonlydir'), { recursive: true, mode: 0o755 });
    chmodSync(paths.dir, 0o755);
    writeFileSync(join(paths.dir, 'appendonlydir', 'appendonly.aof.1.incr.aof'), '', { mode: 0o644 });
    writeFileSync(paths.legacyUrlFile, `redis://127.0.0.1:${port}\n`, { mode: 0o644 });
    chmodSync(home, 0o775); // made under umask 002
    const before = await connectionsOf(['-p', String(port)]);

    // A home its group may write is refused before anything else (scheduler/config/home-check.ts), and left as it is.
    const refused = await hermes(cleanups, ['up', '--no-chat', '--no-gateway'], envFor(home));
    expect(refused).toMatchObject({ code: 2, stderr: expect.stringContaining(`is writable by its group (mode 0775)`) });
    expect(refused.stderr).toContain(`chmod 700 ${home}`);
    expect(statSync(home).mode & 0o777).toBe(0o775);
    chmodSync(home, 0o755); // others may read: the owner's choice

    // What `hermes status` finds before `hermes up` ran (in this process: the same resolveRedis).
    await expect(resolveRedis(loadConfig({ env: { HERMES_HOME: home } }), { allowStart: false })).rejects.toThrow(
      /^No Redis to connect to: REDIS_URL is not set and no embedded Redis of .* is running/,
    );

    const up = startHermes(cleanups, ['up', '--no-chat', '--no-gateway'], envFor(home));
    await up.log('worker started');
    expect(existsSync(paths.legacyUrlFile)).toBe(false);
    expect(openToOthers(paths.dir)).toEqual([]);
    expect(statSync(home).mode & 0o777).toBe(0o755);
    expect(await hermes(cleanups, ['status'], envFor(home))).toMatchObject({ code: 0, stdout: expect.stringMatching(/^workers alive: 1/) });
    up.child.kill('SIGTERM');
    expect(await up.exited).toBe(0);
    // Nothing of this home ever connected to it: only the two reads of this test.
    expect(await connectionsOf(['-p', String(port)])).toBe(before + 1);
  });
});

describe.concurrent("H2: a server that is not this home's own is refused", () => {
  it("another user's server in a folder of theirs at the embedded address: `hermes status`, `hermes worker` and `hermes up` refuse it and never connect", async ({
    cleanups,
    expect,
  }) => {
    const home = newHome(cleanups);
    const paths = embeddedPaths(home);
    chmodSync(home, 0o711); // so nobody can reach the folder below
    mkdirSync(paths.dir, { mode: 0o700 });
    chownSync(paths.dir, NOBODY_UID, NOBODY_UID);
    await nobodysRedis(cleanups, ['--port', '0', '--unixsocket', paths.socket, '--unixsocketperm', '777', '--dir', '/tmp'], () =>
      existsSync(paths.socket),
    );
    const inode = lstatSync(paths.socket).ino;
    const before = await connectionsOf(['-s', paths.socket]);

    const refused = new RegExp(
      `^hermes: Refusing the embedded Redis at ${paths.socket}: ${paths.dir} belongs to uid ${NOBODY_UID}, not to this user`,
    );
    const [status, worker, up] = await Promise.all([
      hermes(cleanups, ['status'], envFor(home)),
      hermes(cleanups, ['worker'], envFor(home)),
      hermes(cleanups, ['up', '--no-chat', '--no-gateway'], envFor(home)),
    ]);
    for (const r of [status, worker, up]) {
      expect(r.code).toBe(1);
      expect(r.stderr.split('\n').find((l) => l.startsWith('hermes:'))).toMatch(refused);
    }
    await expect(resolveRedis(loadConfig({ env: { HERMES_HOME: home } }), { allowStart: true })).rejects.toBeInstanceOf(
      UntrustedRedisError,
    );
    // Left alone: still there, still the same socket, and no connection came from any of them.
    expect(lstatSync(paths.socket).ino).toBe(inode);
    expect(await connectionsOf(['-s', paths.socket])).toBe(before + 1);
  });

  it("a server of this user without the home's password, one with the password but not the run id, a symlinked socket, an open folder: each refused, and a client sends it no command", async ({
    cleanups,
    expect,
  }) => {
    const home = newHome(cleanups);
    const paths = embeddedPaths(home);
    mkdirSync(paths.dir, { mode: 0o700 });
    const password = randomBytes(32).toString('hex');
    writeFileSync(paths.passwordFile, `${password}\n`, { mode: 0o600 });
    writeFileSync(paths.runFile, `${randomBytes(16).toString('hex')}\n`, { mode: 0o600 });
    const stray = await startEmbeddedRedis({ dir: join(home, 'stray'), socket: paths.socket, appendonly: false });
    cleanups.push(() => stray.stop());
    const admin = (args: string[]) => sh('redis-cli', ['-s', paths.socket, ...args], { ...process.env, REDISCLI_AUTH: password });

    // No password on it: AUTH fails.
    await expect(probeEmbeddedRedis(home)).rejects.toThrow(
      /Refusing the embedded Redis at .*: the server does not accept this home's password/,
    );
    // As every process finds it (`hermes status`, `worker`, `up`: resolveRedis; their refusal as processes: the test above).
    await expect(resolveRedis(loadConfig({ env: { HERMES_HOME: home } }), { allowStart: false })).rejects.toThrow(
      /^Refusing the embedded Redis at .*does not accept this home's password/,
    );

    // The password, but not the run id its starter stored.
    expect((await sh('redis-cli', ['-s', paths.socket, 'CONFIG', 'SET', 'requirepass', password])).out.trim()).toBe('OK');
    await expect(probeEmbeddedRedis(home)).rejects.toThrow(/holds another run id than the one its starter stored/);
    expect((await admin(['CONFIG', 'RESETSTAT'])).out.trim()).toBe('OK');
    const client = openRedisClient({ kind: 'embedded', home }, 'commands');
    cleanups.push(() => client.disconnect());
    await expect(client.ping()).rejects.toThrow();
    client.disconnect();
    // What reached it: the check's AUTH and GET of each attempt, never the PING (nor ioredis's INFO).
    const seen = [...(await admin(['INFO', 'commandstats'])).out.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)].map((m) => m[1]);
    expect(seen.filter((c) => c !== 'config|resetstat').sort()).toEqual(['auth', 'get']);

    // A folder others may enter.
    chmodSync(paths.dir, 0o755);
    await expect(probeEmbeddedRedis(home)).rejects.toThrow(new RegExp(`${paths.dir} is open to others \\(mode 0755, expected 0700\\)`));
    chmodSync(paths.dir, 0o700);

    // The socket swapped for a symlink to a socket elsewhere.
    const elsewhere = join(home, 'elsewhere.sock');
    const other = await startEmbeddedRedis({ dir: join(home, 'other'), socket: elsewhere, appendonly: false });
    cleanups.push(() => other.stop());
    await stray.stop();
    symlinkSync(elsewhere, paths.socket);
    const err = await probeEmbeddedRedis(home).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UntrustedRedisError);
    expect((err as Error).message).toMatch(/the socket path is a symlink/);
  });
});

describe.concurrent('H2: hermes up supervises its Redis', () => {
  it('kill -9 of the embedded redis-server: logged, restarted on the same socket with its data, and a loop set before keeps firing; the gateway is ready again', async ({
    cleanups,
    expect,
  }) => {
    const home = newHome(cleanups);
    const up = startHermes(cleanups, ['up', '--no-chat'], envFor(home, { HERMES_LOOPS_MIN_INTERVAL_SECONDS: '1' }));
    const started = await up.log('embedded Redis started');
    const gateway = await up.log('gateway listening');
    await up.log('worker started');
    await setLoop(home);

    // This test's own client goes through the same checked connection (and reconnects the same way).
    const config = loadConfig({ env: { HERMES_HOME: home } });
    const redis = openRedisClient({ kind: 'embedded', home }, 'commands');
    cleanups.push(() => redis.disconnect());
    const sessions = sessionStoreFor(config, redis, new Keys(config.redis.prefix));
    const repliesSince = async (ms: number) =>
      (await sessions.readEvents('main', '0', { count: 100_000 })).filter((e) => e.type === 'reply' && Number(e.id.split('-')[0]) > ms);
    await waitFor(async () => (await repliesSince(0)).length >= 2, 20_000, 'two ticks before the kill');

    process.kill(Number(started.redisPid), 'SIGKILL');
    const crash = await up.log('embedded Redis exited unexpectedly; restarting it on the same socket with its data', 10_000);
    expect(crash).toMatchObject({ level: 50, signal: 'SIGKILL', redisPid: started.redisPid });
    const restarted = await up.log('embedded Redis restarted', 20_000);
    expect(restarted.redisPid).not.toBe(started.redisPid);
    expect(alive(Number(restarted.redisPid))).toBe(true);
    const after = Number(restarted.time);

    // The loop (its record came back from the AOF) keeps firing on the restarted server.
    await waitFor(async () => (await repliesSince(after).catch(() => [])).length >= 2, 30_000, 'two ticks after the restart');
    const ready = await waitFor(
      async () => {
        const r = await fetch(`${String(gateway.url)}/health/ready`).catch(() => undefined);
        return r?.status === 200 ? r : undefined;
      },
      20_000,
      'the gateway ready again',
    );
    expect(ready.status).toBe(200);

    up.child.kill('SIGTERM');
    expect(await up.exited).toBe(0);
    expect(alive(Number(restarted.redisPid))).toBe(false);
    expect(existsSync(embeddedPaths(home).socket)).toBe(false);
  });

  it('a Redis that cannot be kept running (restarts off) stops the stack cleanly with one clear message', async ({ cleanups, expect }) => {
    const home = newHome(cleanups);
    const up = startHermes(
      cleanups,
      ['up', '--no-chat', '--no-gateway'],
      envFor(home, {
        HERMES_REDIS_EMBEDDED_MAX_RESTARTS: '0',
        HERMES_AGENT_CRON_DRAIN_TIMEOUT: '1',
        HERMES_LOOPS_MIN_INTERVAL_SECONDS: '1',
      }),
    );
    const started = await up.log('embedded Redis started');
    // A stack at work: its worker has run a tick.
    await up.log('worker started');
    await setLoop(home);
    await up.log('loop tick committed', 20_000);
    const killedAt = Date.now();
    process.kill(Number(started.redisPid), 'SIGKILL');
    const code = await up.exited;
    expect(Date.now() - killedAt).toBeLessThan(11_000 + 5_000 + 4_000); // its stop deadline, Redis's stop, slack for a loaded machine
    expect(code).toBe(1);
    const errors = up
      .stderr()
      .split('\n')
      .filter((l) => l.startsWith('hermes:'));
    expect(errors).toEqual([
      `hermes: The embedded Redis (${embeddedPaths(home).socket}) was killed (SIGKILL) and is not restarted again: restarts are off (redis.embedded_max_restarts: 0). The stack stops; see ${embeddedPaths(home).logFile}.`,
    ]);
    expect(up.logs.some((l) => l.msg === 'worker stopped')).toBe(true);
    expect(up.stderr()).not.toMatch(/\n\s+at /);
  });

  it('`hermes up --no-chat` whose Redis no longer answers (SIGSTOP) exits on SIGTERM within its stop deadline, and stops that Redis', async ({
    cleanups,
    expect,
  }) => {
    const home = newHome(cleanups);
    // Stop deadline: cron_drain_timeout 0 s (the shortest drain budget) + 10 s to close; then up to 5 s
    // to stop Redis. The worker's drain is what waits on Redis (the gateway's, with it, waits the same).
    const up = startHermes(
      cleanups,
      ['up', '--no-chat', '--no-gateway'],
      envFor(home, { HERMES_AGENT_CRON_DRAIN_TIMEOUT: '0', HERMES_LOOPS_MIN_INTERVAL_SECONDS: '1' }),
    );
    const started = await up.log('embedded Redis started');
    await up.log('worker started');
    await setLoop(home);
    await up.log('loop tick committed', 20_000);
    const redisPid = Number(started.redisPid);
    process.kill(redisPid, 'SIGSTOP');
    cleanups.push(() => {
      if (alive(redisPid)) process.kill(redisPid, 'SIGKILL');
    });
    const signalled = Date.now();
    up.child.kill('SIGTERM');
    const code = await up.exited;
    const took = Date.now() - signalled;
    expect(took).toBeLessThan(10_000 + 5_000 + 4_000); // the deadline, Redis's stop, slack for a loaded machine
    expect(code).toBe(1);
    expect(up.logs.find((l) => /stop deadline \(10s\) passed/.test(String(l.msg)))).toBeDefined();
    await waitFor(() => !alive(redisPid), 5_000, 'the stopped Redis ended');
  }, 90_000);
});

describe.concurrent('warnings', () => {
  it('a config.yaml others may read is warned about once at start (and not when it is 0600)', async ({ cleanups, expect }) => {
    // Which file is warned about is configFileWarning's; a process shows it is logged once at start.
    const open = testEnv();
    const closed = testEnv();
    cleanups.push(
      () => open.cleanup(),
      () => closed.cleanup(),
    );
    const file = join(open.home, 'config.yaml');
    writeFileSync(file, 'loops: { max_ticks: 50 }\n');
    chmodSync(file, 0o644);
    writeFileSync(join(closed.home, 'config.yaml'), 'loops: { max_ticks: 50 }\n', { mode: 0o600 });
    expect(configFileWarning(open.home)).toBe(
      `${file} is readable by others (mode 0644) and may hold keys and commands; chmod 600 ${file}`,
    );
    expect(configFileWarning(closed.home)).toBeUndefined();
    const a = startHermes(cleanups, ['worker'], { ...open.childEnv, HERMES_LOG_LEVEL: 'info' });
    await a.log('worker started');
    const warned = a.logs.filter((l) => l.level === 40 && String(l.msg).includes('config.yaml is readable by others'));
    expect(warned).toHaveLength(1);
    a.child.kill('SIGTERM');
    expect(await a.exited).toBe(0);
  });

  it("an operator's Redis off loopback without a password is warned about; with one, or on loopback, it is not", async ({ expect }) => {
    const cfg = (env: Record<string, string>) => loadConfig({ env: { HERMES_HOME: '/nonexistent-hermes-home', ...env } });
    const warn = (env: Record<string, string>) => openRedisWarning(topologyFromConfig(cfg(env)));
    expect(warn({ REDIS_URL: 'redis://10.0.0.5:6379' })).toMatch(/^Redis at 10\.0\.0\.5:6379 is not on loopback and no password is set/);
    expect(warn({ REDIS_URL: 'redis://:pw@10.0.0.5:6379' })).toBeUndefined();
    expect(warn({ REDIS_URL: 'redis://10.0.0.5:6379', REDIS_PASSWORD: 'pw' })).toBeUndefined();
    expect(warn({ REDIS_URL: 'redis://127.0.0.1:6379' })).toBeUndefined();
    expect(warn({ REDIS_URL: 'redis://localhost:6379' })).toBeUndefined();
    expect(warn({ REDIS_URL: 'redis://[::1]:6379' })).toBeUndefined();
    expect(warn({ REDIS_CLUSTER_NODES: '10.0.0.1:7000,10.0.0.2:7000' })).toMatch(/cluster 10\.0\.0\.1:7000/);
    expect(warn({ REDIS_CLUSTER_NODES: '10.0.0.1:7000', REDIS_PASSWORD: 'pw' })).toBeUndefined();
    expect(warn({ REDIS_SENTINELS: 'db.example:26379', REDIS_SENTINEL_NAME: 'm' })).toMatch(/sentinel m via db\.example:26379/);
    expect(openRedisWarning({ kind: 'embedded', home: '/h' })).toBeUndefined();

    // A process logs it at start, before it tries the server.
    const { log, lines } = captureLog();
    const port = await freePort();
    await expect(resolveRedis(cfg({ REDIS_URL: `redis://10.255.255.1:${port}` }), { allowStart: false, log })).rejects.toBeInstanceOf(
      StoreUnavailableError,
    );
    expect(lines.filter((l) => l.includes('"level":40') && l.includes('not on loopback and no password is set'))).toHaveLength(1);
  });

  it('the log file of `hermes up` with the chat attached is 0600 in a 0700 folder', ({ cleanups, expect }) => {
    const home = newHome(cleanups);
    const file = join(home, 'logs', 'hermes.log');
    createLogger({ file, level: 'info' }).info('x');
    expect(statSync(join(home, 'logs')).mode & 0o777).toBe(0o700);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    chmodSync(file, 0o644);
    createLogger({ file, level: 'info' }).info('y');
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });
});
