/**
 * The Discord gateway session, kept so a dropped connection resumes it and
 * Discord replays what was sent meanwhile (docs/GATEWAY.md "Discord").
 *
 * Resume policy: the sequence a RESUME (and every heartbeat) names is the
 * sequence of the last event *handled* — stored in Redis or deliberately
 * ignored — never merely received. `@discordjs/ws` moves its own sequence on
 * receipt, before a handler ran; this store keeps that number apart and answers
 * the library with the handled one, so Discord replays every event that was
 * received but not yet stored. Replays of events already stored are harmless:
 * inbox jobs are keyed by the message id (`dc-<id>`), so they are relayed once.
 *
 * The session (id, resume URL, handled sequence) is also written to Redis
 * (`Keys.discordGatewaySession`), so the next holder of the connection lease —
 * this gateway after a restart, or a standby after this one stopped or died —
 * resumes it instead of identifying anew, and is replayed what no gateway stored.
 */
import type { Logger } from 'pino';
import type { SessionInfo } from '@discordjs/ws';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';

/** How long a stored session is kept, seconds. Discord lets a session be resumed for a few minutes; an expired one is refused and the library identifies again. */
export const SESSION_TTL_SECONDS = 3600;

export class DiscordSessionStore {
  private session: SessionInfo | null = null;
  /** Sequence of the last handled event of `session`. */
  private handled = 0;
  /** While handing the connection over (stop, lease lost): the library's "forget the session" is ignored, so the next holder resumes. */
  private keep = false;

  constructor(
    private readonly redis: RedisClient,
    /** `Keys.discordGatewaySession(botId)` */
    private readonly key: string,
    private readonly log: Logger,
  ) {}

  /** Read the session another holder (or this process before a restart) left in Redis. */
  async load(): Promise<void> {
    this.keep = false;
    const raw = await this.redis.get(this.key);
    if (!raw) {
      this.session = null;
      return;
    }
    try {
      const s = JSON.parse(raw) as SessionInfo;
      this.session = s;
      this.handled = s.sequence;
      this.log.info({ sequence: s.sequence }, 'Discord gateway session found: resuming it');
    } catch {
      this.session = null;
    }
  }

  /** The session as the library should use it: with the handled sequence. Internal: the library's `retrieveSessionInfo`. */
  retrieve(): SessionInfo | null {
    return this.session ? { ...this.session, sequence: this.handled } : null;
  }

  /**
   * Internal: the library's `updateSessionInfo` (a new session on READY, a received sequence, or `null` to forget).
   * Never rejects: the library neither awaits nor catches it (a socket's close calls it, as the gateway stops and
   * its Redis connection closes). A write Redis refuses is logged, and the next holder identifies anew instead of
   * resuming; this holder goes on with the session as the library gave it.
   */
  async update(info: SessionInfo | null): Promise<void> {
    try {
      if (info === null) {
        if (this.keep) return;
        this.session = null;
        await this.redis.del(this.key);
        return;
      }
      const fresh = this.session?.sessionId !== info.sessionId;
      this.session = { ...info };
      if (fresh) {
        // READY: nothing of the new session was handled before its own sequence.
        this.handled = info.sequence;
        await this.persist();
      }
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'Discord gateway session not saved in Redis: the next holder identifies anew');
    }
  }

  /** An event of sequence `seq` was handled (stored or ignored): a resume from here on does not replay it. */
  async confirm(seq: number | null | undefined): Promise<void> {
    if (typeof seq !== 'number' || !this.session || seq <= this.handled) return;
    this.handled = seq;
    await this.persist();
  }

  /** Keep the session for the next holder when the library is told to close (handover). */
  keepForHandover(): void {
    this.keep = true;
  }

  private async persist(): Promise<void> {
    if (!this.session) return;
    await this.redis.set(this.key, JSON.stringify({ ...this.session, sequence: this.handled }), 'EX', SESSION_TTL_SECONDS);
  }
}
