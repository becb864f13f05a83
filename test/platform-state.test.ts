/**
 * A platform that failed to start is shown as failed, with why, wherever a user looks: the gateway
 * publishes each platform's state (scheduler/delivery/platform-state-store.ts) and `hermes status`
 * (human and `--json`), the console's overview and `hermes up` show it — a Discord whose
 * `DISCORD_API_URL` answers nothing, or answers 404, is not "on". Real gateway, real Redis, the
 * tests' local Telegram, Slack and Discord for the platforms that work.
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { createLogger } from '../scheduler/logger.ts';
import { Keys } from '../scheduler/store/keys.ts';
import { GATEWAY_ALIVE_MS, publishPlatformStates, readPlatformStates } from '../scheduler/delivery/platform-state-store.ts';
import type { PlatformStateView } from '../scheduler/delivery/platform-state.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { startFakeTelegram } from './support/fake-telegram.ts';
import { ALLOWED_USER, BOT_TOKEN } from './support/telegram-env.ts';
import { SLACK_ALLOWED_USER, SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET, startFakeSlack } from './support/fake-slack.ts';
import { DISCORD_ALLOWED_USER, DISCORD_BOT_TOKEN, startFakeDiscord } from './support/fake-discord.ts';
import { clients, HERMES_BIN, runHermes, SPAWN_START_TIMEOUT_MS } from './support/stack.ts';
import { waitFor } from './support/wait-for.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { refusedPort } from './support/refused-port.ts';

const cleanups = cleanupAfterEach();
const KEY = 'platform-state-test-key-0123456789';

/** A test environment with Discord pointed at `discordUrl` (and the other platforms as `overrides` say). */
function env(discordUrl: string, overrides: Record<string, unknown> = {}): TestEnv {
  const e = testEnv({
    'api_server.port': 0,
    'api_server.key': KEY,
    'discord.bot_token': DISCORD_BOT_TOKEN,
    'discord.allowed_users': DISCORD_ALLOWED_USER,
    'discord.api_url': discordUrl,
    // One retry, a minute after the failure: the state is read long before it.
    'gateway.max_plugin_load_rearms': 1,
    'gateway.reconnect_backoff_seconds': '60',
    ...overrides,
  });
  cleanups.push(() => e.cleanup());
  return e;
}

async function gateway(e: TestEnv): Promise<Gateway> {
  const gw = await startGateway({ config: e.config, redisUrl: e.redisUrl, log: createLogger({ level: 'silent' }) });
  cleanups.push(() => gw.close());
  return gw;
}

/** `hermes status --json`'s platforms, once `platform` has left `starting`. */
async function statusJson(e: TestEnv, platform: string): Promise<PlatformStateView[]> {
  return await waitFor(
    async () => {
      const r = await runHermes(e, ['status', '--json']);
      expect(r.code, r.stderr).toBe(0);
      const views = (JSON.parse(r.stdout) as { platforms: PlatformStateView[] }).platforms;
      return views.some((p) => p.platform === platform && p.state !== 'starting') ? views : undefined;
    },
    20_000,
    `${platform} started or failed in hermes status`,
  );
}

