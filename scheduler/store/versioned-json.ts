/**
 * Versioned JSON records in Redis: a record is one JSON string with a
 * `version` field, written only over the version it was read at
 * (compare-and-set in one Lua script), so concurrent writers never silently
 * overwrite each other. Used for loop/heartbeat and goal state.
 */
import type { RedisClient } from './redis/connection-factory.ts';
import { StoreUnavailableError } from '../errors/store-unavailable-error.ts';
import { luaScript, runLuaScript } from './redis/lua-script.ts';

/** Compare-and-set on the record's `version` (`put-versioned-2.lua`). */
const PUT_VERSIONED = luaScript('put-versioned-2.lua');

/** What a write expects to find: a version number, no record, or anything. */
export type ExpectedVersion = number | 'absent' | 'any';

/**
 * Write `record` at `key` (and add `member` to the index set `indexKey`) if the
 * stored version matches `expected`. The stored copy gets `version + 1`.
 * `target.encode` gives the stored text (default `JSON.stringify`); it must keep
 * `version` as a top-level JSON field, which the script compares.
 * @returns the stored record, or `null` when the check failed
 * @throws StoreUnavailableError when Redis refused the write (read-only replica, OOM, down)
 */
export async function putVersioned<T extends { version: number }>(
  redis: RedisClient,
  target: { key: string; indexKey: string; member: string; what: string; encode?: (record: T) => string },
  record: T,
  expected: ExpectedVersion,
): Promise<T | null> {
  const stored = { ...record, version: (typeof expected === 'number' ? expected : record.version) + 1 };
  try {
    const ok = await runLuaScript(
      redis,
      PUT_VERSIONED,
      [target.key, target.indexKey],
      [String(expected), (target.encode ?? JSON.stringify)(stored), target.member],
    );
    return ok === 1 ? stored : null;
  } catch (err) {
    throw new StoreUnavailableError(`Redis did not take the ${target.what}: ${(err as Error).message}`, { cause: err });
  }
}
