/**
 * The stored form of cron job records (docs/BENCHMARKS.md, "Cron store"): compact records that
 * read back as the record they were written from, records in the full form earlier versions
 * wrote still read, claim and change, and the claim script reads a compact record's `--repeat`
 * budget (omitted at its default).
 */
import { describe, expect, it } from 'vitest';
import { applyRun, pauseCronJob, resumeCronJob, type CronJob } from '../scheduler/cron/cron-job.ts';
import { encodeCronJob, readCronJob } from '../scheduler/cron/cron-record-codec.ts';
import { cronJobFixture, cronRunFixture, FIXTURE_T0 } from './support/record-fixtures.ts';
import { openCronService } from './support/cron-worker.ts';
import { testEnv } from './support/env.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const cleanups = cleanupAfterEach();

const cli = { origin: { surface: 'cli' as const }, trusted: true };

describe('cron record codec', () => {
  it('stores a new job without the fields at a new job’s value, and reads it back as written', () => {
    const job: CronJob = { ...cronJobFixture(), version: 1 };
    expect(JSON.parse(encodeCronJob(job))).toEqual({
      id: 'abcdefabcdef',
      name: 'n',
      prompt: 'p',
      schedule: job.schedule,
      tz: 'UTC',
      state: 'scheduled',
      next_run_at: job.next_run_at,
      created_at: FIXTURE_T0,
      generation: 1,
      version: 1,
    });
    expect(readCronJob(encodeCronJob(job))).toEqual(job);
  });

  it('reads back every state a record goes through as the record it was written from', () => {
    const fresh = cronJobFixture({ repeat: 3, deliver: ['local', 'telegram:42'], origin: { surface: 'api' }, notify: 'done' });
    const run = (job: CronJob, due: number, over = {}) =>
      applyRun(job, cronRunFixture(job.id, due, over), due, due + 100, { maxConsecutiveFailures: 3 });
    const ran = run(fresh, FIXTURE_T0 + 60_000);
    const failed = run(ran, FIXTURE_T0 + 120_000, { status: 'error', error: 'boom' });
    const paused = pauseCronJob(failed, FIXTURE_T0 + 130_000)!;
    const states: CronJob[] = [
      cronJobFixture(),
      fresh,
      ran,
      failed,
      paused,
      resumeCronJob(paused, FIXTURE_T0 + 140_000)!,
      { ...cronJobFixture(), watch: 'read_file:/tmp/x', max_tokens: 1000, model: 'small', catchup_window_seconds: 600 },
    ];
    for (const job of states) expect(readCronJob(encodeCronJob(job))).toEqual(job);
    // Values that equal a default only by accident are written: a 0 due time is not "never ran".
    expect(readCronJob(encodeCronJob({ ...fresh, last_run_at: 0 })).last_run_at).toBe(0);
  });

  it('omits a field only when its value is its default in every part; the order of an object’s keys does not matter', () => {
    const job = cronJobFixture();
    const stored = (over: Record<string, unknown>) => JSON.parse(encodeCronJob({ ...job, ...over })) as Record<string, unknown>;
    const omitted = [
      { repeat: { completed: 0, times: null } },
      { deliver: ['local'] },
      { origin: { surface: 'cli' } },
      { spend: JSON.parse(JSON.stringify(job.spend)) as unknown },
    ];
    for (const over of omitted) expect(Object.keys(stored(over))).not.toContain(Object.keys(over)[0]);
    const kept = [
      { repeat: { times: null, completed: 1 } },
      { repeat: { times: null } },
      { repeat: { times: null, completed: 0, extra: undefined } },
      { deliver: ['local', 'local'] },
      { deliver: [] },
      { deliver: 'local' },
      { origin: { surface: 'api' } },
      { origin: { surface: 'cli', via: 'x' } },
      { spend: { ...job.spend, calls: 1 } },
      { failure_streak: -0 },
      { script: 0 },
      { budget_tokens: '0' },
    ];
    for (const over of kept) expect(Object.keys(stored(over))).toContain(Object.keys(over)[0]);
  });

  it('reads a record in the full form earlier versions wrote as the same record; fields they lacked at their default', () => {
    const job = cronJobFixture({ repeat: 2 });
    expect(readCronJob(JSON.stringify(job))).toEqual(job);
    const { spend: _s, notify: _n, unchanged_runs: _u, budget_tokens: _b, ...older } = cronJobFixture();
    expect(readCronJob(JSON.stringify({ ...older, notify: 'failure' }))).toEqual(cronJobFixture());
  });
});

describe('stored cron jobs in Redis', () => {
  it('a job is stored compact, and claims against its --repeat budget whether compact or in the earlier full form', async () => {
    const env = testEnv();
    cleanups.push(() => env.cleanup());
    const api = openCronService(env.config);
    cleanups.push(() => api.close());
    const plain = await api.service.add({ schedule: 'every 1h', prompt: 'p' }, cli);
    const raw = (await api.redis.get(api.keys.cronJob(plain.id)))!;
    expect(JSON.parse(raw)).not.toHaveProperty('repeat');
    expect(await api.store.get(plain.id)).toEqual(plain);
    const claim = (job: CronJob, n: number) =>
      api.store.claim({ jobId: job.id, occurrenceId: `occ-${n}`, holder: `h-${n}`, generation: job.generation, manual: false, dueAt: n });
    // No budget: every occurrence is claimed.
    for (let n = 1; n <= 3; n++) expect(await claim(plain, n)).toEqual({ status: 'ok', attempt: 1, journalEntries: 0 });

    const budgeted = await api.service.add({ schedule: 'every 1h', prompt: 'p', repeat: 1, overlap: 'allow' }, cli);
    expect(await claim(budgeted, 1)).toEqual({ status: 'ok', attempt: 1, journalEntries: 0 });
    expect(await claim(budgeted, 2)).toEqual({ status: 'repeat-used' });

    // A record as the previous version wrote it (full form) reads, claims and is written compact at its next change.
    const old = await api.service.add({ schedule: 'every 1h', prompt: 'p', repeat: 1, overlap: 'allow' }, cli);
    await api.redis.set(api.keys.cronJob(old.id), JSON.stringify(old));
    expect(await api.store.get(old.id)).toEqual(old);
    expect(await claim(old, 1)).toEqual({ status: 'ok', attempt: 1, journalEntries: 0 });
    expect(await claim(old, 2)).toEqual({ status: 'repeat-used' });
    expect((await api.service.pause(old.id)).job.state).toBe('paused');
    const rewritten = JSON.parse((await api.redis.get(api.keys.cronJob(old.id)))!) as Record<string, unknown>;
    expect(rewritten).not.toHaveProperty('last_error');
    expect(rewritten.repeat).toEqual({ times: 1, completed: 0 });
  });
});
