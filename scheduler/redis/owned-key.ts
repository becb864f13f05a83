/**
 * A key owned by one holder with a time-to-live: take it when free (or when
 * already ours), extend it only while ours, delete it only while ours. The
 * building block of the session turn lock and the Telegram poll lease.
 */
import type { RedisClient } from './connection-factory.ts';

const ACQUIRE = `
local cur = redis.call('GET', KEYS[1])
if cur == false or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0`;

const RENEW = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`;

const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/** Take `key` for `holder` for `ttlMs` if it is free or already held by `holder`. @returns true when held */
export async function acquireOwned(redis: RedisClient, key: string, holder: string, ttlMs: number): Promise<boolean> {
  return (await redis.eval(ACQUIRE, 1, key, holder, String(ttlMs))) === 1;
}

/** Extend `key` to `ttlMs` while `holder` holds it. @returns false when it was lost */
export async function renewOwned(redis: RedisClient, key: string, holder: string, ttlMs: number): Promise<boolean> {
  return (await redis.eval(RENEW, 1, key, holder, String(ttlMs))) === 1;
}

/** Delete `key` if `holder` holds it. @returns true when it was deleted */
export async function releaseOwned(redis: RedisClient, key: string, holder: string): Promise<boolean> {
  return (await redis.eval(RELEASE, 1, key, holder)) === 1;
}
