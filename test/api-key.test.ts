/**
 * The HTTP side belongs to the operator too: with no `API_SERVER_KEY` the gateway and a worker's
 * metrics port require the home's own key (`$HERMES_HOME/api.key`, made at the first start, 0600,
 * reused: scheduler/config/api-key.ts), so another user of the host — here a request without the
 * key and, when the tests run as root, the real user `nobody` — gets 401 on every route but health;
 * serving without a key takes `api_server.insecure_no_auth` (`--insecure-no-auth`), loopback only.
 * Every answer carries helmet's headers: no framing, no `X-Powered-By`.
 */
import { execFile, spawn } from 'node:child_process';
import { chmodSync, chownSync, lstatSync, mkdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCronApi } from '../cli/gateway-cron-api.ts';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { apiKeyFile, ensureApiKeyFile, readApiKeyFile, resolveApiAuth } from '../scheduler/config/api-key.ts';
import { loadConfig } from '../scheduler/config/config.ts';
import { ConfigError } from '../scheduler/errors/config-error.ts';
import { createLogger } from '../scheduler/logger.ts';
import { freePort } from '../scheduler/store/redis/embedded-redis.ts';
import type { WorkerProcess } from '../worker/worker-process.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { startHermesUp, upEnv } from './support/hermes-up.ts';
import { clients, events, HERMES_BIN, runHermes, SPAWN_START_TIMEOUT_MS, startWorker, waitFor, type TestClients } from './support/stack.ts';
import { tempDirFor } from './support/temp-dirs.ts';

const run = promisify(execFile);
const IS_ROOT = process.getuid?.() === 0;
/** A made key: 32 random bytes in base64url. */
const MADE_KEY = /^[A-Za-z0-9_-]{43}$/;
const basic = (password: string) => `Basic ${Buffer.from(`hermes:${password}`).toString('base64')}`;

function tempHome(cleanups: Array<() => unknown>): string {
  return join(tempDirFor(cleanups, 'hermes-api-key-'), 'home');
}

/** `curl` as the user `nobody`: the status code it got. */
async function curlAsNobody(url: string, options: { method?: string; body?: unknown } = {}): Promise<string> {
  const args = ['-u', 'nobody', '--', 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}', '--max-time', '20'];
  if (options.method) args.push('-X', options.method);
  if (options.body !== undefined) args.push('-H', 'content-type: application/json', '-d', JSON.stringify(options.body));
  return (await run('runuser', [...args, url])).stdout;
}

