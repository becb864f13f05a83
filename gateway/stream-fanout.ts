/**
 * One shared blocking reader per gateway process: every session event stream
 * (`/api/sessions/:id/events`), `/v1` run event stream and `/v1` caller
 * waiting for its run subscribes here, and one `XREAD BLOCK` over all their
 * stream keys fans the entries out. Redis connections therefore do not grow
 * with the number of open streams (before: one connection per stream).
 *
 * How it reads:
 *   - per stream key the read starts after the smallest cursor of its
 *     subscribers; each subscriber gets only the entries after its own cursor,
 *     so subscribers that started at different ids (`Last-Event-ID`) share one read;
 *   - a new key joins at once: the reader's `XREAD` also blocks on a small
 *     wake stream of this gateway instance, which `subscribe` writes to when
 *     the key is not in the read in flight;
 *   - one reader per shard of the key space (`redis.shards`, default 1): a
 *     shard's keys share one hash tag, so its multi-key `XREAD` is valid on a
 *     Redis Cluster; a shard's reader (and its connection) starts with its
 *     first subscription, so connections are at most 1 + shards, whatever
 *     the number of streams;
 *   - on a Redis error the reader waits (`RETRY_MS`) and reads again from the
 *     same cursors: subscribers miss nothing, they only wait.
 *
 * The number of subscriptions is capped (`api_server.max_streams`): `subscribe`
 * throws `StreamLimitError` beyond it (the HTTP layer answers 429).
 */
import type { Logger } from 'pino';
import type { RedisClient } from '../scheduler/store/redis/connection-factory.ts';
import { parseStreamEntry, type SessionEvent } from '../scheduler/session/session-store.ts';

/** An entry of a stream, parsed (`type` and JSON `data`). */
export type StreamEntry = SessionEvent;

/** Thrown by `subscribe` when `maxSubscriptions` are open. */
export class StreamLimitError extends Error {
  readonly code = 'STREAM_LIMIT';
  constructor(readonly limit: number) {
    super(`This gateway already serves ${limit} open streams and waiting callers (api_server.max_streams).`);
  }
}

/** One subscription; `close()` is idempotent. */
export interface StreamSubscription {
  close(): void;
}

/** Settings of the readers. */
export interface StreamFanoutOptions {
  /** The shards: each key prefix (`Keys.prefix` of a shard) and that shard's wake stream key (`Keys.gatewayWake`). */
  shards: ReadonlyArray<{ prefix: string; wakeKey: string }>;
  /** Opens a shard reader's blocking connection (used for nothing else). */
  openBlocking: () => RedisClient;
  /** A non-blocking connection, for the wake writes. */
  commands: RedisClient;
  /** Open subscriptions allowed at once, over all shards (`api_server.max_streams`). */
  maxSubscriptions: number;
  log: Logger;
  /** Longest single block, ms (the reader re-reads after it). @defaultValue 5000 */
  blockMs?: number;
  /** Entries read per key and call. @defaultValue 200 */
  count?: number;
}

/** Wait after a failed read before the next, ms. */
export const RETRY_MS = 500;

interface Subscriber {
  key: string;
  after: string;
  onEntries: (entries: StreamEntry[]) => void;
}

/** True for a stream id this reader can start after: `0`, `<ms>` or `<ms>-<seq>`. */
export function isStreamId(id: string): boolean {
  return /^\d{1,20}(-\d{1,20})?$/.test(id);
}

/** `a < b` for stream ids (`<ms>-<seq>`, or `0`). */
function idLess(a: string, b: string): boolean {
  const [am = 0, as = 0] = a.split('-').map(Number);
  const [bm = 0, bs = 0] = b.split('-').map(Number);
  return am < bm || (am === bm && as < bs);
}

/** The shared readers (one per shard); stop with `close()`. */
export class StreamFanout {
  private readonly readers = new Map<string, ShardReader>();
  private size = 0;
  private closed = false;

  constructor(private readonly options: StreamFanoutOptions) {}

  /** Open subscriptions now. */
  get subscriptions(): number {
    return this.size;
  }

  /** Readers running now (each holds one blocking connection). */
  get readersRunning(): number {
    return this.readers.size;
  }

  /** @throws StreamLimitError when no subscription can be opened now (checked before work is queued) */
  assertCapacity(): void {
    if (this.size >= this.options.maxSubscriptions) throw new StreamLimitError(this.options.maxSubscriptions);
  }

  /**
   * Receive the entries of `key` after `after` (`0` = from the start), in order, until `close()`.
   * @param onEntries - called with each batch (never empty); must not throw
   * @throws StreamLimitError when `maxSubscriptions` are open; Error for a key of no known shard
   */
  subscribe(key: string, after: string, onEntries: (entries: StreamEntry[]) => void): StreamSubscription {
    if (this.closed) throw new Error('the stream reader is closed');
    // A malformed id would make the shared XREAD fail for every stream of the shard.
    if (!isStreamId(after)) throw new Error(`not a stream id: ${after}`);
    this.assertCapacity();
    const shard = this.options.shards.find((s) => key.startsWith(`${s.prefix}:`));
    if (!shard) throw new Error(`no shard holds stream key ${key}`);
    let reader = this.readers.get(shard.prefix);
    if (!reader) {
      reader = new ShardReader({ ...this.options, blocking: this.options.openBlocking(), wakeKey: shard.wakeKey });
      this.readers.set(shard.prefix, reader);
      reader.start();
    }
    const sub = reader.subscribe(key, after, onEntries);
    this.size++;
    let open = true;
    return {
      close: () => {
        if (!open) return;
        open = false;
        sub.close();
        this.size--;
      },
    };
  }

