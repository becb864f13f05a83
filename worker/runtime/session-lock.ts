/**
 * One turn per session across the fleet (docs/DESIGN.md §3): a Redis lock per session
 * whose value is the BullMQ job id running the turn.
 *
 * - Acquire succeeds when the lock is free, or when it is held by the same job
 *   id: BullMQ runs a job on one worker at a time, so a job that finds its own
 *   id is a retry after its previous worker died (stalled) and takes over.
 * - The lock expires after `ttlMs` unless renewed, so a dead worker cannot
 *   block a session longer than that.
 */
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import type { Keys } from '../../scheduler/store/keys.ts';
import { acquireOwned, releaseOwned, renewOwned } from '../../scheduler/store/redis/owned-key.ts';

/** A held session lock; `release()` is idempotent and stops renewal. */
export interface HeldLock {
  readonly sessionId: string;
  readonly holder: string;
  release(): Promise<void>;
  /**
   * The lock was released in Redis by another atomic step (a turn commit that
   * frees it when still this holder's): stop renewing; `release()` is then a no-op.
   */
  releasedElsewhere(): void;
}

/** The fleet-wide turn lock of sessions (see the rules above). */
export class SessionLock {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    /** Lock time-to-live in ms; renewed every third of it while held. */
    readonly ttlMs: number,
  ) {}

  /**
   * Try to take the session's turn lock for `holder` (a job id).
   * @returns the held lock (renewed in the background until released), or `null` when busy
   */
  async acquire(sessionId: string, holder: string): Promise<HeldLock | null> {
    if (!(await acquireOwned(this.redis, this.keys.turnLock(sessionId), holder, this.ttlMs))) return null;
    return this.adopt(sessionId, holder);
  }

  /**
   * The lock `holder` took by another atomic step (the tick claim takes it in
   * the same script), renewed in the background until released.
   */
  adopt(sessionId: string, holder: string): HeldLock {
    const key = this.keys.turnLock(sessionId);
    const timer = setInterval(
      () => {
        renewOwned(this.redis, key, holder, this.ttlMs).catch(() => {});
      },
      Math.max(100, Math.floor(this.ttlMs / 3)),
    );
    timer.unref();
    let released: Promise<void> | undefined;
    return {
      sessionId,
      holder,
      release: () => {
        released ??= (async () => {
          clearInterval(timer);
          await releaseOwned(this.redis, key, holder).catch(() => {});
        })();
        return released;
      },
      releasedElsewhere: () => {
        clearInterval(timer);
        released ??= Promise.resolve();
      },
    };
  }

  /** Current holder (job id) or `null`. */
  async holder(sessionId: string): Promise<string | null> {
    return await this.redis.get(this.keys.turnLock(sessionId));
  }
}
