/**
 * A platform's state as its gateway knows it — the gateway process is the one that connects to
 * Telegram, Slack and Discord — in the words `hermes status`, `hermes up` and the console show.
 * Each gateway publishes its own (`platform-state-store.ts`); this module says what a state is and
 * how it reads. Pure.
 *
 * States (`PLATFORM_STATES`):
 * - `on` — started and connected;
 * - `starting` — its start (token check, connection) is under way;
 * - `failed` — its start or its connection failed: `error` says why, `retry` whether and when the
 *   gateway tries again (`gateway.max_plugin_load_rearms`, `gateway.reconnect_backoff_seconds`);
 * - `off` — not configured (no bot token) or disabled;
 * - `stopped` — the gateway is stopping.
 */
import { formatSeconds } from '../interval.ts';
import { isPlatformName, PLATFORMS } from './platforms.ts';

export const PLATFORM_STATES = ['on', 'starting', 'failed', 'off', 'stopped'] as const;
export type PlatformStateName = (typeof PLATFORM_STATES)[number];

/** Where a failed platform's retries stand. Times are epoch milliseconds. */
export interface PlatformRetry {
  /** Retries done since it failed. */
  done: number;
  /** Retries the gateway makes before it gives up (`gateway.max_plugin_load_rearms`). */
  max: number;
  /** When the next retry is due; absent once the gateway gave up. */
  nextAt?: number;
  gaveUp: boolean;
}

/** One platform of one gateway, as published. Times are epoch milliseconds. */
export interface PlatformState {
  /** `telegram`, `slack`, `discord` (or a plugin's own name). */
  platform: string;
  state: PlatformStateName;
  /** The gateway's own name for the state: `ready`, `loading`, `adapter_unavailable`, `not_enabled`, … (gateway/plugins/platform-registry.ts). */
  detail: string;
  /** When it entered the state. */
  since: number;
  /** Why it failed, while `failed`. */
  error?: string;
  /** While `failed`: the gateway's retries of its start. */
  retry?: PlatformRetry;
}

/** What one running gateway published. */
export interface GatewayPlatforms {
  /** The gateway instance (`<host>:<pid>:<random>`). */
  gateway: string;
  /** Its last heartbeat, epoch ms. */
  seenAt: number;
  platforms: PlatformState[];
}

/** A platform's display name: `Discord` (a plugin's own name as it is). */
export function platformLabel(platform: string): string {
  return isPlatformName(platform) ? PLATFORMS[platform].name : platform;
}

/**
 * A state in words: `on`; `starting`; `off (no DISCORD_BOT_TOKEN)`; `failed: <error> · retry 1 of 3 in 25s`
 * (or `· gave up after 3 retries; restart the gateway to try again`).
 */
export function describePlatformState(p: PlatformState, now = Date.now()): string {
  switch (p.state) {
    case 'on':
      return 'on';
    case 'starting':
      // A retry of a failed start keeps the failure it retries.
      return p.error ? `starting · last failure: ${p.error}` : 'starting';
    case 'off':
      return p.detail === 'not_enabled' && isPlatformName(p.platform)
        ? `off (no ${PLATFORMS[p.platform].env})`
        : `off (${p.detail.replace(/_/g, ' ')})`;
    case 'stopped':
      return 'stopped (its gateway is stopping)';
    case 'failed':
      return `failed: ${p.error ?? 'no reason given'}${retryText(p.retry, now)}`;
  }
}

function retryText(retry: PlatformRetry | undefined, now: number): string {
  if (!retry) return '';
  if (retry.gaveUp) {
    return ` · gave up${retry.max > 0 ? ` after ${retry.max} ${retry.max === 1 ? 'retry' : 'retries'}` : ''}; restart the gateway to try again`;
  }
  const due =
    retry.nextAt === undefined ? '' : retry.nextAt <= now ? ' now' : ` in ${formatSeconds(Math.ceil((retry.nextAt - now) / 1000))}`;
  return ` · retry ${retry.done + 1} of ${retry.max}${due}`;
}

/** A platform state as JSON shows it (`hermes status --json`): snake case, times as ISO strings. */
export interface PlatformStateView {
  gateway: string;
  platform: string;
  state: PlatformStateName;
  detail: string;
  since: string;
  error: string | null;
  retry: { done: number; max: number; next_at: string | null; gave_up: boolean } | null;
}

/** Every platform of every gateway as JSON shows it. */
export function platformStateViews(gateways: readonly GatewayPlatforms[]): PlatformStateView[] {
  return gateways.flatMap((g) =>
    g.platforms.map((p) => ({
      gateway: g.gateway,
      platform: p.platform,
      state: p.state,
      detail: p.detail,
      since: new Date(p.since).toISOString(),
      error: p.error ?? null,
      retry: p.retry
        ? {
            done: p.retry.done,
            max: p.retry.max,
            next_at: p.retry.nextAt === undefined ? null : new Date(p.retry.nextAt).toISOString(),
            gave_up: p.retry.gaveUp,
          }
        : null,
    })),
  );
}
