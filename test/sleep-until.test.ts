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
    // Each caller must start waiting before the instant, or it has nothing to wait for: on a starved
    // process the setup (50 callers over several turns, each after synchronous work) can outlast any
    // fixed lead. A run where one started late says nothing about the rule; it is run again with
    // twice the lead, and the rule is checked on the first run where every caller waited.
    for (let lead = 1500; ; lead *= 2) {
      const run = await sameInstant(lead);
      if (run.lateStarts > 0 && lead < 24_000) continue;
      expect(run.lateStarts).toBe(0);
      expect(run.aborted).toBeLessThan(run.at);
      expect(run.early).toEqual([]);
      expect(run.woke).toHaveLength(50);
      expect([...new Set(run.woke)]).toEqual([run.woke[0]]);
      return;
    }
  }, 120_000);
});

/**
 * 50 callers of `sleepUntil` for one instant `lead` ms ahead and one more that is aborted at once.
 * @returns the instant, when the aborted one resolved, the turn each caller woke in, how many woke
 *   before the instant (early), and how many started waiting only at or after it (lateStarts)
 */
async function sameInstant(lead: number): Promise<{ at: number; aborted: number; woke: number[]; early: number[]; lateStarts: number }> {
  // Turns of the event loop, counted by a chain of immediates (one per check phase).
  let turn = 0;
  let counting = true;
  const count = () => {
    turn++;
    if (counting) setImmediate(count);
  };
  setImmediate(count);
  const at = Date.now() + lead;
  const woke: number[] = [];
  const early: number[] = [];
  let lateStarts = 0;
  const controller = new AbortController();
  const aborted = sleepUntil(at, controller.signal).then(() => Date.now());
  const waits = Array.from({ length: 50 }, async (_, i) => {
    // The callers start in different turns, each after synchronous work (the loop's cached time
    // lags by different amounts), as ticks fetched one by one do.
    for (let k = 0; k < i % 5; k++) await new Promise((r) => setImmediate(r));
    spin(2);
    if (Date.now() >= at) lateStarts++;
    await sleepUntil(at);
    woke.push(turn);
    const now = Date.now();
    if (now < at) early.push(at - now);
  });
  controller.abort();
  const abortedAt = await aborted;
  await Promise.all(waits);
  counting = false;
  return { at, aborted: abortedAt, woke, early, lateStarts };
}
