/**
 * One poller per bot token across all gateway instances (docs/DESIGN.md §8): a Redis
 * lease whose value is the holder's instance id, with a time-to-live renewed
 * every third of it. A gateway polls Telegram only while it holds the lease;
 * the others stand by and take over once it expires (the holder died) or was
 * released (the holder stopped). Renewal failure (the lease was lost, e.g.
 * after a long pause of this process) is reported through `onLost`, and the
 * poller stops its in-flight getUpdates at once.
 *
 * Restart policy: every process start is a new holder (a fresh instance id),
 * so a gateway restarted after a crash waits for its old lease like any
 * standby would. The lease is therefore short (`gateway.poll_lease_ttl_seconds`,
 * 4 s) and a standby retries exactly when the current lease runs out (its
 * PTTL), not on a fixed beat: polling resumes at most one TTL after the holder
 * died. A stable identity that reclaims "its own" lease at start was not
 * chosen: it cannot tell its own dead predecessor from a second live gateway
 * configured the same way, and two of those would poll at once.
 */
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import type { Logger } from 'pino';
import { acquireOwned, releaseOwned, renewOwned } from '../../scheduler/store/redis/owned-key.ts';

/** The words of a lease's log lines: its name, what holding it means, what losing it does. */
export interface LeaseWording {
  lease: string;
  held: string;
  lost: string;
}

const TELEGRAM_WORDING: LeaseWording = { lease: 'Telegram poll lease', held: 'this gateway polls the bot', lost: 'polling stops' };

export class PollLease {
  private timer: NodeJS.Timeout | undefined;
  private heldFlag = false;
  /** Called once each time a held lease is lost (renewal found another holder or none). */
  onLost: (() => void) | undefined;

  /**
   * @param key - `Keys.telegramPollLease(botId)`
   * @param holder - this gateway's instance id
   * @param ttlMs - lease time-to-live in milliseconds (`gateway.poll_lease_ttl_seconds`)
   * @param wording - the words of its log lines (Discord's gateway connection uses the lease too)
   */
  constructor(
    private readonly redis: RedisClient,
    private readonly key: string,
    readonly holder: string,
    private readonly ttlMs: number,
    private readonly log: Logger,
    private readonly wording: LeaseWording = TELEGRAM_WORDING,
  ) {}

  /** Whether this instance held the lease at its last acquire or renewal. */
  get held(): boolean {
    return this.heldFlag;
  }

  /** Interval at which a standby instance should try again, ms. */
  get retryMs(): number {
    return Math.max(50, Math.floor(this.ttlMs / 3));
  }

  /**
   * Take the lease if it is free (or already ours) and keep renewing it.
   * @returns whether this instance holds it now
   */
  async acquire(): Promise<boolean> {
    const ok = await acquireOwned(this.redis, this.key, this.holder, this.ttlMs);
    if (ok && !this.heldFlag) {
      this.heldFlag = true;
      this.log.info({ holder: this.holder }, `${this.wording.lease} acquired: ${this.wording.held}`);
      this.startRenewal();
    }
    if (!ok) this.heldFlag = false;
    return ok;
  }

  /**
   * How long a standby should wait before trying again, ms: until the current
   * lease runs out (plus a margin), at least 20 ms, at most one `retryMs`.
   */
  async standbyWaitMs(): Promise<number> {
    const pttl = await this.redis.pttl(this.key);
    if (pttl <= 0) return 20;
    return Math.min(this.retryMs, pttl + 20);
  }

  /** The current holder's instance id, or `null`. */
  async currentHolder(): Promise<string | null> {
    return await this.redis.get(this.key);
  }

  /** Stop renewing and delete the lease if it is ours, so a standby takes over at once. Idempotent. */
  async release(): Promise<void> {
    this.stopRenewal();
    if (!this.heldFlag) return;
    this.heldFlag = false;
    await releaseOwned(this.redis, this.key, this.holder).catch(() => {});
  }

  private startRenewal(): void {
    this.stopRenewal();
    this.timer = setInterval(() => {
      renewOwned(this.redis, this.key, this.holder, this.ttlMs).then(
        (ok) => {
          if (!ok && this.heldFlag) {
            this.heldFlag = false;
            this.stopRenewal();
            this.log.warn({ holder: this.holder }, `${this.wording.lease} lost; ${this.wording.lost}`);
            this.onLost?.();
          }
        },
        (err: Error) => this.log.warn({ err: err.message }, `${this.wording.lease} renewal failed`),
      );
    }, this.retryMs);
    this.timer.unref();
  }

  private stopRenewal(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
