/**
 * The reconnect watcher (docs/DESIGN.md §8): brings platforms in `adapter_unavailable`
 * back by re-arming their plugin load, under three safety valves taken from
 * the old system's fix (#133289):
 *
 * 1. Re-gate before re-arming: a disabled, not-enabled, removed or
 *    version-incompatible plugin fails the same way as a broken load but is
 *    never re-armed.
 * 2. Never stack loads: while the previous load of that plugin still hangs,
 *    the re-arm is skipped (and not counted).
 * 3. Capped: at most `gateway.max_plugin_load_rearms` (3) re-arms per failure
 *    episode, so a transient failure heals and a broken plugin does not reload
 *    forever. An episode ends when the platform becomes `ready`.
 *
 * Re-arms are spaced by `gateway.reconnect_backoff_seconds`
 * (30 → 60 → 120 → 240 → 300 s; the last step repeats), counted from the
 * failure. Each re-arm logs `Re-arming failed platform plugin load: <name>`.
 * The watcher looks every `gateway.watcher_interval_seconds` (no timer is
 * longer than that, so a suspended machine cannot strand a platform).
 */
import type { Logger } from 'pino';
import type { PlatformRegistry } from './platform-registry.ts';

/** Settings of the watcher. */
export interface ReconnectWatcherOptions {
  /** Backoff steps, ms; the last repeats. */
  backoffMs: number[];
  /** Re-arms per failure episode. */
  maxRearms: number;
  /** How often to look, ms. */
  intervalMs: number;
  log: Logger;
  /** Called when the watcher gives up on a platform (its published state says so). */
  onGiveUp?: (name: string) => void;
}

/** Where a failed platform's re-arms stand, for its published state. */
export interface RearmProgress {
  /** Re-arms done in the current failure episode. */
  done: number;
  /** `gateway.max_plugin_load_rearms` */
  max: number;
  /** Epoch ms the next re-arm is due; absent once the watcher gave up. */
  nextAt?: number;
  gaveUp: boolean;
}

interface Episode {
  rearms: number;
  /** Epoch ms the next re-arm is due. */
  nextAt: number;
  /** `failedAt` of the failure this schedule was computed from. */
  failedAt: number;
  gaveUp: boolean;
}

export class ReconnectWatcher {
  private timer: NodeJS.Timeout | undefined;
  private readonly episodes = new Map<string, Episode>();
  private ticking = false;

  constructor(
    private readonly registry: PlatformRegistry,
    private readonly options: ReconnectWatcherOptions,
  ) {}

  /** Re-arms done in the current failure episode of `name`. */
  rearms(name: string): number {
    return this.episodes.get(name)?.rearms ?? 0;
  }

  /**
   * Where the re-arms of a failed platform stand: those done, the cap, when the next is due (from
   * the failure, before the watcher's first look) or that it gave up. Undefined unless `adapter_unavailable`.
   */
  progress(name: string, now = Date.now()): RearmProgress | undefined {
    const status = this.registry.status(name);
    if (status?.state !== 'adapter_unavailable' || this.registry.isGated(name)) return undefined;
    const max = this.options.maxRearms;
    const ep = this.episodes.get(name);
    const done = ep?.rearms ?? 0;
    const gaveUp = done >= max;
    if (gaveUp) return { done, max, gaveUp };
    const failedAt = status.failedAt ?? now;
    const nextAt = ep && ep.failedAt === failedAt ? ep.nextAt : failedAt + this.step(done);
    return { done, max, nextAt, gaveUp };
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tick(), this.options.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One look at every platform; re-arms what is due. Exposed for tests and `hermes status`. */
  async tick(now = Date.now()): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      for (const name of this.registry.names()) await this.check(name, now);
    } finally {
      this.ticking = false;
    }
  }

  private step(n: number): number {
    const steps = this.options.backoffMs;
    return steps[Math.min(n, steps.length - 1)]!;
  }

  private async check(name: string, now: number): Promise<void> {
    const status = this.registry.status(name);
    if (!status) return;
    if (status.state === 'ready') {
      this.episodes.delete(name);
      return;
    }
    if (status.state !== 'adapter_unavailable') return;
    const log = this.options.log.child({ platform: name });
    if (this.registry.isGated(name)) return;
    let ep = this.episodes.get(name);
    const failedAt = status.failedAt ?? now;
    if (!ep) {
      ep = { rearms: 0, nextAt: failedAt + this.step(0), failedAt, gaveUp: false };
      this.episodes.set(name, ep);
    } else if (failedAt !== ep.failedAt) {
      // the last re-arm failed again: the next one waits the next backoff step from this failure
      ep.failedAt = failedAt;
      ep.nextAt = failedAt + this.step(ep.rearms);
    }
    if (this.registry.isLoading(name)) {
      log.debug('previous plugin load still hangs; not re-arming');
      return;
    }
    if (ep.rearms >= this.options.maxRearms) {
      if (!ep.gaveUp) {
        ep.gaveUp = true;
        log.error(
          { rearms: ep.rearms, lastError: status.lastError },
          `Giving up on platform ${name}: plugin load failed after ${ep.rearms} re-arms`,
        );
        this.options.onGiveUp?.(name);
      }
      return;
    }
    if (now < ep.nextAt) return;
    ep.rearms++;
    log.warn({ attempt: ep.rearms, of: this.options.maxRearms }, `Re-arming failed platform plugin load: ${name}`);
    await this.registry.load(name);
  }
}
