/**
 * What a new user sees when the stack starts: `hermes up` prints where the API is and whether it
 * needs a key, the model endpoint and model (or that there is none and agent turns will fail),
 * whether Telegram is on; a second `hermes up` on the same home says the first runs and how to
 * attach, instead of starting a worker and failing to bind; an agent loop, heartbeat or goal set
 * without a model says so in the reply that sets it.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { upBanner } from '../cli/up-banner.ts';
import { showEndpoint } from '../scheduler/errors/upstream-text.ts';
import { takeUpLock, upLockPath } from '../cli/up-lock.ts';
import { loadConfig } from '../scheduler/config/config.ts';
import { AlreadyRunningError } from '../scheduler/errors/already-running-error.ts';
import { freePort } from '../scheduler/store/redis/embedded-redis.ts';
import { testEnv } from './support/env.ts';
import { clients, HERMES_BIN, runHermes, SPAWN_START_TIMEOUT_MS, waitFor } from './support/stack.ts';
import { startHermesUp, upEnv } from './support/hermes-up.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { tempDirFor } from './support/temp-dirs.ts';

const cleanups = cleanupAfterEach();

function newHome(): string {
  return tempDirFor(cleanups, 'hermes-up-banner-');
}

const config = (env: Record<string, string>) => loadConfig({ env: { HERMES_HOME: '/home/ada/.hermes', ...env } });

describe('the banner of hermes up', () => {
  it('names the API and its auth, the model (or its absence), Telegram and Redis', () => {
    const bare = upBanner(config({}), {
      redis: 'embedded unix:/home/ada/.hermes/redis/redis.sock',
      apiUrl: 'http://127.0.0.1:8642',
      auth: { mode: 'key', source: 'file', file: '/home/ada/.hermes/api.key' },
      chatSession: 'main',
      logFile: '/home/ada/.hermes/logs/hermes.log',
    });
    expect(bare).toEqual([
      'hermes is up · home /home/ada/.hermes',
      '  API       http://127.0.0.1:8642 · auth on (Authorization: Bearer <key>) · the key is in /home/ada/.hermes/api.key; `hermes key` prints it',
      '  console   http://127.0.0.1:8642/ui · user hermes, the API key as password',
      '  model     no model: agent turns will fail — set OPENAI_BASE_URL and OPENAI_API_KEY (or agent.base_url and agent.api_key in config.yaml)',
      '  Telegram  off (no TELEGRAM_BOT_TOKEN)',
      '  Redis     embedded unix:/home/ada/.hermes/redis/redis.sock',
      '  logs      /home/ada/.hermes/logs/hermes.log',
      'Chat on session "main": Ctrl+D detaches (the stack keeps running), Ctrl+C stops everything.',
    ]);
    const full = upBanner(
      config({
        API_SERVER_KEY: 'k'.repeat(32),
        OPENAI_BASE_URL: 'https://user:secret@models.example.com/v1?key=abc',
        OPENAI_MODEL: 'gpt-4.1-mini',
        TELEGRAM_BOT_TOKEN: '1:AA',
        TELEGRAM_ALLOWED_USERS: '111,222',
      }),
      {
        redis: '10.0.0.5:6379',
        apiUrl: 'http://127.0.0.1:8642',
        auth: { mode: 'key', source: 'config' },
        platforms: { telegram: { state: 'adapter_unavailable', lastError: 'Telegram refused the bot token (TELEGRAM_BOT_TOKEN).' } },
      },
    );
    expect(full.slice(1, 6)).toEqual([
      '  API       http://127.0.0.1:8642 · auth on (Authorization: Bearer $API_SERVER_KEY)',
      '  console   http://127.0.0.1:8642/ui · user hermes, the API key as password',
      '  model     gpt-4.1-mini at https://models.example.com/v1',
      '  Telegram  failed (Telegram refused the bot token (TELEGRAM_BOT_TOKEN).) · 2 allowed users (TELEGRAM_ALLOWED_USERS)',
      '  Redis     10.0.0.5:6379',
    ]);
    expect(full.join('\n')).not.toMatch(/secret|key=abc|k{32}|1:AA/);
    expect(full.at(-1)).toBe('Ctrl+C stops it. Attach from another terminal: hermes chat');
    const noGateway = upBanner(config({ TELEGRAM_BOT_TOKEN: '1:AA' }), { redis: 'x', apiUrl: undefined });
    expect(noGateway.slice(1, 4)).toEqual([
      '  API       off (--no-gateway)',
      expect.stringMatching(/^ {2}model {5}no model/),
      '  Telegram  off (--no-gateway)',
    ]);
    const open = upBanner(config({ HERMES_API_SERVER_INSECURE_NO_AUTH: 'true' }), {
      redis: 'x',
      apiUrl: 'http://127.0.0.1:8642',
      auth: { mode: 'insecure_no_auth' },
    });
    expect(open.slice(1, 3)).toEqual([
      '  API       http://127.0.0.1:8642 · AUTH OFF (api_server.insecure_no_auth): every user of this host can act as you over HTTP',
      '  console   http://127.0.0.1:8642/ui · no password (api_server.insecure_no_auth)',
    ]);
    expect(
      upBanner(config({ TELEGRAM_BOT_TOKEN: '1:AA' }), { redis: 'x', apiUrl: 'http://h', auth: { mode: 'key', source: 'config' } })[4],
    ).toBe('  Telegram  starting, but nobody may use it: TELEGRAM_ALLOWED_USERS is empty');
    expect(showEndpoint('not a url')).toBe('(unreadable URL)');
  });
});

describe('one hermes up per home', () => {
  it("a lock whose process is gone, or is not hermes, is taken over; a live hermes up's is refused with how to attach", async () => {
    const home = newHome();
    // A pid that is gone: a process that has exited.
    const gone = spawn(process.execPath, ['-e', '0']);
    await new Promise((r) => gone.on('close', r));
    writeFileSync(upLockPath(home), `${gone.pid}\n`);
    const lock = takeUpLock(home);
    expect(readFileSync(upLockPath(home), 'utf8')).toBe(`${process.pid}\n`);
    lock.release();
    expect(existsSync(upLockPath(home))).toBe(false);
    // A live process that is not hermes (a reused pid).
    const other = spawn('sleep', ['30']);
    cleanups.push(() => {
      other.kill('SIGKILL');
    });
    writeFileSync(upLockPath(home), `${other.pid}\n`);
    takeUpLock(home).release();
    // A live `hermes` process (its command line names it).
    const fake = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)', 'cli/hermes.mjs', 'up']);
    cleanups.push(() => {
      fake.kill('SIGKILL');
    });
    await waitFor(
      () => existsSync(`/proc/${fake.pid}/cmdline`) && readFileSync(`/proc/${fake.pid}/cmdline`, 'utf8').includes('hermes'),
      5_000,
      'the fake hermes up',
    );
    writeFileSync(upLockPath(home), `${fake.pid}\n`);
    expect(() => takeUpLock(home)).toThrow(AlreadyRunningError);
    expect(() => takeUpLock(home)).toThrow(`hermes up is already running for ${home} (pid ${fake.pid}). Attach to it with \`hermes chat\``);
  });

  it('a second hermes up on the same home exits at once with how to attach; the first keeps serving, and prints the banner', async () => {
    const home = newHome();
    const port = await freePort();
    const env = upEnv(home, port);
    const first = await startHermesUp(cleanups, env);
    const banner = first.banner();
    expect(banner).toEqual([
      `hermes is up · home ${home}`,
      `  API       http://127.0.0.1:${port} · auth on (Authorization: Bearer <key>) · the key is in ${join(home, 'api.key')}; \`hermes key\` prints it`,
      `  console   http://127.0.0.1:${port}/ui · user hermes, the API key as password`,
      '  model     no model: agent turns will fail — set OPENAI_BASE_URL and OPENAI_API_KEY (or agent.base_url and agent.api_key in config.yaml)',
      '  Telegram  off (no TELEGRAM_BOT_TOKEN)',
      `  Redis     embedded unix:${join(home, 'redis', 'redis.sock')}`,
      'Ctrl+C stops it. Attach from another terminal: hermes chat',
    ]);

    // "At once": no longer than twice what `hermes up --help` takes beside it (the same start-up, compiled or through tsx; seconds on a
    // loaded machine), plus 5 s; a second `up` that waited on anything (Redis, a port, a lock) would take longer.
    const timed = async (args: string[]) => {
      const started = Date.now();
      const result = await runHermes({ childEnv: env } as never, args);
      return { ...result, ms: Date.now() - started };
    };
    const [second, help] = await Promise.all([timed(['up', '--no-chat']), timed(['up', '--help'])]);
    expect(help.code).toBe(0);
    expect(second.code).toBe(1);
    expect(second.stderr).toBe(
      `hermes: hermes up is already running for ${home} (pid ${first.proc.pid}). Attach to it with \`hermes chat\` (session "main"; --session for another); stop it with Ctrl+C in its terminal or \`kill ${first.proc.pid}\`.\n`,
    );
    expect(second.stdout).toBe('');
    expect(second.ms).toBeLessThan(2 * help.ms + 5_000);
    // The first one still serves, with its one worker.
    expect((await fetch(`http://127.0.0.1:${port}/health/live`)).status).toBe(200);
    const status = await runHermes({ childEnv: env } as never, ['status']);
    expect(status.stdout).toMatch(/^workers alive: 1 /);

    first.proc.kill('SIGINT');
    expect(await first.exited).toBe(0);
    expect(existsSync(upLockPath(home))).toBe(false);
  }, 90_000);

  it('without the chat, the banner comes before the start-up log lines on a shared terminal', async () => {
    const home = newHome();
    const out = join(home, 'terminal.txt');
    // One file for stdout and stderr, as one terminal shows them.
    const fd = openSync(out, 'w');
    const proc = spawn(process.execPath, [HERMES_BIN, 'up', '--no-chat'], {
      env: upEnv(home, await freePort(), { HERMES_LOG_LEVEL: 'info' }),
      stdio: ['ignore', fd, fd],
    });
    closeSync(fd);
    const exited = new Promise<number | null>((r) => proc.on('close', (code) => r(code)));
    cleanups.push(async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    });
    const lines = () => readFileSync(out, 'utf8').split('\n');
    await waitFor(() => lines().some((l) => l.includes('"msg":"gateway listening"')), SPAWN_START_TIMEOUT_MS, 'the start-up lines');
    const shown = lines();
    expect(shown[0]).toBe(`hermes is up · home ${home}`);
    const bannerEnd = shown.indexOf('Ctrl+C stops it. Attach from another terminal: hermes chat');
    const firstLog = shown.findIndex((l) => l.startsWith('{'));
    expect(bannerEnd).toBeGreaterThan(0);
    expect(firstLog).toBeGreaterThan(bannerEnd);
    expect(shown.slice(firstLog).join('\n')).toMatch(/"msg":"embedded Redis started"[\s\S]*"msg":"worker started"/);
    proc.kill('SIGINT');
    expect(await exited).toBe(0);
  }, 90_000);
});

describe('an agent schedule set without a model', () => {
  it('is set, and the reply says its turns will fail; with a model, or as a command turn, nothing is said', async () => {
    const e = testEnv();
    cleanups.push(() => e.cleanup());
    const c = clients(e);
    cleanups.push(() => c.close());
    const spec = { prompt: 'check the build', intervalSeconds: 600, times: null, until: null, notes: [] };
    const chatReply = await c.schedules.set('a', 'loop', spec, { origin: { surface: 'chat' }, runner: { kind: 'agent' } });
    expect(chatReply.split('\n').at(-1)).toBe(
      'Warning: no model: agent turns will fail — set OPENAI_BASE_URL and OPENAI_API_KEY (or agent.base_url and agent.api_key in config.yaml).',
    );
    const shell = await runHermes(e, ['heartbeat', 'every', '1h', 'anything', 'new?', '--session', 'b']);
    expect(shell.stdout).toMatch(
      /\nWarning: no model: agent turns will fail — .* \(this shell's configuration; workers started with OPENAI_BASE_URL of their own are fine\)\.\n$/,
    );
    expect(await c.loops.get('b', 'heartbeat')).toMatchObject({ status: 'active' });
    const command = await c.schedules.set('c', 'loop', spec, {
      origin: { surface: 'cli' },
      runner: { kind: 'command', command: 'true', timeoutSeconds: 5 },
    });
    expect(command).not.toContain('Warning');
    const withModel = await runHermes(e, ['loop', '10m', 'check', '--session', 'd'], { OPENAI_BASE_URL: 'http://127.0.0.1:9/v1' });
    expect(withModel.stdout).not.toContain('Warning');
  });
});
