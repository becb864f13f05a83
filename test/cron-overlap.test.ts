/**
 * Temporal's overlap policies beyond skip, queue and allow (docs/CRON.md, "Overlap"):
 * `--overlap buffer_all` runs the occurrences due during a run one after another, in the order they
 * were due, and no more than `cron.max_buffered_occurrences` wait.
 *
 * Real Redis and BullMQ, the local model server. A run that must last is held by the test (a held
 * model answer), every wait is on an observed state.
 */
import { describe } from 'vitest';
import type { CronRun } from '../scheduler/cron/cron-job.ts';
import { startCronWorker, openCronService } from './support/cron-worker.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { lastUserText, startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import { waitFor } from './support/wait-for.ts';
import { it, type CleanUp } from './support/cleanup.ts';

const cli = { origin: { surface: 'cli' as const }, trusted: true };

/** A model whose first answer is held until `release()` (or the test's end); later ones come at once. */
async function heldModel(cleanups: CleanUp[]): Promise<{ model: FakeOpenAI; release: () => void }> {
  const model = await startFakeOpenAI();
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  model.respond(async (req, index) => {
    if (index === 0) await gate;
    return `done: ${lastUserText(req)}`;
  });
  cleanups.push(() => model.close());
  cleanups.push(() => release()); // runs first: a worker closes only when its runs end
  return { model, release };
}

describe.concurrent('--overlap buffer_all', () => {
  it('runs the occurrences due during a run one after another, in the order they were due; one more than cron.max_buffered_occurrences is skipped as buffer-full', async ({
    cleanups,
    expect,
  }) => {
    const held = await heldModel(cleanups);
    const env: TestEnv = testEnv({
      'agent.base_url': held.model.baseUrl,
      'cron.min_interval_seconds': 1,
      'cron.max_buffered_occurrences': 3,
    });
    cleanups.push(() => env.cleanup());
    const api = openCronService(env.config);
    cleanups.push(() => api.close());
    const w = await startCronWorker(env.config, { concurrency: 8 });
    cleanups.push(() => w.close());
    const job = await api.service.add({ schedule: 'every 1s', prompt: 'slow', overlap: 'buffer_all' }, cli);
    const runsOf = async () => (await api.store.runs(job.id, 1000)).sort((a, b) => a.due_at - b.due_at);

    // The first run lasts until three occurrences wait in the buffer and a fourth was turned away.
    const full = await waitFor(
      async () => (await runsOf()).find((r) => r.status === 'skipped'),
      20_000,
      'an occurrence skipped with the buffer full',
    );
    expect(full).toMatchObject({ reason: 'buffer-full', trigger: 'schedule', started_at: null });
    expect(await api.redis.zcard(api.keys.cronBuffer(job.id))).toBe(3);
    expect(held.model.requests).toHaveLength(1);
    held.release();

    await waitFor(async () => (await runsOf()).filter((r) => r.status === 'ok').length >= 5, 20_000, 'the buffered runs and one more');
    await api.service.pause(job.id);
    await waitFor(async () => (await api.queues.ticks.getActiveCount()) === 0, 10_000, 'no tick in flight');

    const runs = await runsOf();
    const ok = runs.filter((r) => r.status === 'ok');
    const first = ok[0]!;
    // The occurrences due during the first run: three ran, after it and one after another, in due order.
    const buffered = ok.filter((r) => r.due_at > first.due_at && r.due_at < first.finished_at!);
    expect(buffered).toHaveLength(3);
    const byStart = [...ok].sort((a, b) => a.started_at! - b.started_at!);
    expect(byStart.map((r) => r.due_at)).toEqual(ok.map((r) => r.due_at));
    for (let i = 1; i < ok.length; i++) expect(ok[i]!.started_at!).toBeGreaterThanOrEqual(ok[i - 1]!.finished_at!);
    // The bound held: every occurrence due during the first run beyond the three was skipped, and said so.
    const turnedAway = runs.filter((r) => r.status === 'skipped');
    expect(turnedAway.length).toBeGreaterThanOrEqual(1);
    expect(turnedAway.every((r: CronRun) => r.reason === 'buffer-full' && r.due_at > buffered[2]!.due_at)).toBe(true);
    expect(held.model.requests).toHaveLength(ok.length);
    expect(new Set(runs.map((r) => r.occurrence_id)).size).toBe(runs.length);
  });
});
