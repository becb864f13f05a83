/**
 * A test's private Redis (`testEnv`) with a client on it and the key builder of its prefix, closed and
 * removed by the test's cleanups: the start of a store-level test.
 */
import { Redis } from 'ioredis';
import { Keys } from '../../scheduler/store/keys.ts';
import type { CleanUp } from './cleanup.ts';
import { testEnv, type TestEnv } from './env.ts';

/** `testEnv(overrides)`, a client on its Redis and its `Keys`; all three are cleaned up with the test. */
export function redisTestEnv(cleanups: CleanUp[], overrides: Record<string, unknown> = {}): { env: TestEnv; redis: Redis; keys: Keys } {
  const env = testEnv(overrides);
  const redis = new Redis(env.redisUrl);
  cleanups.push(
    () => env.cleanup(),
    () => redis.disconnect(),
  );
  return { env, redis, keys: new Keys(env.prefix) };
}
