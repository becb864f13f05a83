/**
 * Time passing on vitest's fake clock while real I/O goes on: for a test that waits only for time
 * (a retry wait, a backoff, a Retry-After) of code that also talks over real sockets (a local
 * server, Redis). Fake only what the waits use, e.g. `vi.useFakeTimers({ toFake: ['setTimeout',
 * 'clearTimeout', 'Date'] })`.
 *
 * Time passes in small steps, each firing what is due and then waiting a real millisecond, so
 * answers over the sockets arrive in between. Fake time runs at most {@link STEP_MS} times as fast
 * as real time: without that bound a loaded machine's slow answer (a file read, a local HTTP reply)
 * let fake time race past a timeout of the code under test (a tool's 30 s) before it came. An answer
 * can arrive a few steps of fake time late, never early: bound waits from below (`≥ the backoff`),
 * and from above only with a margin of many steps.
 */
import { setTimeout as realSleep } from 'node:timers/promises';
import { vi } from 'vitest';

/** Fake time per step, ms; each step also takes at least 1 ms of real time (`node:timers/promises` is not faked). */
const STEP_MS = 50;

/**
 * Let fake time pass until `done()`.
 * @throws naming `what` when it is not done within `limitMs` of fake time
 */
export async function passUntil(done: () => boolean, what: string, limitMs = 10 * 60_000): Promise<void> {
  for (let passed = 0; !done(); passed += STEP_MS) {
    if (passed > limitMs) throw new Error(`${what}: not within ${limitMs} ms of fake time`);
    await vi.advanceTimersByTimeAsync(STEP_MS);
    await realSleep(1);
  }
}

/** `promise`, with fake time passing until it settles (see `passUntil`). */
export async function settleOnFakeClock<T>(promise: Promise<T>, what = 'the promise', limitMs?: number): Promise<T> {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await passUntil(() => settled, what, limitMs);
  return promise;
}
