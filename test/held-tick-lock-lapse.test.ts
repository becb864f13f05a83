/**
 * A held tick whose lock lapsed while its worker was starved (event loop blocked longer than the
 * lock) is not fired twice (docs/OPERATIONS.md, "Held ticks and running turns").
 */
import { describe, expect, it } from 'vitest';
import { testEnv, type TestEnv } from './support/env.ts';
import { blockEventLoopUntil, clients, events, spawnWorker, startWorker, waitFor, type TestClients } from './support/stack.ts';
import { addLoop, STARVABLE_HOLDER, TAKEOVER_WORKER_ENV } from './support/armed-loops.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const cleanups = cleanupAfterEach();

function env(overrides: Record<string, unknown>): { env: TestEnv; c: TestClients } {
  const e = testEnv(overrides);
  const c = clients(e);
  cleanups.push(
    () => e.cleanup(),
    () => c.close(),
  );
  return { env: e, c };
}

describe('a held tick whose lock lapsed', () => {
  it('a held tick whose worker is starved longer than its lock (event loop blocked) is not fired twice', async () => {
    const { env: e, c } = env({
      'worker.prefetch_lead_ms': 25_500,
      ...STARVABLE_HOLDER,
    });
    const starved = await startWorker(e);
    cleanups.push(() => starved.drain());
    // Due in 26 s: released at once and held by the only worker there is. Until then: the other worker's start (a
    // `hermes worker`: compiled, about a second; through tsx when the build is stale, 4 s on an idle machine, several
    // times that on a loaded one), the 3.5 s
    // starvation, and the hand-over.
    const due = Date.now() + 26_000;
    await addLoop(c, 'starved', { kind: 'command', command: 'sleep 1; echo once', timeoutSeconds: 30 }, due);
    await waitFor(() => (starved.deps.turns.admission.held === 1 ? true : undefined), 15_000, 'the tick held by the first worker');
    const other = await spawnWorker(cleanups, e, TAKEOVER_WORKER_ENV);
    // Starve the first worker: no lock renewal for 3.5 s, so its lock lapses, the stall check puts the job back
    // and the other worker takes it (and holds it until it is due).
    blockEventLoopUntil(Date.now() + 3500);
    // The copy the starved worker held never starts a turn: it lets the tick go as soon as it runs again.
    await waitFor(() => (starved.deps.turns.admission.held === 0 ? true : undefined), 10_000, 'the starved worker to let the tick go');
    await waitFor(
      async () => ((await events(c, 'starved', 'reply')).length > 0 ? true : undefined),
      due - Date.now() + 20_000,
      'the tick to run',
    );
    await new Promise((r) => setTimeout(r, 2000)); // a second copy's turn (1 s) would have committed by now
    // The starved worker started no turn. Were the other's lock to lapse too, a retry of the same occurrence would
    // start it again after the lapsed run was aborted (claim-tick-8.lua); one occurrence and one reply are what
    // "not fired twice" means.
    const starts = await events(c, 'starved', 'tick.started');
    expect(starts.length).toBeGreaterThanOrEqual(1);
    expect(new Set(starts.map((s) => (s.data as { occurrenceId: string }).occurrenceId)).size).toBe(1);
    expect(starts.map((s) => (s.data as { pid: number }).pid)).toEqual(starts.map(() => other.pid));
    const replies = await events(c, 'starved', 'reply');
    expect(replies).toHaveLength(1);
    expect(replies[0]!.data).toMatchObject({ text: 'once', pid: other.pid });
  }, 120_000);
});
