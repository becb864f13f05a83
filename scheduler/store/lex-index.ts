/**
 * Lists that page: a record kind's order is a sorted set per shard whose scores are all 0, so Redis
 * keeps its members in byte order and `ZRANGE … BYLEX LIMIT` reads a page from any member on, in
 * O(log N + page). The member is the record's sort key and its id (the record kind spells it:
 * `Keys.cronJobOrder`, `scheduleOrder`, `sessionOrder`); it is added and removed in the same script
 * that writes or deletes the record, on the record's shard, so an index never lags its records.
 *
 * Several shards (`redis.shards`, Redis Cluster) each keep their own index in their own slot; a page
 * asks each for the page's length from the same place and merges (byte order), so no read crosses a slot.
 */
import type { RedisClient } from './redis/connection-factory.ts';

/** Where a range starts and what it keeps. */
export interface LexRange {
  /** Members after this one (exclusive): where the last page ended. */
  after?: string | undefined;
  /** Only members starting with these bytes. */
  prefix?: string | undefined;
}

/**
 * The first `count` members of the union of `indexes` within `range`, in byte order.
 * One `ZRANGE BYLEX LIMIT 0 count` per index.
 */
export async function lexRange(redis: RedisClient, indexes: readonly string[], range: LexRange, count: number): Promise<string[]> {
  const prefix = range.prefix ?? '';
  const after = range.after;
  // Start after the cursor, or at the prefix when the cursor lies before it.
  const min =
    after !== undefined && compareBytes(after, prefix) >= 0 ? Buffer.from(`(${after}`) : Buffer.from(prefix === '' ? '-' : `[${prefix}`);
  // Every member that starts with `prefix` sorts below prefix + 0xff (no UTF-8 text holds that byte).
  const max = prefix === '' ? Buffer.from('+') : Buffer.concat([Buffer.from(`(${prefix}`), Buffer.from([0xff])]);
  const pages = await Promise.all(indexes.map((key) => redis.zrangebylex(key, min, max, 'LIMIT', 0, count)));
  if (indexes.length === 1) return pages[0]!;
  return pages.flat().sort(compareBytes).slice(0, count);
}

/** Byte order of the UTF-8 forms (Redis's order of members), which JavaScript's string order is not past U+FFFF. */
export function compareBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/**
 * A name as list orders and searches it: ASCII letters in lower case, every other byte as it is —
 * the rule Redis's Lua `string.lower` applies, so a script that derives a member from a stored
 * record (`put-cron-job-3.lua`) spells it the same.
 */
export function foldName(name: string): string {
  return name.replace(/[A-Z]+/g, (s) => s.toLowerCase());
}