describe('the home key file', () => {
  const cleanups = cleanupAfterEach();

  it('is made once — 256 random bits in base64url, 0600 in the 0700 home — and read back unchanged; a configured key or the opt-out makes none', () => {
    const home = tempHome(cleanups);
    const key = ensureApiKeyFile(home);
    expect(key).toMatch(MADE_KEY);
    expect(Buffer.from(key, 'base64url')).toHaveLength(32);
    expect(statSync(apiKeyFile(home)).mode & 0o777).toBe(0o600);
    expect(statSync(home).mode & 0o777).toBe(0o700);
    expect(ensureApiKeyFile(home)).toBe(key);
    expect(readApiKeyFile(home)).toBe(key);
    expect(resolveApiAuth({ home, api_server: { insecure_no_auth: false } })).toEqual({
      mode: 'key',
      key,
      source: 'file',
      file: apiKeyFile(home),
    });
    const other = tempHome(cleanups);
    expect(ensureApiKeyFile(other)).not.toBe(key);

    const fresh = tempHome(cleanups);
    expect(resolveApiAuth({ home: fresh, api_server: { key: 'operator-key', insecure_no_auth: false } })).toEqual({
      mode: 'key',
      key: 'operator-key',
      source: 'config',
    });
    expect(resolveApiAuth({ home: fresh, api_server: { insecure_no_auth: true } })).toEqual({ mode: 'insecure_no_auth' });
    expect(readApiKeyFile(fresh)).toBeUndefined();
  });

  it('is refused, never used nor replaced, when others may read it, it is a symlink or no file, or it holds no key', () => {
    const home = tempHome(cleanups);
    mkdirSync(home, { mode: 0o700 });
    const file = apiKeyFile(home);
    const key = 'k'.repeat(43);
    for (const mode of [0o644, 0o640, 0o604, 0o620]) {
      writeFileSync(file, `${key}\n`);
      chmodSync(file, mode);
      expect(() => readApiKeyFile(home)).toThrow(ConfigError);
      expect(() => ensureApiKeyFile(home)).toThrow(`is open to others (mode 0${mode.toString(8)}, expected 0600)`);
      expect(readFileSync(file, 'utf8')).toBe(`${key}\n`);
    }
    rmSync(file);
    const target = join(home, 'elsewhere');
    writeFileSync(target, `${key}\n`, { mode: 0o600 });
    symlinkSync(target, file);
    expect(() => ensureApiKeyFile(home)).toThrow(/it is a symlink/);
    expect(lstatSync(file).isSymbolicLink()).toBe(true);
    rmSync(file);
    mkdirSync(file);
    expect(() => ensureApiKeyFile(home)).toThrow(/it is not a regular file/);
    rmSync(file, { recursive: true });
    for (const content of ['', 'short', `${'k'.repeat(40)} with spaces`, `${'k'.repeat(42)}+`]) {
      writeFileSync(file, content, { mode: 0o600 });
      expect(() => ensureApiKeyFile(home), JSON.stringify(content)).toThrow(/does not hold a key/);
      rmSync(file);
    }
    // The operator's own key in the file (32 characters or more of base64url) is taken.
    writeFileSync(file, `${'x'.repeat(32)}\n`, { mode: 0o600 });
    expect(ensureApiKeyFile(home)).toBe('x'.repeat(32));
  });

  it.runIf(IS_ROOT)("is refused when it is another user's (as root: a file chowned to nobody)", () => {
    const home = tempHome(cleanups);
    mkdirSync(home, { mode: 0o700 });
    writeFileSync(apiKeyFile(home), `${'k'.repeat(43)}\n`, { mode: 0o600 });
    chownSync(apiKeyFile(home), 65534, 65534);
    expect(() => ensureApiKeyFile(home)).toThrow('belongs to uid 65534, not to this user (uid 0)');
  });

  it('API_SERVER_KEY together with insecure_no_auth is a configuration error', () => {
    const env = { HERMES_HOME: tempHome(cleanups), API_SERVER_KEY: 'operator-key', HERMES_API_SERVER_INSECURE_NO_AUTH: 'true' };
    expect(() => loadConfig({ env })).toThrow(ConfigError);
    expect(() => loadConfig({ env })).toThrow(
      /^Invalid setting api_server\.insecure_no_auth \(from HERMES_API_SERVER_INSECURE_NO_AUTH\): an API key is set/,
    );
  });
});

