/**
 * A key owned by one holder with a time-to-live: take it when free (or when
 * already ours), extend it only while ours, delete it only while ours. The
 * building block of the session turn lock and the Telegram poll lease.
 * Scripts: `scripts/{acquire,renew,release}-owned-1.lua`.
 */
import type { RedisClient } from './connection-factory.ts';
import { luaScript, runLuaScript } from './lua-script.ts';

const ACQUIRE = luaScript('acquire-owned-1.lua');
const RENEW = luaScript('renew-owned-1.lua');
const RELEASE = luaScript('release-owned-1.lua');

/** Take `key` for `holder` for `ttlMs` if it is free or already held by `holder`. @returns true when held */
export async function acquireOwned(redis: RedisClient, key: string, holder: string, ttlMs: number): Promise<boolean> {
  return (await runLuaScript(redis, ACQUIRE, [key], [holder, ttlMs])) === 1;
}

/** Extend `key` to `ttlMs` while `holder` holds it. @returns false when it was lost */
export async function renewOwned(redis: RedisClient, key: string, holder: string, ttlMs: number): Promise<boolean> {
  return (await runLuaScript(redis, RENEW, [key], [holder, ttlMs])) === 1;
}

/** Delete `key` if `holder` holds it. @returns true when it was deleted */
export async function releaseOwned(redis: RedisClient, key: string, holder: string): Promise<boolean> {
  return (await runLuaScript(redis, RELEASE, [key], [holder])) === 1;
}
