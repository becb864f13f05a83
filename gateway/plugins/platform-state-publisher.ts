/**
 * Publishes this gateway's platform states where `hermes status` and the console read them
 * (scheduler/delivery/platform-state-store.ts): at every change of a platform's state in the
 * registry, when the reconnect watcher gives up, and on a heartbeat that keeps them current.
 * A write Redis refuses is logged and made again at the next change or beat.
 */
import type { Logger } from 'pino';
import type { Keys } from '../../scheduler/store/keys.ts';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import type { PlatformState, PlatformStateName } from '../../scheduler/delivery/platform-state.ts';
import { GATEWAY_HEARTBEAT_MS, publishPlatformStates, removePlatformStates } from '../../scheduler/delivery/platform-state-store.ts';
import type { PlatformRegistry, PlatformState as RegistryState, PlatformStatus } from './platform-registry.ts';
import type { RearmProgress } from './reconnect-watcher.ts';

/** The published state of each registry state. */
const STATE_OF: Record<RegistryState, PlatformStateName> = {
  ready: 'on',
  idle: 'starting',
  loading: 'starting',
  adapter_unavailable: 'failed',
  incompatible: 'failed',
  disabled: 'off',
  not_enabled: 'off',
  removed: 'off',
  stopped: 'stopped',
};

/** A registry status as published, with the watcher's re-arms while it failed. */
export function platformStateOf(status: PlatformStatus, progress?: RearmProgress): PlatformState {
  const state = STATE_OF[status.state];
  const error = status.state === 'incompatible' ? 'its plugin needs another hermes version' : state === 'on' ? undefined : status.lastError;
  return {
    platform: status.name,
    state,
    detail: status.state,
    since: status.since,
    ...(error ? { error } : {}),
    ...(state === 'failed' && progress ? { retry: progress } : {}),
  };
}

/** What the publisher reads and writes. */
export interface PlatformStatePublisherDeps {
  redis: RedisClient;
  keys: Keys;
  instanceId: string;
  registry: PlatformRegistry;
  /** The re-arms of a failed platform (`ReconnectWatcher.progress`). */
  progress: (name: string) => RearmProgress | undefined;
  log: Logger;
}

export class PlatformStatePublisher {
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private writing: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(private readonly deps: PlatformStatePublisherDeps) {}

  /** Publish now, then at every change and heartbeat until `stop()`. */
  start(): void {
    this.unsubscribe = this.deps.registry.onChange(() => this.publish());
    this.timer = setInterval(() => this.publish(), GATEWAY_HEARTBEAT_MS);
    this.timer.unref();
    this.publish();
  }

  /** Write the current states; a call while a write runs is folded into one more write after it. */
  publish(): void {
    if (this.stopped) return;
    if (this.writing) {
      this.again = true;
      return;
    }
    this.writing = (async () => {
      do {
        this.again = false;
        const { registry, redis, keys, instanceId, progress, log } = this.deps;
        const states = registry.statuses().map((s) => platformStateOf(s, progress(s.name)));
        await publishPlatformStates(redis, keys, instanceId, states).catch((err: Error) =>
          log.warn({ err: err.message }, 'platform states not published'),
        );
      } while (this.again && !this.stopped);
    })().finally(() => (this.writing = undefined));
  }

  /** Stop publishing and remove what this gateway published. Resolves once removed (or Redis refused). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.unsubscribe?.();
    await this.writing;
    await removePlatformStates(this.deps.redis, this.deps.keys, this.deps.instanceId).catch((err: Error) =>
      this.deps.log.warn({ err: err.message }, 'platform states not removed'),
    );
  }
}
