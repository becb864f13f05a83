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
import { holdWritesThisTurn, type RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import type { Keys } from '../../scheduler/store/keys.ts';
import { acquireOwned, releaseOwned, renewOwned } from '../../scheduler/store/redis/owned-key.ts';
import { callAt } from './sleep-until.ts';

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

/** A held lock's renewal: its key and holder, and when it is renewed next (epoch ms). */
interface Renewal {
  key: string;
  holder: string;
  due: number;
}

/** The fleet-wide turn lock of sessions (see the rules above). */
export class SessionLock {
  /**
   * The held locks' renewals, by when each is due (a renewed one goes to the end: the map stays in that order).
   * One timer for them all: the locks of the occurrences of one instant, taken together, are renewed together,
   * their scripts leaving in one write (`holdWritesThisTurn`), instead of one timer and one write each.
   */
  private readonly renewals = new Map<object, Renewal>();
  private timer: NodeJS.Timeout | undefined;
  /** When the timer fires (epoch ms). */
  private timerAt = Infinity;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    /** Lock time-to-live in ms; renewed every third of it while held. */
    readonly ttlMs: number,
  ) {}

  /** Every third of the time-to-live. */
  private get periodMs(): number {
    return Math.max(100, Math.floor(this.ttlMs / 3));
  }

  /**
   * Try to take the session's turn lock for `holder` (a job id).
   * @param heldFrom - epoch ms: a lock taken ahead of a turn due then (a cron claim ahead,
   *   `worker/cron/cron-claim-ahead.ts`) is set to last until `heldFrom` plus the time-to-live, and
   *   renewed from then on; a worker lost meanwhile leaves it held that long (the policy of a held tick's
   *   lock, docs/RELIABILITY.md). Omitted or past: from now.
   * @returns the held lock (renewed in the background until released), or `null` when busy
   */
  async acquire(sessionId: string, holder: string, heldFrom?: number): Promise<HeldLock | null> {
    const from = Math.max(Date.now(), heldFrom ?? 0);
    if (!(await acquireOwned(this.redis, this.keys.turnLock(sessionId), holder, this.ttlFrom(from)))) return null;
    return this.adopt(sessionId, holder, from);
  }

  /**
   * The time-to-live, ms, of a lock taken now to be held from `heldFrom` (`acquire`; a cron claim ahead takes it in
   * its script and adopts it with the same `heldFrom`): until then, plus the time-to-live.
   */
  ttlFrom(heldFrom: number): number {
    return Math.max(0, heldFrom - Date.now()) + this.ttlMs;
  }

  /**
   * The lock `holder` took by another atomic step (the tick claim, and a cron claim ahead, take it in
   * the same script), renewed in the background until released: every third of
   * the time-to-live from now (from `heldFrom` when later: `acquire`), as long as it is held.
   */
  adopt(sessionId: string, holder: string, heldFrom = Date.now()): HeldLock {
    const key = this.keys.turnLock(sessionId);
    const handle = {};
    // Kept in order of when each is due (`renewDue`): one set to last until later joins them once that time comes.
    const renew = () => {
      this.renewals.set(handle, { key, holder, due: Date.now() + this.periodMs });
      this.armFor(Date.now() + this.periodMs);
    };
    let deferred: (() => void) | undefined;
    if (heldFrom > Date.now()) deferred = callAt(heldFrom, renew);
    else renew();
    let released: Promise<void> | undefined;
    return {
      sessionId,
      holder,
      release: () => {
        released ??= (async () => {
          deferred?.();
          this.renewals.delete(handle);
          // The locks of occurrences that end together are released in one write.
          holdWritesThisTurn(this.redis);
          await releaseOwned(this.redis, key, holder).catch(() => {});
        })();
        return released;
      },
      releasedElsewhere: () => {
        deferred?.();
        this.renewals.delete(handle);
        released ??= Promise.resolve();
      },
    };
  }

  /** Current holder (job id) or `null`. */
  async holder(sessionId: string): Promise<string | null> {
    return await this.redis.get(this.keys.turnLock(sessionId));
  }

  /** Have the timer fire by `at`. */
  private armFor(at: number): void {
    if (this.timer && this.timerAt <= at) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.renewDue(), Math.max(0, at - Date.now()));
    this.timer.unref();
  }

  /**
   * Renew every lock due now, and those due within a quarter period (taken about together: renewed a little early,
   * never late), in one write; then wait for the next one due.
   */
  private renewDue(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = Date.now();
    const period = this.periodMs;
    const until = now + Math.floor(period / 4);
    const due: Renewal[] = [];
    for (const [handle, r] of this.renewals) {
      if (r.due > until) break;
      due.push(r);
      // To the end of the map, due a period from now (the loop ends when it comes to it again).
      r.due = now + period;
      this.renewals.delete(handle);
      this.renewals.set(handle, r);
    }
    if (due.length > 0) holdWritesThisTurn(this.redis);
    for (const r of due) renewOwned(this.redis, r.key, r.holder, this.ttlMs).catch(() => {});
    const next = this.renewals.values().next();
    if (!next.done) this.armFor(next.value.due);
  }
}
