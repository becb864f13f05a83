/**
 * The rule that keeps a list order (`lex-index.ts`) whole across upgrades: an order whose size
 * differs from its record index's — the first list after an upgrade from a version without orders,
 * after `hermes admin reshard` (which drops them), or after a write by an older version during a
 * rolling upgrade — is made again from the index before a page is read. Otherwise the check costs
 * one `SCARD` and one `ZCARD` per shard, sent together.
 *
 * The rebuild reads every record of the shard once, in batches of 1000. A write meanwhile may leave a
 * member the rebuild read before it; the sizes (or the page's own check of the record) catch it next time.
 */
import type { RedisClient } from './redis/connection-factory.ts';

/** One order and the index it mirrors, on one shard. */
export interface OrderOfIndex {
  /** The record index (a set). */
  index: string;
  /** The list order (a sorted set, score 0). */
  order: string;
  /** The order's members for a batch of index members (records gone meanwhile left out). */
  membersOf(indexMembers: string[]): Promise<string[]>;
}

/** Errors of a write Redis refused while it answers reads (as `gateway/http/write-refusal.ts` reads them). */
const REFUSED_WRITE = /^(OOM|READONLY|NOREPLICAS|MISCONF|NOPERM)\b/;

/** Rebuilds in progress in this process, by order key: a second list waits for the first's. */
const rebuilding = new Map<string, Promise<void>>();

/** Make `o.order` hold what `o.index` lists when their sizes differ. */
export async function ensureOrder(redis: RedisClient, o: OrderOfIndex): Promise<void> {
  // Two reads, not a MULTI: Redis out of memory refuses every command queued in a transaction, reads too.
  const [indexSize, orderSize] = await Promise.all([redis.scard(o.index), redis.zcard(o.order)]);
  if (indexSize === orderSize) return;
  const running = rebuilding.get(o.order);
  if (running) return await running;
  // Made aside and renamed over the order in one step: a rebuild Redis refuses half-way (out of memory, a
  // read-only replica) leaves the order as it was, and the list is read from it — a read still answers.
  const aside = `${o.order}:rebuild`;
  const rebuild = (async () => {
    const all = await redis.smembers(o.index);
    await redis.del(aside);
    let added = 0;
    for (let i = 0; i < all.length; i += 1000) {
      const members = await o.membersOf(all.slice(i, i + 1000));
      if (members.length > 0) added += await redis.zadd(aside, ...members.flatMap((m) => [0, m]));
    }
    if (added > 0) await redis.rename(aside, o.order);
    else await redis.del(o.order);
  })()
    .catch(async (err: unknown) => {
      await redis.del(aside).catch(() => undefined);
      if (!REFUSED_WRITE.test((err as Error).message)) throw err;
    })
    .finally(() => rebuilding.delete(o.order));
  rebuilding.set(o.order, rebuild);
  await rebuild;
}
