/**
 * Claim ahead against a lost job lock: a held tick whose worker was starved (event loop blocked) across
 * its claim time, while its job lock lapsed and another worker took the job, must not claim the tick
 * when it runs again (the claim is the other worker's now).
 */
import { describe, expect, it } from 'vitest';
import { blockEventLoopUntil, events, openTestClients, sleep, spawnWorker, startWorker, waitFor } from './support/stack.ts';
import { addLoop, STARVABLE_HOLDER, TAKEOVER_WORKER_ENV } from './support/armed-loops.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const cleanups = cleanupAfterEach();

describe('claim ahead after a lost job lock', () => {
  it('a worker starved across its claim time does not claim the tick another worker holds now', async () => {
    const CLAIM_LEAD = 5_000;
    const { env: e, c } = openTestClients(cleanups, {
      'worker.prefetch_lead_ms': 34_000,
      'worker.claim_lead_ms': CLAIM_LEAD,
      ...STARVABLE_HOLDER,
    });
    const starved = await startWorker(e);
    cleanups.push(() => starved.drain());
    const due = Date.now() + 36_000; // the first job comes at once: due 34 s later (the lead)
    await addLoop(c, 'starved', { kind: 'command', command: 'sleep 1; echo once', timeoutSeconds: 30 }, due);
    await waitFor(() => (starved.deps.turns.admission.held === 1 ? true : undefined), 15_000, 'the tick held by the first worker');
    const other = await spawnWorker(cleanups, e, TAKEOVER_WORKER_ENV);
    // Starve the first worker from 15 s to 3.5 s before the due time: its lock lapses, the other worker takes the
    // job (and claims it ahead, 5 s before due); the starved worker's own claim timer (5 s before due) fires late.
    // The other worker has 10 s to see the stall and take the job: beside a second copy of the suite 5 s were not
    // always enough, and the starved worker, running again with the job still in the queue, took it back itself.
    const blockFrom = due - CLAIM_LEAD - 10_000;
    expect(Date.now()).toBeLessThan(blockFrom); // the other worker started in time
    await sleep(blockFrom - Date.now());
    blockEventLoopUntil(due - CLAIM_LEAD + 1_500);
    await waitFor(
      async () => ((await events(c, 'starved', 'reply')).length > 0 ? true : undefined),
      due - Date.now() + 20_000,
      'the tick to run',
    );
    await sleep(2000);
    const started = await events(c, 'starved', 'tick.started');
    const replies = await events(c, 'starved', 'reply');
    expect(replies).toHaveLength(1);
    expect(replies[0]!.data).toMatchObject({ text: 'once', pid: other.pid });
    expect(started.map((s) => s.data.pid)).toEqual([other.pid]); // one claim, by the worker that has the job
  }, 120_000);
});