/** A local server answering every request 404, with `body` (JSON) or none. */
async function answering404(body?: unknown): Promise<string> {
  const server: Server = createServer((req, res) => {
    req.resume();
    if (body === undefined) res.writeHead(404).end();
    else res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}/api`;
}

describe('platform state in hermes status and the console', () => {
  it('Discord at a port nothing answers is failed, with the address and the reason; Telegram and Slack are on', async () => {
    const telegram = await startFakeTelegram();
    cleanups.push(() => telegram.close());
    const slack = await startFakeSlack();
    cleanups.push(() => slack.close());
    const port = await refusedPort();
    const e = env(`http://127.0.0.1:${port}/api`, {
      'telegram.bot_token': BOT_TOKEN,
      'telegram.allowed_users': String(ALLOWED_USER),
      'telegram.api_root': telegram.apiRoot,
      'gateway.poll_timeout_seconds': 1,
      'slack.bot_token': SLACK_BOT_TOKEN,
      'slack.signing_secret': SLACK_SIGNING_SECRET,
      'slack.allowed_users': SLACK_ALLOWED_USER,
      'slack.api_url': slack.apiUrl,
    });
    const gw = await gateway(e);
    const reason = `Could not connect to Discord's API at http://127.0.0.1:${port}/api (DISCORD_API_URL): connection refused (ECONNREFUSED).`;

    const views = await statusJson(e, 'discord');
    const by = Object.fromEntries(views.map((v) => [v.platform, v]));
    expect(by.discord).toMatchObject({
      gateway: gw.instanceId,
      state: 'failed',
      detail: 'adapter_unavailable',
      error: reason,
      retry: { done: 0, max: 1, gave_up: false, next_at: expect.stringMatching(/^\d{4}-/) },
    });
    await waitFor(async () => (await statusJson(e, 'telegram')).find((p) => p.platform === 'slack')?.state === 'on', 20_000, 'slack on');
    const on = Object.fromEntries((await statusJson(e, 'telegram')).map((v) => [v.platform, v]));
    expect(on.telegram).toMatchObject({ state: 'on', detail: 'ready', error: null, retry: null });
    expect(on.slack).toMatchObject({ state: 'on', error: null });

    const human = await runHermes(e, ['status']);
    expect(human.code, human.stderr).toBe(0);
    const lines = human.stdout.split('\n');
    const at = lines.indexOf(`platforms (gateway ${gw.instanceId})`);
    expect(at).toBe(1);
    expect(lines.slice(at + 1, at + 4)).toEqual([
      '  Telegram  on',
      '  Slack     on',
      expect.stringMatching(new RegExp(`^ {2}Discord {3}failed: ${escapeRe(reason)} · retry 1 of 1 in (1m|\\d+s)$`)),
    ]);

    // The console's overview, read as a browser would (Basic auth, the key as the password).
    const page = await fetch(`${gw.httpAddress.url}/ui`, {
      headers: { authorization: `Basic ${Buffer.from(`hermes:${KEY}`).toString('base64')}` },
    });
    expect(page.status).toBe(200);
    const html = await page.text();
    const row = (platform: string) => new RegExp(`<tr data-platform="${platform}">(.*?)</tr>`).exec(html)?.[1] ?? '';
    expect(row('discord')).toContain('<span class="state state-platform-failed">failed</span>');
    expect(row('discord')).toContain(`Could not connect to Discord&#39;s API at http://127.0.0.1:${port}/api (DISCORD_API_URL)`);
    expect(row('telegram')).toContain('<span class="state state-platform-on">on</span>');
    expect(row('slack')).toContain('<span class="state state-platform-on">on</span>');
  }, 60_000);

  it('Discord at a server answering 404 says its API is not there and says the 404 once; a working Discord is on', async () => {
    for (const [body, said] of [
      [undefined, 'it answered 404.'],
      [{ message: '404: Not Found', code: 0 }, 'it answered 404: Not Found.'],
    ] as const) {
      const url = await answering404(body);
      const e = env(url);
      await gateway(e);
      const discord = (await statusJson(e, 'discord')).find((p) => p.platform === 'discord')!;
      expect(discord).toMatchObject({ state: 'failed', error: `Discord's API is not at ${url} (DISCORD_API_URL): ${said}` });
      expect(discord.error).not.toMatch(/404\D+404/);
      expect(discord.error).not.toMatch(/refused the bot token/);
    }
    const fake = await startFakeDiscord();
    cleanups.push(() => fake.close());
    const e = env(fake.apiRoot);
    await gateway(e);
    expect((await statusJson(e, 'discord')).find((p) => p.platform === 'discord')).toMatchObject({ state: 'on', error: null });
    const human = await runHermes(e, ['status']);
    expect(human.stdout).toMatch(/^ {2}Telegram {2}off \(no TELEGRAM_BOT_TOKEN\)$/m);
    expect(human.stdout).toMatch(/^ {2}Discord {3}on$/m);
  }, 60_000);

  it("a stopped gateway's platforms leave the list at once; one that died stops counting after three missed beats", async () => {
    const fake = await startFakeDiscord();
    cleanups.push(() => fake.close());
    const e = env(fake.apiRoot);
    const c = clients(e);
    cleanups.push(() => c.close());
    const keys = new Keys(e.prefix);
    const gw = await gateway(e);
    await waitFor(async () => (await readPlatformStates(c.redis, keys)).length === 1 || undefined, 10_000, 'published');
    await gw.close();
    expect(await readPlatformStates(c.redis, keys)).toEqual([]);
    expect((await runHermes(e, ['status'])).stdout).toMatch(/^platforms: no gateway running /m);

    // A gateway killed without its stop: its last write counts for GATEWAY_ALIVE_MS, then no more.
    const at = Date.now();
    await publishPlatformStates(c.redis, keys, 'gone:1:ab', [{ platform: 'discord', state: 'on', detail: 'ready', since: at }], at);
    expect((await readPlatformStates(c.redis, keys, at + GATEWAY_ALIVE_MS - 1)).map((g) => g.gateway)).toEqual(['gone:1:ab']);
    expect(await readPlatformStates(c.redis, keys, at + GATEWAY_ALIVE_MS + 1)).toEqual([]);
  }, 60_000);
});

