import { describe, expect, it } from 'vitest';
import { sleepUntil } from '../worker/runtime/sleep-until.ts';

/** Busy the event loop synchronously, so its cached time lags the wall clock (as on a loaded worker). */
function spin(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until);
}

describe('sleepUntil (docs/DESIGN.md §7: nothing that is not yet due fires early)', () => {
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

  it('callers waiting for the same instant wake in one turn of the event loop; an aborted one leaves the others waiting', async () => {
    // Turns of the event loop, counted by a chain of immediates (one per check phase).
    let turn = 0;
    let counting = true;
    const count = () => {
      turn++;
      if (counting) setImmediate(count);
    };
    setImmediate(count);
    const at = Date.now() + 1500;
    const woke: number[] = [];
    const controller = new AbortController();
    const aborted = sleepUntil(at, controller.signal).then(() => Date.now());
    const waits = Array.from({ length: 50 }, async (_, i) => {
      // The callers start in different turns, each after synchronous work (the loop's cached time
      // lags by different amounts), as ticks fetched one by one do.
      for (let k = 0; k < i % 5; k++) await new Promise((r) => setImmediate(r));
      spin(2);
      expect(Date.now()).toBeLessThan(at);
      await sleepUntil(at);
      woke.push(turn);
      expect(Date.now()).toBeGreaterThanOrEqual(at);
    });
    controller.abort();
    expect(await aborted).toBeLessThan(at);
    await Promise.all(waits);
    counting = false;
    expect(woke).toHaveLength(50);
    expect([...new Set(woke)]).toEqual([woke[0]]);
  });
});
