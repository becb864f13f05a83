/**
 * The prefetch lead after an outage (`skippedByLead`, scheduler/cron/repeat-strategy.ts): a job scheduler's job
 * picked up later than its lead allows makes its next job past the occurrence due within the lead of the pick-up;
 * the worker gives that occurrence a job of its own, so it runs on its time, once.
 */
import { describe } from 'vitest';
import { JobScheduler } from 'bullmq';
import { openCronService, startCronWorker } from './support/cron-worker.ts';
import { testEnv } from './support/env.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { blockEventLoopUntil, sleep, waitFor } from './support/wait-for.ts';
import { it, type CleanUp } from './support/cleanup.ts';

const cli = { origin: { surface: 'cli' as const }, trusted: true };

/** A model server that answers every call, a test environment and a cron service on it, stopped through `cleanups`. */
async function setup(cleanups: CleanUp[]) {
  const model = await startFakeOpenAI();
  model.respond(() => 'checked');
  cleanups.push(() => model.close());
  const env = testEnv({ 'agent.base_url': model.baseUrl, 'cron.min_interval_seconds': 1 });
  cleanups.push(() => env.cleanup());
  const api = openCronService(env.config);
  cleanups.push(() => api.close());
  return { env, api };
}

describe('cron: a pick-up later than the prefetch lead', () => {
  it('the occurrence the next job passed gets a job of its own and runs on its time, once', async ({ cleanups, expect }) => {
    const { env, api } = await setup(cleanups);
    // Every 10 s: the lead is half the period, 5 s. Its first occurrence D is released at D − 5 s.
    const job = await api.service.add({ schedule: 'every 10s', prompt: 'check' }, cli);
    const due = job.next_run_at!;
    expect((await api.queues.ticks.getJobScheduler(`cron:${job.id}`))?.pattern).toMatch(/^lead:5000:/);
    // No worker until D + 6 s: picked up then (before D + 10 s, a slow start included), the job scheduler's next
    // job is the first occurrence after the pick-up plus the lead, D + 20 s; D + 10 s is left without one.
    await sleep(due + 6_000 - Date.now());
    const worker = await startCronWorker(env.config);
    cleanups.push(() => worker.close());
    const runs = await waitFor(
      async () => {
        const all = await api.store.runs(job.id, 100);
        return all.some((r) => r.due_at === due + 10_000 && r.status === 'ok') ? all : undefined;
      },
      30_000,
      'the run of D + 10 s',
    );
    expect(runs.find((r) => r.due_at === due + 10_000)).toMatchObject({ trigger: 'schedule', status: 'ok', late: false });
    expect(runs.find((r) => r.due_at === due)).toBeDefined(); // D itself: run late or recorded skipped (--misfire once)
    await api.service.pause(job.id);
    await waitFor(async () => (await api.queues.ticks.getActiveCount()) === 0 || undefined, 15_000, 'no run in flight');
    const all = await api.store.runs(job.id, 100);
    expect(new Set(all.map((r) => r.due_at)).size).toBe(all.length); // each occurrence once
  });

  /**
   * Every 4 s, the lead 2 s: the first occurrence D is released, and fetched, at D − 2 s. BullMQ makes a scheduler's
   * next job with its own clock once the fetch has answered: the process starves there until D + `starvedMs`, so
   * the next job is the first occurrence after D + `starvedMs` + 2 s, and each one before it has none of its own.
   * @returns the job's runs by due time, relative to D, once the run of D + `lastMs` is recorded
   */
  async function starvedAfterFetch(cleanups: CleanUp[], starvedMs: number, lastMs: number) {
    const { env, api } = await setup(cleanups);
    const job = await api.service.add({ schedule: 'every 4s', prompt: 'check' }, cli);
    const due = job.next_run_at!;
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called back with its own `this` below, and put back after
    const upsert = JobScheduler.prototype.upsertJobScheduler;
    let starved = false;
    JobScheduler.prototype.upsertJobScheduler = function (this: JobScheduler, ...args: Parameters<typeof upsert>) {
      if (!starved && args[0] === `cron:${job.id}` && args[5]?.override === false) {
        starved = true;
        blockEventLoopUntil(due + starvedMs);
      }
      return upsert.apply(this, args);
    } as typeof upsert;
    cleanups.push(() => void (JobScheduler.prototype.upsertJobScheduler = upsert));
    const worker = await startCronWorker(env.config);
    cleanups.push(() => worker.close());
    await waitFor(
      async () => {
        const all = await api.store.runs(job.id, 100);
        return all.some((r) => r.due_at === due + lastMs) ? true : undefined;
      },
      30_000,
      `the run of D + ${lastMs / 1000} s`,
    );
    await api.service.pause(job.id);
    await waitFor(async () => (await api.queues.ticks.getActiveCount()) === 0 || undefined, 15_000, 'no run in flight');
    const all = (await api.store.runs(job.id, 100)).sort((a, b) => a.due_at - b.due_at);
    return { starved, runs: all.map((r) => ({ ...r, at: r.due_at - due })) };
  }

  it('a fetch on time whose next job BullMQ made seconds later (a starved process) still leaves no occurrence without a job', async ({
    cleanups,
    expect,
  }) => {
    // Starved until D + 2.5 s: the next job is D + 8 s.
    const { starved, runs } = await starvedAfterFetch(cleanups, 2_500, 8_000);
    expect(starved).toBe(true);
    // D ran late or was recorded skipped; D + 4 s has a run of its own, and no occurrence is recorded twice.
    expect(runs.slice(0, 3).map((r) => r.at)).toEqual([0, 4_000, 8_000]);
    expect(runs.find((r) => r.at === 4_000)).toMatchObject({ trigger: 'schedule', status: 'ok' });
    expect(new Set(runs.map((r) => r.at)).size).toBe(runs.length);
  });

  it('asked more than a period after the fetch, BullMQ passes two occurrences: each gets a job of its own', async ({
    cleanups,
    expect,
  }) => {
    // Starved until D + 6.5 s: the next job is D + 12 s; D + 4 s and D + 8 s have none of their own.
    const { starved, runs } = await starvedAfterFetch(cleanups, 6_500, 12_000);
    expect(starved).toBe(true);
    // Each is recorded (run late, or skipped by the misfire rule), once; none is left out.
    expect(runs.slice(0, 4).map((r) => r.at)).toEqual([0, 4_000, 8_000, 12_000]);
    expect(runs.find((r) => r.at === 8_000)).toMatchObject({ trigger: 'schedule' });
    expect(new Set(runs.map((r) => r.at)).size).toBe(runs.length);
  });
});
