/**
 * Platform plugins of the gateway and their lazy loading (docs/DESIGN.md §8).
 *
 * States of a platform:
 * - `disabled`, `not_enabled`, `removed`, `incompatible` — gated: never loaded,
 *   never re-armed (the manifest says so, or `requiresHermes` does not match);
 * - `loading` → `ready` (adapter started) or `adapter_unavailable` (the load
 *   threw, or passed `gateway.plugin_load_timeout_seconds`);
 * - `stopped` — the gateway is closing.
 *
 * A load that passed its deadline is *hanging* until its promise settles. The
 * registry never starts a second load of a plugin while one is still in flight
 * or hanging (no stacked loads). If a hanging load succeeds later, its adapter
 * is adopted; if the gateway stopped meanwhile, it is stopped.
 *
 * A ready adapter that reports a fatal failure (`onFatal`) is stopped and its
 * platform becomes `adapter_unavailable`, which the reconnect watcher handles
 * like a failed load.
 *
 * Held inbound events (seed 002, fix two, for every platform): the inbound events a
 * failed adapter still holds (`heldInbound()`, read after its `stop()`, so what its
 * teardown rescued is included) stay with its platform's entry and are handed to the
 * adapter that replaces it (`adoptHeldInbound`) once that one has started — a
 * candidate whose start fails never takes them. A no-op for adapters without a hold
 * queue. Each platform has its own entry: one platform failing, re-arming or holding
 * events never touches another's.
 */
import type { Logger } from 'pino';
import type { PlatformAdapter, PlatformPlugin } from './platform-plugin.ts';
import { HERMES_VERSION, satisfiesRange } from './version.ts';

export type PlatformState =
  'idle' | 'loading' | 'ready' | 'adapter_unavailable' | 'disabled' | 'not_enabled' | 'removed' | 'incompatible' | 'stopped';

/** Gated states: nothing ever loads these plugins. */
export const GATED_STATES: readonly PlatformState[] = ['disabled', 'not_enabled', 'removed', 'incompatible'];

interface Entry {
  plugin: PlatformPlugin;
  state: PlatformState;
  /** Epoch ms the platform entered its state. */
  since: number;
  adapter?: PlatformAdapter;
  /** The in-flight load (including one that passed its deadline). */
  inflight?: Promise<unknown>;
  hanging: boolean;
  lastError?: string;
  /** Epoch ms of the last failure (load or fatal). */
  failedAt?: number;
  loads: number;
  abort?: AbortController;
  /** Inbound events held by a failed adapter, waiting for its successor. */
  held: unknown[];
}

/** A snapshot for `/health` and the watcher. */
export interface PlatformStatus {
  name: string;
  state: PlatformState;
  hanging: boolean;
  loads: number;
  /** Epoch ms it entered `state`. */
  since: number;
  lastError?: string;
  failedAt?: number;
  /** Inbound events held for the next adapter of this platform. */
  heldInbound: number;
  adapter?: Record<string, unknown>;
}

export class PlatformRegistry {
  private readonly entries = new Map<string, Entry>();
  private readonly listeners = new Set<(status: PlatformStatus) => void>();
  private closed = false;

  /**
   * @param loadTimeoutMs - a load taking longer counts as failed (`gateway.plugin_load_timeout_seconds`)
   * @param version - this build's version, for `requiresHermes` (default package.json's)
   */
  constructor(
    private readonly loadTimeoutMs: number,
    private readonly log: Logger,
    private readonly version: string = HERMES_VERSION,
  ) {}

  /** Register a plugin (replacing one of the same name that is not loaded). */
  register(plugin: PlatformPlugin): void {
    this.entries.set(plugin.name, { plugin, state: this.gate(plugin) ?? 'idle', since: Date.now(), hanging: false, loads: 0, held: [] });
  }

