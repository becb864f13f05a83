/**
 * The contract of a platform plugin (Telegram, and any later platform): a
 * manifest the registry can gate without loading anything, and a lazy `load()`
 * that imports the adapter's code and connects it.
 */

/** Whether the operator wants the plugin: only `enabled` plugins are ever loaded. */
export type PluginAvailability = 'enabled' | 'disabled' | 'not-enabled' | 'removed';

/** A running platform adapter. */
export interface PlatformAdapter {
  /** Start relaying (polling, consuming the outbound queue). */
  start(): Promise<void>;
  /** Stop taking inbound work (drain); outbound delivery keeps running until `stop()`. */
  stopInbound(): Promise<void>;
  /** Stop everything. Idempotent. */
  stop(): Promise<void>;
  /** Extra fields for `/health`. */
  status(): Record<string, unknown>;
}

/** What a plugin's `load()` gets. */
export interface PluginLoadContext {
  /** Aborted when the load's deadline passed or the gateway stops; a load should give up. */
  signal: AbortSignal;
  /** A running adapter reports an unrecoverable failure here (e.g. its token was revoked). */
  onFatal(err: Error): void;
}

/** A platform plugin's manifest and loader. */
export interface PlatformPlugin {
  /** Platform name, e.g. `telegram`. */
  readonly name: string;
  readonly availability: PluginAvailability;
  /** Hermes versions the plugin works with: `>=0.1.0`, `^0.1.0` or an exact `0.1.0`. Any when unset. */
  readonly requiresHermes?: string;
  /** Import and connect the adapter (not started yet). Rejects when it cannot. */
  load(ctx: PluginLoadContext): Promise<PlatformAdapter>;
}
