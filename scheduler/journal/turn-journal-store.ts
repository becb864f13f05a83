/**
 * Turn journals in Redis (docs/RELIABILITY.md, "A turn resumes from its journal"): one list per
 * occurrence (`Keys.turnJournal`), on the shard of the occurrence's session, so the commit script
 * deletes it in the commit's own atomic step (`commit-turn-7.lua`, `commit-cron-run-8.lua`).
 *
 * Bounded: every write sets the list to expire after the occurrence window
 * (`worker.occurrence_window_seconds`), so the journal of an occurrence that is never committed goes
 * when the occurrence would be forgotten anyway.
 */
import type { RedisClient } from '../store/redis/connection-factory.ts';
import type { Keys } from '../store/keys.ts';
import { decodeJournalEntry, type JournalEntry } from './journal-entry.ts';

/** Reads and appends the journals of turns. */
export class TurnJournalStore {
  /** @param ttlMs - how long a journal lives after its last write, ms (the occurrence window) */
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly ttlMs: number,
  ) {}

  /** The key of an occurrence's journal (its session's shard; a cron run's session is `cron:<id>`). */
  key(sessionId: string, occurrenceId: string): string {
    return this.keys.turnJournal(sessionId, occurrenceId);
  }

  /** The journal's entries in the order they were written; entries that cannot be read are left out. */
  async read(sessionId: string, occurrenceId: string): Promise<JournalEntry[]> {
    const raw = await this.redis.lrange(this.key(sessionId, occurrenceId), 0, -1);
    return raw.flatMap((r) => decodeJournalEntry(r) ?? []);
  }

  /**
   * Append one entry and renew the journal's expiry, in one transaction; resolves once Redis has
   * both (the caller starts the next step only then).
   * @throws the connection's error when Redis did not take the write
   */
  async append(sessionId: string, occurrenceId: string, entry: JournalEntry): Promise<void> {
    const key = this.key(sessionId, occurrenceId);
    const res = await this.redis.multi().rpush(key, JSON.stringify(entry)).pexpire(key, this.ttlMs).exec();
    const failed = res?.find(([err]) => err);
    if (!res || failed) throw failed?.[0] ?? new Error('the journal write was discarded');
  }
}