describe('hermes up', () => {
  it('says Discord is starting, then that it failed and why; Telegram, which works, is on', async () => {
    const telegram = await startFakeTelegram();
    cleanups.push(() => telegram.close());
    const port = await refusedPort();
    const e = env(`http://127.0.0.1:${port}/api`, {
      'telegram.bot_token': BOT_TOKEN,
      'telegram.allowed_users': String(ALLOWED_USER),
      'telegram.api_root': telegram.apiRoot,
      'gateway.poll_timeout_seconds': 1,
    });
    const up = spawn(process.execPath, [HERMES_BIN, 'up', '--no-chat'], {
      env: { ...e.childEnv, TELEGRAM_BOT_TOKEN: BOT_TOKEN, DISCORD_BOT_TOKEN: DISCORD_BOT_TOKEN },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    up.stdout.on('data', (d: Buffer) => (out += d.toString()));
    up.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((r) => up.on('close', r));
    cleanups.push(async () => {
      if (up.exitCode === null && up.signalCode === null) up.kill('SIGKILL');
      await exited;
    });
    // Telegram says it is on in the banner, or in a line of its own when it was still starting then.
    const telegramOn = () => /^( {2}Telegram {2}on · |Telegram is on\.$)/m.test(out);
    await waitFor(
      () => (/Discord failed to start/.test(out) && telegramOn()) || up.exitCode !== null,
      SPAWN_START_TIMEOUT_MS,
      'the platform lines',
    );
    expect(up.exitCode, err).toBe(null);
    const lines = out.trim().split('\n');
    // The banner is printed at once, before Discord's start has failed.
    expect(lines).toContain('  Discord   starting · 1 allowed user (DISCORD_ALLOWED_USERS)');
    expect(lines.find((l) => l.startsWith('  Telegram  '))).toMatch(
      /^ {2}Telegram {2}(starting|on) · 1 allowed user \(TELEGRAM_ALLOWED_USERS\)$/,
    );
    expect(lines).toContain(
      `Discord failed to start: Could not connect to Discord's API at http://127.0.0.1:${port}/api (DISCORD_API_URL): connection refused (ECONNREFUSED). The gateway tries again once, first in 1m; \`hermes status\` shows its state.`,
    );
    up.kill('SIGINT');
    expect(await exited).toBe(0);
  }, 90_000);
});

function escapeRe(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
