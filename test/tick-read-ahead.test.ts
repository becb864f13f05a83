/**
 * A tick fetched before its due time has its gate read then (`readAhead`, worker/loop/tick-processor.ts);
 * at the due time it claims over that read. A read that went stale while the tick was held — the loop
 * paused — must not decide the tick: the claim re-checks it and a fresh read decides.
 * The prefetch lead is 5 s here, so the tick is held for seconds, long enough to change the session
 * in between on a loaded machine.
 *
 * Each test has its own Redis prefix and worker, so the two run side by side: most of their time is the lead.
 */
import { describe } from 'vitest';
import { events, startWorkerStack, waitFor, waitForEvents } from './support/stack.ts';
import { it, type CleanUp } from './support/cleanup.ts';

async function setup(cleanups: CleanUp[]) {
  const { c, worker } = await startWorkerStack(cleanups, { 'worker.prefetch_lead_ms': 5_000 });
  const run = { origin: { surface: 'cli' as const }, runner: { kind: 'command' as const, command: 'echo tick', timeoutSeconds: 5 } };
  const heldTicks = () => worker.deps.turns.admission.held;
  return { c, run, heldTicks };
}

describe.concurrent('a tick read ahead of its due time', () => {
  it('fires at its due time over the read it made when it was fetched', async ({ cleanups, expect }) => {
    const { c, run, heldTicks } = await setup(cleanups);
    const setAt = Date.now();
    await c.schedules.set('ahead-fires', 'loop', { prompt: 'p', intervalSeconds: 3600, times: null, until: null, notes: [] }, run);
    await waitFor(() => heldTicks() === 1, 10_000, 'the tick fetched and held');
    const [reply] = await waitForEvents(c, 'ahead-fires', 'reply', 1, 15_000);
    expect(reply!.data.text).toBe('tick');
    // released 200 ms after arming, due a lead later (scheduler/loop/prefetch-lead.ts), and not before
    expect(Number(reply!.data.startedAt)).toBeGreaterThanOrEqual(Number(reply!.data.dueAt));
    expect(Number(reply!.data.dueAt) - setAt).toBeGreaterThanOrEqual(5_000);
  });

  it('a loop paused while its tick is held does not fire: the stale read is not what decides', async ({ cleanups, expect }) => {
    const { c, run, heldTicks } = await setup(cleanups);
    await c.schedules.set('ahead-paused', 'loop', { prompt: 'p', intervalSeconds: 3600, times: null, until: null, notes: [] }, run);
    await waitFor(() => heldTicks() === 1, 10_000, 'the tick fetched and held');
    const dueAt = (await c.loops.get('ahead-paused', 'loop'))!.createdAt + 5_200;
    await c.schedules.pause('ahead-paused', 'loop');
    expect(Date.now()).toBeLessThan(dueAt); // paused while held, before the due time
    await waitFor(() => heldTicks() === 0, 15_000, 'the held tick done');
    expect(await events(c, 'ahead-paused', 'tick.started')).toEqual([]);
    expect(await events(c, 'ahead-paused', 'reply')).toEqual([]);
    expect(await c.loops.get('ahead-paused', 'loop')).toMatchObject({ status: 'paused', ticksUsed: 0 });
  });
});
