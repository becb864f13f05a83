/**
 * Platform plugin loading and the reconnect watcher (docs/DESIGN.md §8), pinned to the
 * three fixes of the old system's #133289: re-gate before re-arming, never
 * stack loads while one hangs, at most 3 re-arms; backoff 30 → 60 → 120 → 240 → 300 s.
 * The registry and watcher run on a fake clock with the product's settings (backoff, watcher interval,
 * load timeout); the Telegram case uses the real adapter and grammY, with small backoffs via config.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { startGateway } from '../gateway/gateway-process.ts';
import type { PlatformAdapter, PlatformPlugin, PluginAvailability } from '../gateway/plugins/platform-plugin.ts';
import { PlatformRegistry } from '../gateway/plugins/platform-registry.ts';
import { ReconnectWatcher } from '../gateway/plugins/reconnect-watcher.ts';
import { satisfiesRange } from '../gateway/plugins/version.ts';
import { loadConfig } from '../scheduler/config/config.ts';
import { startFakeTelegram } from './support/fake-telegram.ts';
import { homeKeyAuth, readJson, waitFor } from './support/http.ts';
import { memoryLogger, telegramEnv } from './support/telegram-env.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const REARM = /^Re-arming failed platform plugin load: /;

class FakeAdapter implements PlatformAdapter {
  started = false;
  stopped = false;
  async start() {
    this.started = true;
  }
  async stopInbound() {}
  async stop() {
    this.stopped = true;
  }
  status() {
    return { fake: true };
  }
}

/** A plugin whose loads follow a script: 'fail', 'ok' or 'hang' per call (the last repeats). */
function scriptedPlugin(
  name: string,
  script: Array<'fail' | 'ok' | 'hang'>,
  extra: { availability?: PluginAvailability; requiresHermes?: string } = {},
) {
  const calls: number[] = [];
  const hangs: Array<{ resolve: (a: PlatformAdapter) => void; reject: (e: Error) => void }> = [];
  const adapters: FakeAdapter[] = [];
  let fatal: ((err: Error) => void) | undefined;
  const plugin: PlatformPlugin = {
    name,
    availability: extra.availability ?? 'enabled',
    requiresHermes: extra.requiresHermes,
    load(ctx) {
      fatal = ctx.onFatal;
      calls.push(Date.now());
      const step = script[Math.min(calls.length - 1, script.length - 1)];
      if (step === 'fail') return Promise.reject(new Error(`${name} import failed`));
      if (step === 'hang') return new Promise((resolve, reject) => hangs.push({ resolve, reject }));
      const a = new FakeAdapter();
      adapters.push(a);
      return Promise.resolve(a);
    },
  };
  return { plugin, calls, hangs, adapters, fatal: (err: Error) => fatal?.(err) };
}

const cleanups = cleanupAfterEach();

/** The product's settings (`gateway.*` defaults of scheduler/config/config.ts). */
const GATEWAY = loadConfig({ env: { HERMES_HOME: '/nonexistent-hermes-home' } }).gateway;
const BACKOFF_MS = GATEWAY.reconnect_backoff_seconds.map((s) => s * 1000);
const INTERVAL_MS = GATEWAY.watcher_interval_seconds * 1000;
const LOAD_TIMEOUT_MS = GATEWAY.plugin_load_timeout_seconds * 1000;
const MINUTE = 60_000;

