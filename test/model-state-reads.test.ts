/**
 * The fleet's model state read by many turns at once (scheduler/models/model-state-store.ts, `RedisModelState`):
 * reads of one model asked for together share one `MGET`; a write through the store is seen by every read asked
 * for after it ended, even while a read sent before it is still on its way.
 */
import { describe, expect, it } from 'vitest';
import { RedisModelState, type ModelRef, type ModelState } from '../scheduler/models/model-state-store.ts';
import type { LearnedWindow } from '../scheduler/models/model-window.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { redisTestEnv } from './support/redis-env.ts';
import { waitFor } from './support/wait-for.ts';

const cleanups = cleanupAfterEach();

const model: ModelRef = { endpoint: 'http://127.0.0.1:9/v1', model: 'm-1' };
const other: ModelRef = { endpoint: 'http://127.0.0.1:9/v1', model: 'm-2' };
const learned = (tokens: number): LearnedWindow => ({ version: 0, tokens, how: 'stated', provider: 'openai', at: 1, said: 'too long' });

/** The store over a client whose `MGET`s are counted, and whose answers are held back while `hold` is set. */
function countedStore() {
  const { redis, keys } = redisTestEnv(cleanups);
  const calls: string[][] = [];
  let release: (() => void) | undefined;
  let held: Promise<void> | undefined;
  const realMget = redis.mget.bind(redis) as (...keys: string[]) => Promise<Array<string | null>>;
  (redis as unknown as { mget: (...k: string[]) => Promise<Array<string | null>> }).mget = async (...k: string[]) => {
    calls.push(k);
    const gate = held;
    const answer = await realMget(...k); // sent now: it reads the state as it is now
    await gate;
    return answer;
  };
  const hold = () => {
    held = new Promise<void>((r) => (release = r));
  };
  const letGo = () => {
    held = undefined;
    release?.();
  };
  return { store: new RedisModelState(redis, keys), calls, hold, letGo };
}

describe('model state reads', () => {
  it('reads of one model asked for together share one MGET; another model is read on its own', async () => {
    const { store, calls } = countedStore();
    await store.learnWindow(model, learned(8_000));
    const reads = await Promise.all([...Array.from({ length: 20 }, () => store.read(model)), store.read(other)]);
    expect(calls).toHaveLength(2);
    for (const r of reads.slice(0, 20)) expect(r.window?.tokens).toBe(8_000);
    expect(reads[20]).toEqual({});
    // Once answered, the next read is a read of its own.
    expect((await store.read(model)).window?.tokens).toBe(8_000);
    expect(calls).toHaveLength(3);
  });

  it('a read asked for after a write ended sees it, though a read sent before the write is still on its way', async () => {
    const { store, calls, hold, letGo } = countedStore();
    hold();
    const before: Promise<ModelState> = store.read(model); // sent before the write, answered late
    const during = store.learnWindow(model, learned(6_000)).then(() => store.read(model));
    const stillOld = store.read(model); // asked for while the write is on its way: may share the early read
    await waitFor(() => calls.length >= 2, undefined, 'the read after the write to be sent');
    letGo();
    expect((await before).window).toBeUndefined();
    expect((await stillOld).window).toBeUndefined();
    expect((await during).window?.tokens).toBe(6_000);
    // The breaker too: written, then read by a read asked for after the write, while one sent before is held.
    hold();
    const early = store.read(model);
    await store.updateBreaker(model, () => ({ next: { version: 0, failures: 3, openedAt: 5 }, result: undefined }));
    const late = store.read(model);
    letGo();
    expect((await early).breaker).toBeUndefined();
    expect((await late).breaker?.failures).toBe(3);
    // And forgetting.
    hold();
    const beforeForget = store.read(model);
    await store.forget(model);
    const afterForget = store.read(model);
    letGo();
    expect((await beforeForget).window?.tokens).toBe(6_000);
    expect(await afterForget).toEqual({});
  });
});
