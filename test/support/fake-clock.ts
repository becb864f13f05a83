/**
 * Time passing on vitest's fake clock while real I/O goes on: for a test that waits only for time
 * (a retry wait, a backoff, a Retry-After) of code that also talks over real sockets (a local
 * server, Redis). Fake only what the waits use, e.g. `vi.useFakeTimers({ toFake: ['setTimeout',
 * 'clearTimeout', 'Date'] })`.
 *
 * Time passes in small steps, each firing what is due and then yielding a real turn of the event
 * loop, so answers over the sockets arrive in between. An answer can arrive a few steps of fake
 * time late, never early: bound waits from below (`≥ the backoff`), and from above only with a
 * margin of many steps.
 */
import { vi } from 'vitest';

/** Fake time per step, ms. */
const STEP_MS = 50;

/**
 * Let fake time pass until `done()`.
 * @throws naming `what` when it is not done within `limitMs` of fake time
 */
export async function passUntil(done: () => boolean, what: string, limitMs = 10 * 60_000): Promise<void> {
  for (let passed = 0; !done(); passed += STEP_MS) {
    if (passed > limitMs) throw new Error(`${what}: not within ${limitMs} ms of fake time`);
    await vi.advanceTimersByTimeAsync(STEP_MS);
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
