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
  /**
   * Answer a request to one of the plugin's `httpPaths` (the gateway routes it here only while
   * the adapter is ready, and answers 503 otherwise). No bearer key is checked before: the
   * adapter authenticates the platform itself (e.g. Slack's request signature).
   */
  handleHttp?(request: PlatformHttpRequest): Promise<PlatformHttpAnswer>;
  /**
   * Inbound events this adapter accepted from its platform but has not stored yet (a platform
   * whose events cannot be fetched again once acknowledged). Read after `stop()`; the registry
   * hands them to the adapter that replaces this one. Adapters that store before they
   * acknowledge (Telegram, Slack) hold nothing and leave this out.
   */
  heldInbound?(): unknown[];
  /** Take over the held inbound events of the adapter this one replaces; called once it is ready. */
  adoptHeldInbound?(events: unknown[]): void;
}

/** A request to a platform's own HTTP path (`POST /slack/events`). */
export interface PlatformHttpRequest {
  path: string;
  /** Lower-cased header names. */
  headers: Record<string, string | string[] | undefined>;
  /** The body exactly as received (signatures cover its bytes). */
  rawBody: string;
}

/** The answer to a {@link PlatformHttpRequest}. */
export interface PlatformHttpAnswer {
  status: number;
  /** A JSON body, or none. */
  json?: unknown;
}

/** What a plugin's `load()` gets. */
export interface PluginLoadContext {
  /** Aborted when the load's deadline passed or the gateway stops; a load should give up. */
  signal: AbortSignal;
  /** A running adapter reports an unrecoverable failure here (e.g. its token was revoked). */
  onFatal: (err: Error) => void;
}

/** A platform plugin's manifest and loader. */
export interface PlatformPlugin {
  /** Platform name, e.g. `telegram`. */
  readonly name: string;
  readonly availability: PluginAvailability;
  /** Hermes versions the plugin works with: `>=0.1.0`, `^0.1.0` or an exact `0.1.0`. Any when unset. */
  readonly requiresHermes?: string;
  /** `POST` paths of the gateway's HTTP server routed to the adapter's `handleHttp` (`/slack/events`). */
  readonly httpPaths?: readonly string[];
  /** Import and connect the adapter (not started yet). Rejects when it cannot. */
  load(ctx: PluginLoadContext): Promise<PlatformAdapter>;
}
