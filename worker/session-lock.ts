/**
 * One turn per session across the fleet (SPEC §3): a Redis lock per session
 * whose value is the BullMQ job id running the turn.
 *
 * - Acquire succeeds when the lock is free, or when it is held by the same job
 *   id: BullMQ runs a job on one worker at a time, so a job that finds its own
 *   id is a retry after its previous worker died (stalled) and takes over.
 * - The lock expires after `ttlMs` unless renewed, so a dead worker cannot
 *   block a session longer than that.
 */
import type { Redis } from 'ioredis';
import type { Keys } from '../scheduler/keys.ts';

const ACQUIRE = `
local cur = redis.call('GET', KEYS[1])
if cur == false or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0`;

const RENEW = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`;

const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/** A held session lock; `release()` is idempotent and stops renewal. */
export interface HeldLock {
  readonly sessionId: string;
  readonly holder: string;
  release(): Promise<void>;
}

export class SessionLock {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    /** Lock time-to-live in ms; renewed every third of it while held. */
    private readonly ttlMs: number,
  ) {}

  /**
   * Try to take the session's turn lock for `holder` (a job id).
   * @returns the held lock (renewed in the background until released), or `null` when busy
   */
  async acquire(sessionId: string, holder: string): Promise<HeldLock | null> {
    const key = this.keys.turnLock(sessionId);
    const ok = await this.redis.eval(ACQUIRE, 1, key, holder, String(this.ttlMs));
    if (ok !== 1) return null;
    const timer = setInterval(() => {
      this.redis.eval(RENEW, 1, key, holder, String(this.ttlMs)).catch(() => {});
    }, Math.max(100, Math.floor(this.ttlMs / 3)));
    timer.unref();
    let released: Promise<void> | undefined;
    return {
      sessionId,
      holder,
      release: () => {
        released ??= (async () => {
          clearInterval(timer);
          await this.redis.eval(RELEASE, 1, key, holder).catch(() => {});
        })();
        return released;
      },
    };
  }

  /** Current holder (job id) or `null`. */
  async holder(sessionId: string): Promise<string | null> {
    return await this.redis.get(this.keys.turnLock(sessionId));
  }
}
