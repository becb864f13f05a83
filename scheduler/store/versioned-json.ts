/**
 * Versioned JSON records in Redis: a record is one JSON string with a
 * `version` field, written only over the version it was read at
 * (compare-and-set in one Lua script), so concurrent writers never silently
 * overwrite each other. Used for loop/heartbeat and goal state.
 */
import type { RedisClient } from './redis/connection-factory.ts';
import { StoreUnavailableError } from '../errors/store-unavailable-error.ts';
import { luaScript, runLuaScript } from './redis/lua-script.ts';

/** Compare-and-set on the record's `version` (`put-versioned-4.lua`). */
const PUT_VERSIONED = luaScript('put-versioned-4.lua');

/** A list order (`lex-index.ts`) a record belongs to: its sorted set, on the record's slot, and its member there. */
export interface OrderEntry {
  key: string;
  member: string;
}

/** What a write expects to find: a version number, no record, or anything. */
export type ExpectedVersion = number | 'absent' | 'any';

/**
 * Write `record` at `key` (and add `member` to the index set `indexKey`, and each of
 * `orders`, at most two, to its list order) if the stored version matches `expected`. The stored copy gets `version + 1`.
 * `target.encode` gives the stored text (default `JSON.stringify`); it must keep
 * `version` as a top-level JSON field, which the script compares.
 * @returns the stored record, or `null` when the check failed
 * @throws StoreUnavailableError when Redis refused the write (read-only replica, OOM, down)
 */
export async function putVersioned<T extends { version: number }>(
  redis: RedisClient,
  target: {
    key: string;
    indexKey: string;
    member: string;
    what: string;
    encode?: (record: T) => string;
    orders?: readonly OrderEntry[];
  },
  record: T,
  expected: ExpectedVersion,
): Promise<T | null> {
  const stored = { ...record, version: (typeof expected === 'number' ? expected : record.version) + 1 };
  const [a, b] = target.orders ?? [];
  try {
    const ok = await runLuaScript(
      redis,
      PUT_VERSIONED,
      // An absent order passes the index set as its key (one slot), with no member: the script leaves it.
      [target.key, target.indexKey, a?.key ?? target.indexKey, b?.key ?? target.indexKey],
      [String(expected), (target.encode ?? JSON.stringify)(stored), target.member, a?.member ?? '', b?.member ?? ''],
    );
    return ok === 1 ? stored : null;
  } catch (err) {
    throw new StoreUnavailableError(`Redis did not take the ${target.what}: ${(err as Error).message}`, { cause: err });
  }
}