  /** Stop every reader; resolves when their loops have ended. Subscribers are not called any more. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.readers.values()].map((r) => r.close()));
  }
}

/** The reader of one shard: one blocking connection, one `XREAD BLOCK` over its keys at a time. */
class ShardReader {
  private readonly byKey = new Map<string, Set<Subscriber>>();
  private closed = false;
  private loop: Promise<void> | undefined;
  /** Keys of the read in flight (each with the id it reads after), and whether a wake was already written for it. */
  private reading = new Map<string, string>();
  private wakeSent = false;
  private wakeCursor = '0';
  private idle: (() => void) | undefined;
  private readonly blockMs: number;
  private readonly count: number;

  constructor(
    private readonly options: Pick<StreamFanoutOptions, 'commands' | 'log' | 'blockMs' | 'count'> & {
      blocking: RedisClient;
      wakeKey: string;
    },
  ) {
    this.blockMs = options.blockMs ?? 5_000;
    this.count = options.count ?? 200;
    options.blocking.on('error', () => {});
  }

  /** Start the reader loop (idempotent). */
  start(): void {
    this.loop ??= this.run();
  }

  /** Add a subscriber of `key` (see `StreamFanout.subscribe`). */
  subscribe(key: string, after: string, onEntries: (entries: StreamEntry[]) => void): StreamSubscription {
    const sub: Subscriber = { key, after, onEntries };
    let set = this.byKey.get(key);
    if (!set) this.byKey.set(key, (set = new Set()));
    set.add(sub);
    this.idle?.();
    // The read in flight must start over when it misses the key, or reads it after entries the
    // new subscriber has not seen (a caller attaching to a run that already ended).
    const readAfter = this.reading.get(key);
    if ((readAfter === undefined || idLess(after, readAfter)) && this.reading.size > 0 && !this.wakeSent) {
      this.wakeSent = true;
      this.options.commands
        .xadd(this.options.wakeKey, 'MAXLEN', '~', '10', '*', 'w', '1')
        .then(() => this.options.commands.pexpire(this.options.wakeKey, 60_000))
        .catch(() => {}); // without the wake the key joins at the next read (≤ blockMs)
    }
    let open = true;
    return {
      close: () => {
        if (!open) return;
        open = false;
        set.delete(sub);
        if (set.size === 0 && this.byKey.get(key) === set) this.byKey.delete(key);
      },
    };
  }

  /** Stop reading; resolves when the loop has ended. */
  async close(): Promise<void> {
    this.closed = true;
    this.idle?.();
    this.options.blocking.disconnect();
    await this.loop;
  }

  private async run(): Promise<void> {
    const { blocking, wakeKey, log } = this.options;
    while (!this.closed) {
      if (this.byKey.size === 0) {
        await new Promise<void>((r) => (this.idle = r));
        this.idle = undefined;
        continue;
      }
      const keys = [...this.byKey.keys()];
      const ids = keys.map((k) => {
        let min: string | undefined;
        for (const s of this.byKey.get(k)!) if (min === undefined || idLess(s.after, min)) min = s.after;
        return min ?? '0';
      });
      this.reading = new Map(keys.map((k, i) => [k, ids[i]!]));
      this.wakeSent = false;
      let res: Array<[string, Array<[string, string[]]>]> | null;
      try {
        res = await blocking.xread(
          'COUNT',
          String(this.count),
          'BLOCK',
          String(this.blockMs),
          'STREAMS',
          ...keys,
          wakeKey,
          ...ids,
          this.wakeCursor,
        );
      } catch (err) {
        if (this.closed) break;
        log.debug({ err: (err as Error).message }, 'shared stream read failed; retrying');
        await new Promise((r) => setTimeout(r, RETRY_MS).unref());
        continue;
      } finally {
        this.reading = new Map();
      }
      if (!res || this.closed) continue;
      for (const [key, raw] of res) {
        if (raw.length === 0) continue;
        if (key === wakeKey) {
          this.wakeCursor = raw[raw.length - 1]![0];
          continue;
        }
        const entries = raw.map(([id, fields]) => parseStreamEntry(id, fields));
        for (const sub of [...(this.byKey.get(key) ?? [])]) {
          const fresh = entries.filter((e) => idLess(sub.after, e.id));
          if (fresh.length === 0) continue;
          sub.after = fresh[fresh.length - 1]!.id;
          try {
            sub.onEntries(fresh);
          } catch (err) {
            log.warn({ err: (err as Error).message }, 'stream subscriber failed');
          }
        }
      }
    }
  }
}
