/**
 * The session turn lock (`worker/runtime/session-lock.ts`): a held lock is renewed every third of its
 * time-to-live, by one timer for every lock held, so it never lapses while held; a released one is
 * deleted and renewed no more. A lock taken ahead of a turn (`heldFrom`) lasts until then plus its
 * time-to-live with no renewal before then, and is renewed from then on. Real Redis.
 */
import { describe } from 'vitest';
import { SessionLock } from '../worker/runtime/session-lock.ts';
import { redisTestEnv } from './support/redis-env.ts';
import { it, type CleanUp } from './support/cleanup.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A private Redis and a lock of `ttlMs` on it. */
function setup(cleanups: CleanUp[], ttlMs: number) {
  const { redis, keys } = redisTestEnv(cleanups);
  return { redis, keys, lock: new SessionLock(redis, keys, ttlMs) };
}

describe.concurrent('session lock', () => {
  it('locks taken at different times all outlast their time-to-live while held; a released one is gone and stays gone', async ({
    cleanups,
    expect,
  }) => {
    const { redis, keys, lock } = setup(cleanups, 1500);
    const first = await lock.acquire('s1', 'job-1');
    expect(first).not.toBeNull();
    expect(await lock.acquire('s1', 'job-2')).toBeNull();
    await sleep(600);
    const second = await lock.acquire('s2', 'job-3');
    const third = lock.adopt('s3', 'job-4'); // taken by another step: renewed from now on
    await redis.set(keys.turnLock('s3'), 'job-4', 'PX', 1500);
    const gone = await lock.acquire('s4', 'job-5');
    await gone!.release();
    // Three time-to-lives: every held lock is renewed throughout.
    for (let i = 0; i < 9; i++) {
      await sleep(500);
      expect(await lock.holder('s1')).toBe('job-1');
      expect(await lock.holder('s2')).toBe('job-3');
      expect(await lock.holder('s3')).toBe('job-4');
      expect(await lock.holder('s4')).toBeNull();
    }
    await first!.release();
    expect(await lock.holder('s1')).toBeNull();
    await sleep(700);
    expect(await lock.holder('s1')).toBeNull(); // not renewed back
    expect(await lock.holder('s2')).toBe('job-3');
    // Released elsewhere (a commit freed it): renewed no more, so it lapses.
    third.releasedElsewhere();
    await second!.release();
    await sleep(2000);
    expect(await lock.holder('s3')).toBeNull();
    expect(await lock.holder('s2')).toBeNull();
  });

  it('a lock taken ahead (heldFrom) lasts until then plus its time-to-live, is not renewed before then, and is renewed after', async ({
    cleanups,
    expect,
  }) => {
    const { redis, keys, lock } = setup(cleanups, 1500);
    const heldFrom = Date.now() + 2500;
    const held = await lock.acquire('ahead', 'job-1', heldFrom);
    expect(held).not.toBeNull();
    // Set to last past heldFrom: more than the time-to-live left now.
    expect(await redis.pttl(keys.turnLock('ahead'))).toBeGreaterThan(heldFrom - Date.now());
    // Not renewed meanwhile: a renewal would cut what is left back to 1500 ms; without one it is heldFrom + 1500 - now.
    while (Date.now() < heldFrom - 300) {
      const left = await redis.pttl(keys.turnLock('ahead'));
      expect(left).toBeGreaterThanOrEqual(heldFrom + 1500 - Date.now() - 20);
      await sleep(100);
    }
    // Renewed from heldFrom on: still held three time-to-lives later.
    await sleep(heldFrom + 4500 - Date.now());
    expect(await lock.holder('ahead')).toBe('job-1');
    // One released before its time comes is never renewed back.
    const early = await lock.acquire('early', 'job-2', Date.now() + 1000);
    await early!.release();
    await sleep(1500);
    expect(await lock.holder('early')).toBeNull();
    await held!.release();
    expect(await lock.holder('ahead')).toBeNull();
  });
});