  /**
   * Call `listener` with a platform's status after each change of its state (and of its last error).
   * A listener that throws is ignored. @returns the unsubscribe function
   */
  onChange(listener: (status: PlatformStatus) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The manifest of a registered platform. */
  plugin(name: string): PlatformPlugin | undefined {
    return this.entries.get(name)?.plugin;
  }

  /** Names of all registered platforms. */
  names(): string[] {
    return [...this.entries.keys()];
  }

  /** Whether a platform is gated (disabled, not enabled, removed, incompatible). */
  isGated(name: string): boolean {
    const e = this.entries.get(name);
    return !e || GATED_STATES.includes(e.state);
  }

  /** Whether a load of `name` is still in flight (possibly past its deadline). */
  isLoading(name: string): boolean {
    return this.entries.get(name)?.inflight !== undefined;
  }

  /** The running adapter of a platform, if it is ready. */
  adapter(name: string): PlatformAdapter | undefined {
    const e = this.entries.get(name);
    return e?.state === 'ready' ? e.adapter : undefined;
  }

  status(name: string): PlatformStatus | undefined {
    const e = this.entries.get(name);
    if (!e) return undefined;
    return {
      name,
      state: e.state,
      since: e.since,
      hanging: e.hanging,
      loads: e.loads,
      heldInbound: e.held.length,
      ...(e.lastError ? { lastError: e.lastError } : {}),
      ...(e.failedAt ? { failedAt: e.failedAt } : {}),
      ...(e.adapter && e.state === 'ready' ? { adapter: e.adapter.status() } : {}),
    };
  }

  statuses(): PlatformStatus[] {
    return this.names().map((n) => this.status(n)!);
  }

  /**
   * Load and start a platform's adapter.
   * No-op for gated platforms, ready ones, and while a previous load is in flight or hanging.
   * @returns the platform's state afterwards (`ready`, `adapter_unavailable`, a gated state,
   *   or `loading` when a previous load is still in flight)
   */
  async load(name: string): Promise<PlatformState> {
    const e = this.entries.get(name);
    if (!e) throw new Error(`unknown platform ${name}`);
    if (this.closed) return e.state;
    const gated = this.gate(e.plugin);
    if (gated) {
      this.enter(e, gated);
      return gated;
    }
    if (e.state === 'ready') return 'ready';
    if (e.inflight) return e.state;
    e.loads++;
    this.enter(e, 'loading');
    const abort = new AbortController();
    e.abort = abort;
    const attempt = (async () => {
      const adapter = await e.plugin.load({ signal: abort.signal, onFatal: (err) => void this.fail(name, err) });
      return adapter;
    })();
    e.inflight = attempt;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), this.loadTimeoutMs)));
    try {
      const outcome = await Promise.race([attempt, deadline]);
      if (outcome === 'timeout') {
        e.hanging = true;
        this.markUnavailable(e, `load did not finish within ${Math.round(this.loadTimeoutMs / 1000)}s`);
        // Leave the load running (it cannot be killed); settle it later, adopting a late success.
        attempt
          .then(
            (adapter) => void this.adoptLate(e, adapter),
            (err: Error) => this.log.warn({ platform: name, err: err.message }, 'hanging platform plugin load failed'),
          )
          .finally(() => {
            e.hanging = false;
            if (e.inflight === attempt) e.inflight = undefined;
          });
        abort.abort();
        return e.state;
      }
      e.inflight = undefined;
      await this.startAdapter(e, outcome);
      return e.state;
    } catch (err) {
      e.inflight = undefined;
      this.markUnavailable(e, (err as Error).message ?? String(err));
      return e.state;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Stop inbound work of every ready adapter (drain). */
  async stopInbound(): Promise<void> {
    await Promise.allSettled(
      [...this.entries.values()].filter((e) => e.state === 'ready' && e.adapter).map((e) => e.adapter!.stopInbound()),
    );
  }

  /** Stop every adapter; later loads are refused and late loads are stopped. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    const stops: Promise<unknown>[] = [];
    for (const e of this.entries.values()) {
      e.abort?.abort();
      if (e.adapter)
        stops.push(
          e.adapter.stop().catch((err: Error) => this.log.warn({ platform: e.plugin.name, err: err.message }, 'adapter stop failed')),
        );
      e.adapter = undefined;
      if (!GATED_STATES.includes(e.state)) this.enter(e, 'stopped');
    }
    await Promise.all(stops);
  }

  private gate(plugin: PlatformPlugin): PlatformState | undefined {
    if (plugin.availability === 'disabled') return 'disabled';
    if (plugin.availability === 'not-enabled') return 'not_enabled';
    if (plugin.availability === 'removed') return 'removed';
    if (plugin.requiresHermes && !satisfiesRange(this.version, plugin.requiresHermes)) return 'incompatible';
    return undefined;
  }

  private async startAdapter(e: Entry, adapter: PlatformAdapter): Promise<void> {
    if (this.closed) {
      await adapter.stop().catch(() => {});
      return;
    }
    try {
      await adapter.start();
    } catch (err) {
      await adapter.stop().catch(() => {});
      this.markUnavailable(e, `adapter did not start: ${(err as Error).message}`);
      return;
    }
    e.adapter = adapter;
    e.lastError = undefined;
    this.enter(e, 'ready');
    if (e.held.length > 0 && adapter.adoptHeldInbound) {
      const held = e.held;
      e.held = [];
      adapter.adoptHeldInbound(held);
      this.log.info({ platform: e.plugin.name, events: held.length }, 'held inbound events handed to the rebuilt adapter');
    }
    this.log.info({ platform: e.plugin.name, loads: e.loads }, 'platform adapter ready');
  }

  private async adoptLate(e: Entry, adapter: PlatformAdapter): Promise<void> {
    if (this.closed || e.state === 'ready') {
      await adapter.stop().catch(() => {});
      return;
    }
    this.log.info({ platform: e.plugin.name }, 'a hanging platform plugin load finished late; adopting its adapter');
    await this.startAdapter(e, adapter);
  }

  private markUnavailable(e: Entry, reason: string): void {
    e.lastError = reason;
    e.failedAt = Date.now();
    this.log.warn({ platform: e.plugin.name, err: reason }, `platform ${e.plugin.name}: adapter_unavailable`);
    this.enter(e, 'adapter_unavailable');
  }

  /** Move `e` to `state` (its `since` restarts only when the state changes) and tell the listeners. */
  private enter(e: Entry, state: PlatformState): void {
    if (e.state !== state) e.since = Date.now();
    e.state = state;
    const status = this.status(e.plugin.name)!;
    for (const listener of this.listeners) {
      try {
        listener(status);
      } catch {
        /* a listener never stops a transition */
      }
    }
  }

  /** A ready adapter failed for good: stop it and mark the platform for the watcher. */
  private async fail(name: string, err: Error): Promise<void> {
    const e = this.entries.get(name);
    if (!e || this.closed) return;
    const adapter = e.adapter;
    e.adapter = undefined;
    this.markUnavailable(e, err.message);
    await adapter?.stop().catch(() => {});
    // After the stop, so events its teardown rescued are kept too.
    const held = adapter?.heldInbound?.() ?? [];
    if (held.length > 0) e.held.push(...held);
  }
}
