/**
 * Platform plugin loading and the reconnect watcher (docs/DESIGN.md §8), pinned to the
 * three fixes of the old system's #133289: re-gate before re-arming, never
 * stack loads while one hangs, at most 3 re-arms; backoff 30 → 60 → 120 → 240 → 300 s.
 * Small backoffs via config; the Telegram case uses the real adapter and grammY.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway } from '../gateway/gateway-process.ts';
import type { PlatformAdapter, PlatformPlugin, PluginAvailability } from '../gateway/plugins/platform-plugin.ts';
import { PlatformRegistry } from '../gateway/plugins/platform-registry.ts';
import { ReconnectWatcher } from '../gateway/plugins/reconnect-watcher.ts';
import { satisfiesRange } from '../gateway/plugins/version.ts';
import { loadConfig } from '../scheduler/config/config.ts';
import { startFakeTelegram } from './support/fake-telegram.ts';
import { readJson, waitFor } from './support/http.ts';
import { memoryLogger, telegramEnv } from './support/telegram-env.ts';

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

const stops: Array<() => unknown> = [];
afterEach(async () => {
  for (const s of stops.splice(0).reverse()) await s();
});

function setup(backoffMs = [40, 80, 160], loadTimeoutMs = 1000) {
  const { log, lines } = memoryLogger();
  const registry = new PlatformRegistry(loadTimeoutMs, log);
  const watcher = new ReconnectWatcher(registry, { backoffMs, maxRearms: 3, intervalMs: 10, log });
  stops.push(
    () => watcher.stop(),
    () => registry.close(),
  );
  const rearms = (name: string) => lines.filter((l) => REARM.test(String(l.msg)) && String(l.msg).endsWith(`: ${name}`)).length;
  return { registry, watcher, lines, rearms };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('platform registry and reconnect watcher', () => {
  it('a failed load marks the platform adapter_unavailable; the watcher re-arms it and it heals', async () => {
    const { registry, watcher, rearms } = setup();
    const p = scriptedPlugin('flaky', ['fail', 'fail', 'ok']);
    registry.register(p.plugin);
    expect(await registry.load('flaky')).toBe('adapter_unavailable');
    expect(registry.status('flaky')).toMatchObject({ state: 'adapter_unavailable', lastError: 'flaky import failed' });
    watcher.start();
    await waitFor(() => registry.status('flaky')?.state === 'ready', 5000, 'healed');
    expect(p.calls).toHaveLength(3);
    expect(rearms('flaky')).toBe(2);
    expect(p.adapters[0]!.started).toBe(true);
    expect(registry.adapter('flaky')).toBe(p.adapters[0]);
  });

  it('re-arms a broken plugin at most 3 times, then gives up once', async () => {
    const { registry, watcher, lines, rearms } = setup([20, 20, 20]);
    const p = scriptedPlugin('broken', ['fail']);
    registry.register(p.plugin);
    await registry.load('broken');
    watcher.start();
    await waitFor(() => lines.some((l) => String(l.msg).startsWith('Giving up on platform broken')), 5000, 'give up');
    await sleep(200);
    expect(p.calls).toHaveLength(4);
    expect(rearms('broken')).toBe(3);
    expect(lines.filter((l) => String(l.msg).startsWith('Giving up')).length).toBe(1);
    expect(registry.status('broken')?.state).toBe('adapter_unavailable');
  });

  it('spaces re-arms by the backoff steps', async () => {
    const { registry, watcher } = setup([100, 200, 400]);
    const p = scriptedPlugin('slowheal', ['fail', 'fail', 'fail', 'ok']);
    registry.register(p.plugin);
    await registry.load('slowheal');
    watcher.start();
    await waitFor(() => registry.status('slowheal')?.state === 'ready', 5000, 'healed');
    const gaps = p.calls.slice(1).map((t, i) => t - p.calls[i]!);
    expect(gaps[0]).toBeGreaterThanOrEqual(95);
    expect(gaps[1]).toBeGreaterThanOrEqual(195);
    expect(gaps[2]).toBeGreaterThanOrEqual(395);
    expect(gaps[2]).toBeLessThan(1000);
  });

  it.each([
    ['disabled', { availability: 'disabled' as const }, 'disabled'],
    ['not enabled', { availability: 'not-enabled' as const }, 'not_enabled'],
    ['removed from the catalogue', { availability: 'removed' as const }, 'removed'],
    ['version-incompatible', { requiresHermes: '>=99.0.0' }, 'incompatible'],
  ])('never loads or re-arms a %s plugin', async (_what, extra, state) => {
    const { registry, watcher, rearms } = setup([10, 10, 10]);
    const p = scriptedPlugin('gated', ['ok'], extra);
    registry.register(p.plugin);
    expect(await registry.load('gated')).toBe(state);
    watcher.start();
    await sleep(150);
    expect(p.calls).toHaveLength(0);
    expect(rearms('gated')).toBe(0);
    expect(registry.status('gated')?.state).toBe(state);
  });

  it('never re-arms while the previous load of that plugin still hangs', async () => {
    const { registry, watcher, lines, rearms } = setup([10, 10, 10], 50);
    const p = scriptedPlugin('hanger', ['hang', 'ok']);
    registry.register(p.plugin);
    expect(await registry.load('hanger')).toBe('adapter_unavailable');
    expect(registry.status('hanger')).toMatchObject({ hanging: true, lastError: expect.stringMatching(/did not finish/) });
    watcher.start();
    await sleep(250);
    expect(p.calls).toHaveLength(1);
    expect(rearms('hanger')).toBe(0);
    expect(await registry.load('hanger')).toBe('adapter_unavailable');
    expect(p.calls).toHaveLength(1);
    // the hanging load finally fails: now the watcher may re-arm, and the plugin heals
    p.hangs[0]!.reject(new Error('gave up'));
    await waitFor(() => registry.status('hanger')?.state === 'ready', 5000, 'healed');
    expect(p.calls).toHaveLength(2);
    expect(rearms('hanger')).toBe(1);
    expect(lines.some((l) => l.msg === 'previous plugin load still hangs; not re-arming')).toBe(true);
  });

  it('adopts the adapter of a hanging load that succeeds late', async () => {
    const { registry } = setup([10_000], 30);
    const p = scriptedPlugin('late', ['hang']);
    registry.register(p.plugin);
    expect(await registry.load('late')).toBe('adapter_unavailable');
    const adapter = new FakeAdapter();
    p.hangs[0]!.resolve(adapter);
    await waitFor(() => registry.status('late')?.state === 'ready', 2000, 'adopted');
    expect(adapter.started).toBe(true);
    expect(registry.status('late')?.hanging).toBe(false);
  });

  it('a ready adapter that reports a fatal failure is stopped and re-armed', async () => {
    const { registry, watcher, rearms } = setup([20, 20, 20]);
    const p = scriptedPlugin('fragile', ['ok']);
    registry.register(p.plugin);
    expect(await registry.load('fragile')).toBe('ready');
    watcher.start();
    p.fatal(new Error('token revoked'));
    await waitFor(() => p.calls.length === 2 && registry.status('fragile')?.state === 'ready', 5000, 'reloaded');
    expect(p.adapters[0]!.stopped).toBe(true);
    expect(p.adapters[1]!.started).toBe(true);
    expect(rearms('fragile')).toBe(1);
  });

  it('hands the inbound events a failed adapter held to the adapter that replaces it, once that one started (seed 002, fix two)', async () => {
    const { registry, watcher } = setup([20, 20, 20]);
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
    await waitFor(() => registry.status('holding')?.state === 'ready' && adapters.length === 3, 5000, 'rebuilt adapter ready');
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
    stops.push(() => fake.close());
    fake.failGetMe(2);
    // The first re-arm waits 3 s: the health read below must see the unavailable state, however slow the
    // machine (with 0.2 s a loaded machine's health request could arrive after the re-arm began).
    const env = telegramEnv(fake, { 'gateway.reconnect_backoff_seconds': '3,0.2,0.2' });
    stops.push(() => env.cleanup());
    const { log, lines } = memoryLogger();
    const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log });
    stops.push(() => gw.close());
    await waitFor(() => gw.platforms().find((p) => p.name === 'telegram')?.state === 'adapter_unavailable', 5000, 'unavailable');
    const health = await readJson(fetch(`${gw.httpAddress.url}/health`));
    expect(health.platforms.telegram.state).toBe('adapter_unavailable');
    await waitFor(() => gw.platforms().find((p) => p.name === 'telegram')?.state === 'ready', 10_000, 'ready');
    expect(lines.filter((l) => l.msg === 'Re-arming failed platform plugin load: telegram')).toHaveLength(2);
    await waitFor(() => fake.polling, 5000, 'polling');
    expect(JSON.stringify(lines)).not.toContain('AAFakeSecretTokenForTests');
  });

  it('without a bot token Telegram is not enabled and nothing is loaded', async () => {
    const fake = await startFakeTelegram();
    stops.push(() => fake.close());
    const env = telegramEnv(fake, { 'telegram.bot_token': '' });
    stops.push(() => env.cleanup());
    const gw = await startGateway({
      config: { ...env.config, telegram: { ...env.config.telegram, bot_token: undefined } },
      redisUrl: env.redisUrl,
      log: memoryLogger().log,
    });
    stops.push(() => gw.close());
    await sleep(200);
    expect(gw.platforms()).toEqual([
      expect.objectContaining({ name: 'telegram', state: 'not_enabled', loads: 0 }),
      expect.objectContaining({ name: 'slack', state: 'not_enabled', loads: 0 }),
      expect.objectContaining({ name: 'discord', state: 'not_enabled', loads: 0 }),
    ]);
    expect(fake.pollCount).toBe(0);
  });
});
