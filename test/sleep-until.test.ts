import { describe, expect, it } from 'vitest';
import { sleepUntil } from '../worker/sleep-until.ts';

/** Busy the event loop synchronously, so its cached time lags the wall clock (as on a loaded worker). */
function spin(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until);
}

describe('sleepUntil (SPEC §7: nothing that is not yet due fires early)', () => {
  it('never resolves before the wall clock reaches the due time, even after synchronous work', async () => {
    const early: number[] = [];
    for (let i = 0; i < 40; i++) {
      spin(10);
      const at = Date.now() + 5;
      await sleepUntil(at);
      const now = Date.now();
      if (now < at) early.push(at - now);
    }
    expect(early).toEqual([]);
  });

  it('resolves at once when the signal aborts, and when the time has passed', async () => {
    const controller = new AbortController();
    const pending = sleepUntil(Date.now() + 600_000, controller.signal);
    controller.abort();
    await pending;
    await sleepUntil(Date.now() - 1);
  });
});
