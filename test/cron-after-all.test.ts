/**
 * `--after-all` (docs/CRON.md, "Jobs that run after jobs") on real BullMQ: a job after two parents runs once both
 * have run in one window, with each parent's latest run of the window (a parent that ran twice is offered by its
 * second run), not after each; the parents' runs it took start no second run, also when a parent's commit path runs
 * again (a duplicate of its job); the next window starts empty; a parent removed is waited for no more.
 */
import { describe, expect, it } from 'vitest';
import { CRON_TICK_JOB_NAME, type CronTickData } from '../scheduler/cron/cron-store.ts';
import type { CronCaller } from '../scheduler/cron/cron-input.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { openTestCron, startCronWorker } from './support/cron-worker.ts';
import { waitFor } from './support/wait-for.ts';

const cleanups = cleanupAfterEach();
const CLI: CronCaller = { origin: { surface: 'cli' }, trusted: true };

describe('--after-all (real BullMQ)', () => {
  it('C after A and B: once both ran in one window, with the latest run of each; a duplicate of a parent job adds no run; the next window starts empty; a removed parent is not waited for', async () => {
    const { env, api } = openTestCron(cleanups, { 'cron.min_interval_seconds': 1 });
    const w = await startCronWorker(env.config);
    cleanups.push(() => w.close());
    const a = await api.service.add({ schedule: 'every 2h', script: 'echo "A-RUN-1"', name: 'A' }, CLI);
    const b = await api.service.add({ schedule: 'every 2h', script: 'echo "B-RUN-1"', name: 'B' }, CLI);
    const c = await api.service.add({ script: 'cat', name: 'C', after: ['A', 'B'], after_all: true }, CLI);
    expect(c.after_all).toBe(true);
    const runsOf = (id: string) => api.store.runs(id, 20);
    /** Run a parent now, and wait until its job is done: its hand-off is done then. */
    const runParent = async (ref: string, script: string) => {
      await api.service.edit(ref, { script }, CLI);
      const { job } = await api.service.runNow(ref, CLI);
      const before = (await runsOf(job.id)).length;
      const [run] = await waitFor(
        async () => ((await runsOf(job.id)).length > before ? await runsOf(job.id) : undefined),
        15_000,
        `${ref} ran`,
      );
      await waitFor(() => w.results.some((r) => r.occurrenceId === run!.occurrence_id), 15_000, `${ref}'s job done`);
      return run!;
    };

    // A twice, then B: C runs once, after both, with A's second run.
    await runParent('A', 'echo "A-RUN-1"');
    const a2 = await runParent('A', 'echo "A-RUN-2"');
    expect(await runsOf(c.id)).toEqual([]);
    const b1 = await runParent('B', 'echo "B-RUN-1"');
    const [c1] = await waitFor(async () => ((await runsOf(c.id)).length > 0 ? await runsOf(c.id) : undefined), 15_000, 'C ran');
    const byId = (x: { job_id: string }, y: { job_id: string }) => x.job_id.localeCompare(y.job_id);
    expect(c1).toMatchObject({ trigger: 'after', status: 'ok' });
    expect(c1!.parents).toEqual(
      [
        { job_id: a.id, occurrence_id: a2.occurrence_id, status: 'ok' },
        { job_id: b.id, occurrence_id: b1.occurrence_id, status: 'ok' },
      ].sort(byId),
    );
    // A script child reads its prompt and both parents' outputs on stdin.
    expect(c1!.output).toContain('A-RUN-2');
    expect(c1!.output).toContain('B-RUN-1');
    expect(c1!.output).not.toContain('A-RUN-1');
    expect(b1.handoff).toEqual([c.id]);

    // B's commit path again (a duplicate of its job): the run it hands off was taken by C's run, so nothing is queued.
    const duplicates = () => w.results.filter((r) => r.outcome === 'duplicate').length;
    const again: CronTickData = { type: 'cron-tick', jobId: b.id, generation: b.generation, dueAt: b1.due_at, manual: true };
    await api.queues.forCronJob(b.id).ticks.add(CRON_TICK_JOB_NAME, again, { jobId: 'b-again-1' });
    await waitFor(() => duplicates() >= 1, 15_000, "the duplicate of B's job done");
    expect(Object.keys(await api.redis.hgetall(api.keys.cronAfterAll(c.id))).filter((f) => f.startsWith('run:'))).toEqual([]);

    // The next window: B alone starts nothing; A then completes it.
    const b2 = await runParent('B', 'echo "B-RUN-2"');
    expect(await runsOf(c.id)).toHaveLength(1);
    const a3 = await runParent('A', 'echo "A-RUN-3"');
    const runs = await waitFor(async () => ((await runsOf(c.id)).length > 1 ? await runsOf(c.id) : undefined), 15_000, 'C ran again');
    expect(runs[0]!.parents!.map((p) => p.occurrence_id).sort()).toEqual([a3.occurrence_id, b2.occurrence_id].sort());
    expect(runs[0]!.output).toContain('A-RUN-3');
    expect(runs[0]!.output).toContain('B-RUN-2');
    // B removed: C waits for A alone.
    await api.service.remove('B');
    const a4 = await runParent('A', 'echo "A-RUN-4"');
    const third = await waitFor(
      async () => ((await runsOf(c.id)).length > 2 ? await runsOf(c.id) : undefined),
      15_000,
      'C ran a third time',
    );
    expect(third[0]!.parents!.map((p) => p.occurrence_id)).toEqual([a4.occurrence_id]);
    // Quiet: exactly three runs of C.
    await waitFor(
      async () =>
        Object.values(await api.queues.forCronJob(c.id).ticks.getJobCounts('active', 'waiting', 'prioritized')).every((n) => n === 0),
      10_000,
      'queue idle',
    );
    expect(await runsOf(c.id)).toHaveLength(3);
  });
});