describe('a gateway and a worker metrics port with no key configured', () => {
  let env: TestEnv;
  let gw: Gateway;
  let worker: WorkerProcess;
  let c: TestClients;
  let key: string;
  const closers: Array<() => unknown> = [];

  beforeAll(async () => {
    env = testEnv({ 'api_server.port': 0, 'worker.metrics_port': 0 });
    closers.push(() => env.cleanup());
    const log = createLogger({ level: env.config.log_level });
    worker = await startWorker(env);
    closers.push(() => worker.drain());
    const cron = await openCronApi(env.config, env.redisUrl, log);
    closers.push(() => cron.close());
    gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log, cron: cron.api });
    closers.push(() => gw.close());
    c = clients(env);
    closers.push(() => c.close());
    key = readApiKeyFile(env.home)!;
  }, 60_000);

  afterAll(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  /** Every route but health: method, path and a body that would act if it were let in. */
  const ROUTES: Array<{ method: 'GET' | 'POST'; path: string; body?: unknown }> = [
    { method: 'GET', path: '/v1/models' },
    {
      method: 'POST',
      path: '/v1/chat/completions',
      body: { messages: [{ role: 'user', content: 'call:echo {"text":"as the operator"}' }] },
    },
    { method: 'POST', path: '/v1/runs', body: { input: 'read /root/.ssh/id_rsa' } },
    { method: 'GET', path: '/v1/runs' },
    { method: 'GET', path: '/api/sessions' },
    { method: 'GET', path: '/api/sessions/telegram:111/transcript' },
    { method: 'POST', path: '/api/sessions/telegram:111/messages', body: { text: 'written by another user' } },
    { method: 'GET', path: '/api/sessions/telegram:111/events' },
    { method: 'GET', path: '/api/schedules' },
    { method: 'POST', path: '/api/cron/jobs', body: { schedule: 'every 1h', prompt: 'spend the operator key' } },
    { method: 'GET', path: '/admin/queues' },
    { method: 'GET', path: '/admin/queues/api/queues' },
    { method: 'GET', path: '/ui' },
    { method: 'GET', path: '/ui/sessions/telegram:111' },
    { method: 'GET', path: '/metrics' },
  ];

  /** Every way of not presenting the key: none, near misses, other schemes, the query string. */
  const nearMisses = (k: string): Array<{ name: string; authorization?: string; query?: string }> => [
    { name: 'no key' },
    { name: 'a wrong key of the right length', authorization: `Bearer ${k[0] === 'A' ? 'B' : 'A'}${k.slice(1)}` },
    { name: 'the key and one more character', authorization: `Bearer ${k}x` },
    { name: 'the key less its last character', authorization: `Bearer ${k.slice(0, -1)}` },
    { name: 'Bearer with no token', authorization: 'Bearer' },
    { name: 'the key without a scheme', authorization: k },
    { name: 'another scheme', authorization: `Token ${k}` },
    { name: 'Basic with a wrong password', authorization: basic(`${k}x`) },
    { name: 'the key in the query string (key)', query: `key=${k}` },
    { name: 'the key in the query string (api_key)', query: `api_key=${k}` },
    { name: 'the key in the query string (access_token)', query: `access_token=${k}` },
  ];

  const request = (base: string, route: { method: string; path: string; body?: unknown }, authorization?: string, query?: string) =>
    fetch(`${base}${route.path}${query ? `?${query}` : ''}`, {
      method: route.method,
      headers: {
        ...(authorization !== undefined ? { authorization } : {}),
        ...(route.body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(route.body !== undefined ? { body: JSON.stringify(route.body) } : {}),
    });

  it('every route but health answers 401 to a request without the home key, near misses included, and nothing is done', async () => {
    expect(key).toMatch(MADE_KEY);
    expect(gw.auth).toEqual({ mode: 'key', source: 'file', file: apiKeyFile(env.home) });
    const metricsUrl = worker.metricsServer!.url;
    for (const miss of nearMisses(key)) {
      for (const route of ROUTES) {
        const res = await request(gw.httpAddress.url, route, miss.authorization, miss.query);
        expect(res.status, `${route.method} ${route.path} with ${miss.name}`).toBe(401);
        await res.body?.cancel();
      }
      const scrape = await request(metricsUrl, { method: 'GET', path: '/metrics' }, miss.authorization, miss.query);
      expect(scrape.status, `worker metrics with ${miss.name}`).toBe(401);
      expect(await scrape.text()).not.toContain('hermes_');
    }
    // Nothing was run, written or scheduled.
    const runs = (await (await fetch(`${gw.httpAddress.url}/v1/runs`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
      data: unknown[];
    };
    expect(runs.data).toEqual([]);
    expect(await events(c, 'telegram:111')).toEqual([]);
    expect(await openCronApiList(env)).toEqual([]);
    // Health stays open, and says no more than live or ready.
    for (const path of ['/health/live', '/health/ready', '/health']) {
      const res = await fetch(`${gw.httpAddress.url}${path}`);
      expect([200, 503], path).toContain(res.status);
      expect(Object.keys((await res.json()) as object), path).toEqual(['status']);
    }
  });

  it('with the home key every route answers: bearer for the API and the metrics, the Basic password for the dashboard and the console', async () => {
    const bearer = `Bearer ${key}`;
    for (const route of ROUTES.filter((r) => r.method === 'GET' && !r.path.endsWith('/events'))) {
      const res = await request(gw.httpAddress.url, route, route.path.startsWith('/ui') ? basic(key) : bearer);
      expect(res.status, route.path).toBe(200);
      await res.body?.cancel();
    }
    expect((await request(gw.httpAddress.url, { method: 'GET', path: '/admin/queues' }, basic(key))).status).toBe(200);
    // A body the API refuses (400) shows the key let the request through without running anything.
    const bad = await request(gw.httpAddress.url, { method: 'POST', path: '/v1/chat/completions', body: { messages: 'none' } }, bearer);
    expect(bad.status).toBe(400);
    const scrape = await fetch(`${worker.metricsServer!.url}/metrics`, { headers: { authorization: bearer } });
    expect(scrape.status).toBe(200);
    expect(await scrape.text()).toContain('hermes_');
  });

  it.runIf(IS_ROOT)(
    'the user nobody gets 401 from every route and the worker metrics port, and cannot read the key file (as root: runuser)',
    async () => {
      for (const route of ROUTES) {
        expect(await curlAsNobody(`${gw.httpAddress.url}${route.path}`, route), `${route.method} ${route.path}`).toBe('401');
      }
      expect(await curlAsNobody(`${worker.metricsServer!.url}/metrics`)).toBe('401');
      await expect(run('runuser', ['-u', 'nobody', '--', 'cat', apiKeyFile(env.home)])).rejects.toThrow(/Permission denied/);
      expect(await events(c, 'telegram:111')).toEqual([]);
    },
  );

  it('every answer carries the security headers: no framing (the queue dashboard included), no X-Powered-By, no sniffing', async () => {
    const bearer = { authorization: `Bearer ${key}` };
    const answers: Array<[string, Response]> = [
      ['health', await fetch(`${gw.httpAddress.url}/health/live`)],
      ['401', await fetch(`${gw.httpAddress.url}/v1/models`)],
      ['/v1/models', await fetch(`${gw.httpAddress.url}/v1/models`, { headers: bearer })],
      ['/api/sessions', await fetch(`${gw.httpAddress.url}/api/sessions`, { headers: bearer })],
      ['404', await fetch(`${gw.httpAddress.url}/no/such/route`, { headers: bearer })],
      ['/metrics', await fetch(`${gw.httpAddress.url}/metrics`, { headers: bearer })],
      ['/ui', await fetch(`${gw.httpAddress.url}/ui`, { headers: { authorization: basic(key) } })],
      ['/ui 401', await fetch(`${gw.httpAddress.url}/ui`)],
      ['/admin/queues', await fetch(`${gw.httpAddress.url}/admin/queues`, { headers: { authorization: basic(key) } })],
      ['/admin/queues api', await fetch(`${gw.httpAddress.url}/admin/queues/api/queues`, { headers: { authorization: basic(key) } })],
      ['/admin/queues 401', await fetch(`${gw.httpAddress.url}/admin/queues`)],
    ];
    for (const [name, res] of answers) {
      expect(res.headers.get('x-powered-by'), name).toBeNull();
      expect(res.headers.get('x-frame-options'), name).toBe('DENY');
      expect(res.headers.get('content-security-policy'), name).toContain("frame-ancestors 'none'");
      expect(res.headers.get('x-content-type-options'), name).toBe('nosniff');
      expect(res.headers.get('referrer-policy'), name).toBe('same-origin');
      await res.body?.cancel();
    }
    // The dashboard's page and its own files: bull-board's express app announces nothing either.
    const page = await fetch(`${gw.httpAddress.url}/admin/queues`, { headers: { authorization: basic(key) } });
    const script = /src="(static\/js\/main[^"]+)"/.exec(await page.text())![1]!;
    const asset = await fetch(`${gw.httpAddress.url}/admin/queues/${script}`, { headers: { authorization: basic(key) } });
    expect(asset.status).toBe(200);
    expect(asset.headers.get('x-powered-by')).toBeNull();
    expect(asset.headers.get('x-frame-options')).toBe('DENY');
    await asset.body?.cancel();
  });
});

/** The cron jobs of `env` (through the cron service). */
async function openCronApiList(env: TestEnv): Promise<unknown[]> {
  const cron = await openCronApi(env.config, env.redisUrl, createLogger({ level: 'silent' }));
  try {
    return (await cron.api.list({ limit: 500 }, { all: true })).data;
  } finally {
    await cron.close();
  }
}

describe('hermes up with no key set', () => {
  const cleanups = cleanupAfterEach();

  it('makes the home key (0600, printed by hermes key); nobody gets 401; hermes status, hermes chat and the console work; a restart reuses the key', async () => {
    const model = await startFakeOpenAI();
    cleanups.push(() => model.close());
    model.respond((req) => `pong: ${req.messages.at(-1)!.content}`);
    const home = tempHome(cleanups);
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const env = upEnv(home, port, { OPENAI_BASE_URL: model.baseUrl, OPENAI_API_KEY: 'k' });
    const first = await startHermesUp(cleanups, env);
    const file = join(home, 'api.key');
    expect(first.banner()[1]).toBe(
      `  API       ${url} · auth on (Authorization: Bearer <key>) · the key is in ${file}; \`hermes key\` prints it`,
    );
    const st = statSync(file);
    expect(st.mode & 0o777).toBe(0o600);
    expect(st.uid).toBe(process.getuid!());
    const key = readFileSync(file, 'utf8').trim();
    expect(key).toMatch(MADE_KEY);
    const shell = { childEnv: env } as TestEnv;
    expect(await runHermes(shell, ['key'])).toEqual({ code: 0, stdout: `${key}\n`, stderr: '' });
    expect(JSON.parse((await runHermes(shell, ['key', '--json'])).stdout)).toEqual({ key, source: 'file', file });

    // Another user: no key, no entry.
    for (const path of ['/v1/models', '/api/sessions', '/ui', '/admin/queues', '/metrics']) {
      expect((await fetch(`${url}${path}`)).status, path).toBe(401);
    }
    // The console asks the browser for the key (a password prompt).
    expect((await fetch(`${url}/ui`)).headers.get('www-authenticate')).toBe('Basic realm="hermes console", charset="UTF-8"');
    if (IS_ROOT) {
      expect(await curlAsNobody(`${url}/v1/models`)).toBe('401');
      expect(await curlAsNobody(`${url}/api/sessions`)).toBe('401');
    }

    // The operator, with the key the banner points to.
    expect((await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    expect((await fetch(`${url}/api/sessions`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    const consolePage = await fetch(`${url}/ui`, { headers: { authorization: basic(key) } });
    expect(consolePage.status).toBe(200);
    expect(await consolePage.text()).toContain('<title>Overview · hermes</title>');
    const status = await runHermes(shell, ['status']);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/^workers alive: 1 /);
    const chat = spawn(process.execPath, [HERMES_BIN, 'chat'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    const chatExit = new Promise<number | null>((r) => chat.on('close', r));
    cleanups.push(async () => {
      if (chat.exitCode === null) chat.kill('SIGKILL');
      await chatExit;
    });
    let said = '';
    chat.stdout.on('data', (d: Buffer) => (said += d.toString()));
    await waitFor(() => said.includes('Attached to session main'), SPAWN_START_TIMEOUT_MS, 'hermes chat attached');
    chat.stdin.write('hello over the socket\n');
    await waitFor(() => said.includes('pong: hello over the socket'), 30_000, 'the reply in hermes chat');
    chat.stdin.end();
    expect(await chatExit).toBe(0);

    // A restart uses the same key.
    first.proc.kill('SIGINT');
    expect(await first.exited).toBe(0);
    const second = await startHermesUp(cleanups, env);
    expect(second.banner()[1]).toBe(first.banner()[1]);
    expect(readFileSync(file, 'utf8').trim()).toBe(key);
    expect((await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    expect((await fetch(`${url}/v1/models`)).status).toBe(401);
    second.proc.kill('SIGINT');
    expect(await second.exited).toBe(0);
  }, 180_000);
});

describe('the insecure_no_auth opt-out', () => {
  const cleanups = cleanupAfterEach();

  it('hermes gateway --insecure-no-auth serves without a key, says so and makes no key; it is refused off loopback and beside API_SERVER_KEY', async () => {
    const env = testEnv();
    cleanups.push(() => env.cleanup());
    // A free port can be taken by another process before the gateway binds it (suites side by side): the gateway
    // then exits saying so (EADDRINUSE), and is started again on another port; any other exit is the test's to see.
    let port: number;
    let gateway!: ReturnType<typeof spawn>;
    let gatewayExit!: Promise<number | null>;
    let out = '';
    let err = '';
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      const childEnv: NodeJS.ProcessEnv = { ...env.childEnv, API_SERVER_PORT: String(port), HERMES_LOG_LEVEL: 'warn' };
      delete childEnv.API_SERVER_KEY;
      delete childEnv.API_SERVER_HOST;
      const proc = spawn(process.execPath, [HERMES_BIN, 'gateway', '--insecure-no-auth'], {
        env: childEnv,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const exited = new Promise<number | null>((r) => proc.on('close', r));
      cleanups.push(async () => {
        if (proc.exitCode === null) proc.kill('SIGKILL');
        await exited;
      });
      out = '';
      err = '';
      proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
      proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
      await waitFor(() => out.includes('gateway listening') || proc.exitCode !== null, SPAWN_START_TIMEOUT_MS, 'the gateway');
      [gateway, gatewayExit] = [proc, exited];
      if (proc.exitCode === null || !err.includes('(EADDRINUSE)') || attempt === 3) break;
      await exited;
    }
    expect(out).toBe(
      `gateway listening on http://127.0.0.1:${port} · AUTH OFF (api_server.insecure_no_auth): every user of this host can act as you over HTTP\n`,
    );
    expect(err).toMatch(/HTTP API listening WITHOUT A KEY \(api_server\.insecure_no_auth\)/);
    expect((await fetch(`http://127.0.0.1:${port}/v1/models`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${port}/api/sessions`)).status).toBe(200);
    expect(readApiKeyFile(env.home)).toBeUndefined();
    const noKey = await runHermes(env, ['key'], { HERMES_API_SERVER_INSECURE_NO_AUTH: 'true' });
    expect(noKey).toMatchObject({ code: 2, stdout: '' });
    expect(noKey.stderr).toMatch(/There is no API key: api_server\.insecure_no_auth is set/);
    gateway.kill('SIGTERM');
    expect(await gatewayExit).toBe(0);

    const offLoopback = await runHermes(env, ['gateway', '--insecure-no-auth'], {
      API_SERVER_HOST: '0.0.0.0',
      API_SERVER_PORT: String(port),
    });
    expect(offLoopback.code).toBe(2);
    expect(offLoopback.stderr).toMatch(
      /Refusing to bind the API server to 0\.0\.0\.0 without a key: api_server\.insecure_no_auth is for loopback only/,
    );
    const both = await runHermes(env, ['gateway', '--insecure-no-auth'], { API_SERVER_KEY: 'operator-key', API_SERVER_PORT: String(port) });
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/Invalid setting api_server\.insecure_no_auth \(from --insecure-no-auth\): an API key is set/);
  }, 120_000);
});