function setup() {
  const { log, lines } = memoryLogger();
  const registry = new PlatformRegistry(LOAD_TIMEOUT_MS, log);
  const watcher = new ReconnectWatcher(registry, {
    backoffMs: BACKOFF_MS,
    maxRearms: GATEWAY.max_plugin_load_rearms,
    intervalMs: INTERVAL_MS,
    log,
  });
  cleanups.push(
    () => watcher.stop(),
    () => registry.close(),
  );
  const rearms = (name: string) => lines.filter((l) => REARM.test(String(l.msg)) && String(l.msg).endsWith(`: ${name}`)).length;
  return { registry, watcher, lines, rearms };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Let `ms` pass on the fake clock: due timers fire in order, each one's promises settle before the next. */
const pass = (ms: number) => vi.advanceTimersByTimeAsync(ms);

describe('platform registry and reconnect watcher', () => {
  // Only time passes between a failure and its re-arms: the watcher's interval, the backoff steps and
  // the load timeout are timers and `Date.now()`, faked; promises and I/O stay real.
  beforeEach(() => void vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] }));
  afterEach(() => void vi.useRealTimers());

  it('a failed load marks the platform adapter_unavailable; the watcher re-arms it and it heals', async () => {
    const { registry, watcher, rearms } = setup();
    const p = scriptedPlugin('flaky', ['fail', 'fail', 'ok']);
    registry.register(p.plugin);
    expect(await registry.load('flaky')).toBe('adapter_unavailable');
    expect(registry.status('flaky')).toMatchObject({ state: 'adapter_unavailable', lastError: 'flaky import failed' });
    watcher.start();
    await pass(BACKOFF_MS[0]! - 1);
    expect(p.calls).toHaveLength(1); // not before the first backoff step
    await pass(10 * MINUTE);
    expect(registry.status('flaky')?.state).toBe('ready');
    expect(p.calls).toHaveLength(3);
    expect(rearms('flaky')).toBe(2);
    expect(p.adapters[0]!.started).toBe(true);
    expect(registry.adapter('flaky')).toBe(p.adapters[0]);
  });

  it('re-arms a broken plugin at most 3 times, then gives up once', async () => {
    const { registry, watcher, lines, rearms } = setup();
    const p = scriptedPlugin('broken', ['fail']);
    registry.register(p.plugin);
    await registry.load('broken');
    watcher.start();
    await pass(60 * MINUTE); // far past every backoff step
    expect(lines.some((l) => String(l.msg).startsWith('Giving up on platform broken'))).toBe(true);
    expect(p.calls).toHaveLength(4);
    expect(rearms('broken')).toBe(3);
    expect(lines.filter((l) => String(l.msg).startsWith('Giving up')).length).toBe(1);
    expect(registry.status('broken')?.state).toBe('adapter_unavailable');
  });

  it('spaces re-arms by the backoff steps', async () => {
    const { registry, watcher } = setup();
    const p = scriptedPlugin('slowheal', ['fail', 'fail', 'fail', 'ok']);
    registry.register(p.plugin);
    await registry.load('slowheal');
    watcher.start();
    await pass(60 * MINUTE);
    expect(registry.status('slowheal')?.state).toBe('ready');
    // Each re-arm waits its step (30 s, 60 s, 120 s) from the failure before it, and comes at the
    // watcher's first look after that.
    const gaps = p.calls.slice(1).map((t, i) => t - p.calls[i]!);
    expect(gaps).toHaveLength(3);
    gaps.forEach((gap, i) => {
      expect(gap).toBeGreaterThanOrEqual(BACKOFF_MS[i]!);
      expect(gap).toBeLessThanOrEqual(BACKOFF_MS[i]! + INTERVAL_MS);
    });
  });

  it.each([
    ['disabled', { availability: 'disabled' as const }, 'disabled'],
    ['not enabled', { availability: 'not-enabled' as const }, 'not_enabled'],
    ['removed from the catalogue', { availability: 'removed' as const }, 'removed'],
    ['version-incompatible', { requiresHermes: '>=99.0.0' }, 'incompatible'],
  ])('never loads or re-arms a %s plugin', async (_what, extra, state) => {
    const { registry, watcher, rearms } = setup();
    const p = scriptedPlugin('gated', ['ok'], extra);
    registry.register(p.plugin);
    expect(await registry.load('gated')).toBe(state);
    watcher.start();
    await pass(60 * MINUTE);
    expect(p.calls).toHaveLength(0);
    expect(rearms('gated')).toBe(0);
    expect(registry.status('gated')?.state).toBe(state);
  });

  it('never re-arms while the previous load of that plugin still hangs', async () => {
    const { registry, watcher, lines, rearms } = setup();
    const p = scriptedPlugin('hanger', ['hang', 'ok']);
    registry.register(p.plugin);
    const first = registry.load('hanger');
    await pass(LOAD_TIMEOUT_MS);
    expect(await first).toBe('adapter_unavailable');
    expect(registry.status('hanger')).toMatchObject({ hanging: true, lastError: expect.stringMatching(/did not finish/) });
    watcher.start();
    await pass(60 * MINUTE);
    expect(p.calls).toHaveLength(1);
    expect(rearms('hanger')).toBe(0);
    const again = registry.load('hanger');
    await pass(LOAD_TIMEOUT_MS);
    expect(await again).toBe('adapter_unavailable');
    expect(p.calls).toHaveLength(1);
    // the hanging load finally fails: now the watcher may re-arm, and the plugin heals
    p.hangs[0]!.reject(new Error('gave up'));
    await pass(10 * MINUTE);
    expect(registry.status('hanger')?.state).toBe('ready');
    expect(p.calls).toHaveLength(2);
    expect(rearms('hanger')).toBe(1);
    expect(lines.some((l) => l.msg === 'previous plugin load still hangs; not re-arming')).toBe(true);
  });

  it('adopts the adapter of a hanging load that succeeds late', async () => {
    const { registry } = setup();
    const p = scriptedPlugin('late', ['hang']);
    registry.register(p.plugin);
    const load = registry.load('late');
    await pass(LOAD_TIMEOUT_MS);
    expect(await load).toBe('adapter_unavailable');
    const adapter = new FakeAdapter();
    p.hangs[0]!.resolve(adapter);
    await pass(0);
    expect(registry.status('late')?.state).toBe('ready');
    expect(adapter.started).toBe(true);
    expect(registry.status('late')?.hanging).toBe(false);
  });

  it('a ready adapter that reports a fatal failure is stopped and re-armed', async () => {
    const { registry, watcher, rearms } = setup();
    const p = scriptedPlugin('fragile', ['ok']);
    registry.register(p.plugin);
    expect(await registry.load('fragile')).toBe('ready');
    watcher.start();
    p.fatal(new Error('token revoked'));
    await pass(10 * MINUTE);
    expect(p.calls).toHaveLength(2);
    expect(registry.status('fragile')?.state).toBe('ready');
    expect(p.adapters[0]!.stopped).toBe(true);
    expect(p.adapters[1]!.started).toBe(true);
    expect(rearms('fragile')).toBe(1);
  });

  it('hands the inbound events a failed adapter held to the adapter that replaces it, once that one started (seed 002, fix two)', async () => {
    const { registry, watcher } = setup();
    class HoldingAdapter extends FakeAdapter {
      held: unknown[] = [];
      adopted: unknown[] = [];
      failStart = false;
      override async start() {
        if (this.failStart) throw new Error('connection refused');
        await super.start();
      }
      override async stop() {
        await super.stop();
        this.held.push('rescued at teardown'); // what the teardown rescued is handed over too
      }
      heldInbound() {
        return this.held;
      }
      adoptHeldInbound(events: unknown[]) {
        this.adopted.push(...events);
      }
    }
    const adapters: HoldingAdapter[] = [];
    let fatal: ((err: Error) => void) | undefined;
    registry.register({
      name: 'holding',
      availability: 'enabled',
      async load(ctx) {
        fatal = ctx.onFatal;
        const a = new HoldingAdapter();
        a.failStart = adapters.length === 1; // the first replacement candidate cannot connect
        adapters.push(a);
        return a;
      },
    });
    // another platform, failing and re-arming on its own meanwhile, is not touched
    const other = scriptedPlugin('other', ['ok']);
    registry.register(other.plugin);
    expect(await registry.load('holding')).toBe('ready');
    expect(await registry.load('other')).toBe('ready');
    adapters[0]!.held.push('update 1', 'update 2');
    watcher.start();
    fatal!(new Error('polling stalled'));
    await pass(10 * MINUTE);
    expect(registry.status('holding')?.state).toBe('ready');
    expect(adapters).toHaveLength(3);
    expect(adapters[1]!.adopted).toEqual([]); // a candidate whose start failed never takes the queue
    expect(adapters[2]!.adopted).toEqual(['update 1', 'update 2', 'rescued at teardown']);
    expect(registry.status('holding')?.heldInbound).toBe(0);
    expect(registry.status('other')?.state).toBe('ready');
    expect(other.calls).toHaveLength(1);
  });

  it('reads plugin version ranges', () => {
    expect(satisfiesRange('0.1.0', '>=0.1.0')).toBe(true);
    expect(satisfiesRange('0.1.0', '^0.1.0')).toBe(true);
    expect(satisfiesRange('0.2.0', '^0.1.0')).toBe(false);
    expect(satisfiesRange('1.4.0', '^1.2.0')).toBe(true);
    expect(satisfiesRange('0.1.0', '0.1.0')).toBe(true);
    expect(satisfiesRange('0.1.0', '>=0.2.0')).toBe(false);
    expect(satisfiesRange('0.1.0', 'latest')).toBe(false);
  });
});

describe('gateway config for reconnects', () => {
  it('defaults to 30 → 60 → 120 → 240 → 300 s and 3 re-arms; overridable by environment', () => {
    const base = { HERMES_HOME: '/nonexistent-hermes-home' };
    const def = loadConfig({ env: base });
    expect(def.gateway.reconnect_backoff_seconds).toEqual([30, 60, 120, 240, 300]);
    expect(def.gateway.max_plugin_load_rearms).toBe(3);
    expect(def.agent.cron_drain_timeout).toBe(30);
    const env = loadConfig({
      env: { ...base, HERMES_GATEWAY_RECONNECT_BACKOFF_SECONDS: '1, 2,4', HERMES_GATEWAY_MAX_PLUGIN_LOAD_REARMS: '5' },
    });
    expect(env.gateway.reconnect_backoff_seconds).toEqual([1, 2, 4]);
    expect(env.gateway.max_plugin_load_rearms).toBe(5);
    expect(() => loadConfig({ env: { ...base, HERMES_GATEWAY_RECONNECT_BACKOFF_SECONDS: 'soon' } })).toThrow(
      /gateway\.reconnect_backoff_seconds/,
    );
  });
});

describe('the Telegram adapter through the registry', () => {
  it('a failed getMe leaves Telegram adapter_unavailable until the watcher re-arms it; then it polls', async () => {
    const fake = await startFakeTelegram();
    cleanups.push(() => fake.close());
    fake.failGetMe(2);
    // The first re-arm waits 3 s: the health read below must see the unavailable state, however slow the
    // machine (with 0.2 s a loaded machine's health request could arrive after the re-arm began).
    const env = telegramEnv(fake, { 'gateway.reconnect_backoff_seconds': '3,0.2,0.2' });
    cleanups.push(() => env.cleanup());
    const { log, lines } = memoryLogger();
    const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log });
    cleanups.push(() => gw.close());
    await waitFor(() => gw.platforms().find((p) => p.name === 'telegram')?.state === 'adapter_unavailable', 5000, 'unavailable');
    const health = await readJson(fetch(`${gw.httpAddress.url}/health`, { headers: homeKeyAuth(env.home) }));
    expect(health.platforms.telegram.state).toBe('adapter_unavailable');
    await waitFor(() => gw.platforms().find((p) => p.name === 'telegram')?.state === 'ready', 10_000, 'ready');
    expect(lines.filter((l) => l.msg === 'Re-arming failed platform plugin load: telegram')).toHaveLength(2);
    await waitFor(() => fake.polling, 5000, 'polling');
    expect(JSON.stringify(lines)).not.toContain('AAFakeSecretTokenForTests');
  });

  it('without a bot token Telegram is not enabled and nothing is loaded', async () => {
    const fake = await startFakeTelegram();
    cleanups.push(() => fake.close());
    const env = telegramEnv(fake, { 'telegram.bot_token': '' });
    cleanups.push(() => env.cleanup());
    const gw = await startGateway({
      config: { ...env.config, telegram: { ...env.config.telegram, bot_token: undefined } },
      redisUrl: env.redisUrl,
      log: memoryLogger().log,
    });
    cleanups.push(() => gw.close());
    await sleep(200);
    expect(gw.platforms()).toEqual([
      expect.objectContaining({ name: 'telegram', state: 'not_enabled', loads: 0 }),
      expect.objectContaining({ name: 'slack', state: 'not_enabled', loads: 0 }),
      expect.objectContaining({ name: 'discord', state: 'not_enabled', loads: 0 }),
    ]);
    expect(fake.pollCount).toBe(0);
  });
});
