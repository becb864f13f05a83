/**
 * `--jitter` of cron jobs: the offset is a pure function of the job id (the
 * same in another process), previews equal the fire times real BullMQ workers
 * use, bad windows are refused (CLI exit 2, `/api` 400) and change nothing,
 * and `edit` changes the window and re-arms the job scheduler with it.
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { isoUtc, nextOccurrences, periodAt } from '../scheduler/cron/cron-engine.ts';
import { cronOccurrenceId, type CronJob } from '../scheduler/cron/cron-job.ts';
import { decideOccurrence } from '../scheduler/cron/misfire.ts';
import { jitterOffsetMs, parseJitter, withJitter } from '../scheduler/cron/jitter.ts';
import { cronRepeatStrategy, encodePattern } from '../scheduler/cron/repeat-strategy.ts';
import { parseSchedule } from '../scheduler/cron/schedule-grammar.ts';
import { ScheduleInputError } from '../scheduler/errors/schedule-input-error.ts';
import { runCronCli } from './support/cron-cli.ts';
import { openTestCron, startCronWorker } from './support/cron-worker.ts';
import { testEnv } from './support/env.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { waitFor } from './support/wait-for.ts';
import { cronJobFixture } from './support/record-fixtures.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { startCronApiGateway } from './support/cron-api-gateway.ts';
import { programArgs } from './support/test-programs.ts';

const cli = { origin: { surface: 'cli' as const }, trusted: true };
const cleanups = cleanupAfterEach();

/** A cron service whose jobs may repeat every second. */
const setup = (overrides: Record<string, unknown> = {}) => openTestCron(cleanups, { 'cron.min_interval_seconds': 1, ...overrides });

/** Add a jittered job, re-adding until its offset is not 0 (so the shift is visible in the times). */
async function addShifted(add: () => Promise<CronJob>, remove: (id: string) => Promise<unknown>): Promise<CronJob> {
  // With a window of 2 s half of the ids get offset 0; 20 in a row means no jitter was applied.
  for (let i = 0; i < 20; i++) {
    const job = await add();
    if (job.schedule.kind !== 'once' && (job.schedule.jitter?.offsetMs ?? 0) > 0) return job;
    await remove(job.id);
  }
  throw new Error('no job got a jitter offset');
}

describe('jitter offset', () => {
  it('is a pure function of the job id: whole seconds in [0, window), the same in another process', () => {
    const ids = Array.from({ length: 200 }, (_, i) => (0xa00000000000 + i * 7919).toString(16));
    const here = ids.map((id) => jitterOffsetMs(id, 300));
    for (const o of here) {
      expect(o % 1000).toBe(0);
      expect(o).toBeGreaterThanOrEqual(0);
      expect(o).toBeLessThan(300_000);
    }
    expect(new Set(here).size).toBeGreaterThan(100); // spread over the window, not one value
    expect(ids.map((id) => jitterOffsetMs(id, 300))).toEqual(here);
    const other = execFileSync(process.execPath, [...programArgs('jitter-probe'), '300', ...ids], { encoding: 'utf8' });
    expect(JSON.parse(other)).toEqual(here);
    expect(jitterOffsetMs(ids[0]!, 0)).toBe(0);
  });

  it('shifts every occurrence, and the repeat strategy returns the same shifted times as the preview', () => {
    const from = Date.parse('2026-03-28T12:00:00Z');
    const own = parseSchedule('0 * * * *', { tz: 'Europe/Berlin', now: from, minIntervalSeconds: 60 });
    const shifted = withJitter(own, 'c0ffee000001', 1800);
    const offset = jitterOffsetMs('c0ffee000001', 1800);
    // `from` is on the hour: its own occurrence, shifted, is after `from` and so the first.
    const plain = nextOccurrences(own, 'Europe/Berlin', from - 1, 30);
    const times = nextOccurrences(shifted, 'Europe/Berlin', from, 30);
    expect(times).toEqual(plain.map((t) => t + offset));
    let millis = from;
    const strategy: number[] = [];
    for (let i = 0; i < 30; i++) {
      millis = cronRepeatStrategy(millis, { pattern: encodePattern(shifted), tz: 'Europe/Berlin' })!;
      strategy.push(millis);
    }
    expect(strategy).toEqual(times);
  });

  it('misfire grace and occurrence ids count from the shifted due time', () => {
    const now = Date.parse('2026-06-01T10:00:00Z');
    const id = 'c0ffee000002';
    const schedule = withJitter(parseSchedule('0 * * * *', { tz: 'UTC', now, minIntervalSeconds: 60 }), id, 1800);
    const offset = jitterOffsetMs(id, 1800);
    expect(offset).toBeGreaterThan(0);
    const job = cronJobFixture({ id, schedule, misfire: 'skip', now });
    const due = job.next_run_at!;
    expect(due).toBe(now + offset); // the 10:00 occurrence, shifted past now
    expect(cronOccurrenceId(id, due, 'schedule')).toBe(`cron:${id}:${due}`);
    expect(periodAt(schedule, 'UTC', due)).toBe(3_600_000);
    const grace = { graceMinMs: 120_000, graceMaxMs: 7_200_000 };
    const decide = (at: number) =>
      decideOccurrence({
        job,
        dueAt: due,
        generation: job.generation,
        trigger: 'schedule',
        periodMs: periodAt(schedule, 'UTC', due),
        now: at,
        grace,
      });
    // Not before the shifted time, even past the unshifted one.
    expect(decide(due - 1)).toEqual({ action: 'wait', untilMs: due });
    // Grace is half the period, from the shifted time.
    expect(decide(due + 1_800_000)).toMatchObject({ action: 'run', catchUp: false });
    expect(decide(due + 1_800_001)).toMatchObject({ action: 'skip', reason: 'misfire' });
  });

  it('refuses bad windows with the field, the value and the limit', () => {
    for (const bad of ['-5m', 'soon', '5x', '1.5', -1, 2.5]) expect(() => parseJitter(bad), String(bad)).toThrow(ScheduleInputError);
    expect(parseJitter('0')).toBe(0);
    expect(parseJitter('90')).toBe(90);
    expect(parseJitter('1h30m')).toBe(5400);
    const every = parseSchedule('every 10m', { tz: 'UTC', now: 0, minIntervalSeconds: 60 });
    expect(() => withJitter(every, 'c0ffee000001', 600)).toThrow(
      /`jitter` 10m must be less than 10m, the shortest time between two fires of "every 10m"/,
    );
    expect(withJitter(every, 'c0ffee000001', 599).kind).toBe('interval');
    const cron = parseSchedule('0 9,10 * * *', { tz: 'UTC', now: 0, minIntervalSeconds: 60 });
    expect(() => withJitter(cron, 'c0ffee000001', 3600)).toThrow(/less than 1h/);
    const once = parseSchedule('in 30m', { tz: 'UTC', now: 0, minIntervalSeconds: 60 });
    expect(() => withJitter(once, 'c0ffee000001', 30)).toThrow(/only to recurring schedules/);
    try {
      withJitter(every, 'c0ffee000001', 700);
    } catch (err) {
      expect((err as ScheduleInputError).field).toBe('jitter');
    }
  });
});

describe('jittered jobs on real workers', () => {
  it('fire exactly at the previewed shifted times, once each, with two workers', async () => {
    const model = await startFakeOpenAI(); // answers `ok`
    cleanups.push(() => model.close());
    const { env, api } = setup({ 'agent.base_url': model.baseUrl });
    const job = await addShifted(
      () => api.service.add({ schedule: '*/3 * * * * *', prompt: 'jittered', repeat: 2, tz: 'UTC', jitter: '2s' }, cli),
      (id) => api.service.remove(id),
    );
    const offset = (job.schedule as { jitter: { offsetMs: number } }).jitter.offsetMs;
    // The preview a user sees (`cron next --job`) before any run, from the job's creation (on a loaded
    // machine the first fire may pass while the preview runs).
    const preview = await runCronCli(env.config, [
      'next',
      '--job',
      job.id,
      '--from',
      new Date(job.created_at).toISOString(),
      '-n',
      '2',
      '--json',
    ]);
    expect(preview.code).toBe(0);
    const expected = nextOccurrences(job.schedule, job.tz, job.created_at, 2);
    expect(JSON.parse(preview.stdout)).toEqual(expected.map(isoUtc));
    expect(job.next_run_at).toBe(expected[0]);
    for (const t of expected) expect(t % 3000).toBe(offset);
    expect(expected).toContain(await api.store.schedulerNext(job.id));

    for (let i = 0; i < 2; i++) {
      const w = await startCronWorker(env.config, { concurrency: 4 });
      cleanups.push(() => w.close());
    }
    await waitFor(async () => (await api.store.get(job.id))?.state === 'completed', 15_000, 'jittered job completed');
    const runs = (await api.store.runs(job.id, 100)).sort((a, b) => a.due_at - b.due_at);
    expect(runs.map((r) => [r.due_at, r.status, r.trigger])).toEqual(expected.map((t) => [t, 'ok', 'schedule']));
    expect(new Set(runs.map((r) => r.occurrence_id)).size).toBe(2);
    for (const r of runs) expect(r.started_at!).toBeGreaterThanOrEqual(r.due_at);
  });
});

describe('hermes cron --jitter', () => {
  it('add shows the jitter, edit changes and re-arms it, bad values exit 2 and change nothing', async () => {
    const { env, api } = setup();
    const bad = await runCronCli(env.config, ['add', 'every 10m', 'x', '--jitter', '10m']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--jitter 10m must be less than 10m/);
    expect(bad.stderr).not.toMatch(/\n\s+at /);
    expect(await api.service.list({ all: true })).toEqual([]);
    for (const value of ['-1m', 'later']) {
      const r = await runCronCli(env.config, ['add', 'every 10m', 'x', '--jitter', value]);
      expect(r.code, value).toBe(2);
      expect(r.stderr, value).toContain(`--jitter must be a duration of 0 or more`);
    }
    expect((await runCronCli(env.config, ['add', 'in 1h', 'x', '--jitter', '1m'])).code).toBe(2);

    const added = await runCronCli(env.config, ['add', 'every 10m', 'report', '--name', 'spread', '--jitter', '5m', '--json']);
    expect(added.code).toBe(0);
    const view = JSON.parse(added.stdout);
    expect(view.jitter_seconds).toBe(300);
    expect(view.jitter_offset_seconds).toBe(jitterOffsetMs(view.id, 300) / 1000);
    const human = await runCronCli(env.config, ['show', 'spread']);
    expect(human.stdout).toMatch(/jitter\s+5m · this job fires/);

    const edited = await runCronCli(env.config, ['edit', 'spread', '--jitter', '2m', '--json']);
    expect(edited.code).toBe(0);
    const job = (await api.store.get(view.id))!;
    expect(job.schedule.kind === 'interval' && job.schedule.jitter).toEqual({ seconds: 120, offsetMs: jitterOffsetMs(view.id, 120) });
    expect(JSON.parse(edited.stdout).next_run_at).toBe(isoUtc(job.next_run_at!));
    expect(await api.store.schedulerNext(job.id)).toBe(job.next_run_at);
    const shown = JSON.parse((await runCronCli(env.config, ['show', 'spread', '--json'])).stdout);
    expect(shown.next_runs).toEqual([job.next_run_at!, ...nextOccurrences(job.schedule, job.tz, job.next_run_at!, 4)].map(isoUtc));
    const listed = JSON.parse((await runCronCli(env.config, ['list', '--json'])).stdout);
    expect(listed[0].next_run_at).toBe(isoUtc(job.next_run_at!));

    // A new schedule must fit the kept jitter; refused edits change nothing.
    const tooShort = await runCronCli(env.config, ['edit', 'spread', '--schedule', 'every 1m']);
    expect(tooShort.code).toBe(2);
    expect(tooShort.stderr).toMatch(/--jitter 2m must be less than 1m/);
    expect((await runCronCli(env.config, ['edit', 'spread', '--jitter', 'x'])).code).toBe(2);
    expect((await api.store.get(view.id))!.schedule).toEqual(job.schedule);

    const cleared = await runCronCli(env.config, ['edit', 'spread', '--jitter', '0', '--json']);
    expect(JSON.parse(cleared.stdout)).toMatchObject({ jitter_seconds: 0, jitter_offset_seconds: 0 });
    expect((await api.store.get(view.id))!.schedule).not.toHaveProperty('jitter');
  });
});

describe('/api jitter', () => {
  it('POST and PATCH take `jitter`; a window that does not fit is 400 and changes nothing', async () => {
    const KEY = 'jitter-api-key-1';
    const env = testEnv({ 'api_server.port': 0, 'api_server.key': KEY, 'cron.min_interval_seconds': 1 });
    cleanups.push(() => env.cleanup());
    const { call } = await startCronApiGateway(cleanups, env, KEY);
    const created = await call('POST', '/api/cron/jobs', { schedule: '0 * * * *', prompt: 'hourly', tz: 'UTC', jitter: '15m' });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const offset = jitterOffsetMs(id, 900);
    expect(created.body).toMatchObject({ jitter_seconds: 900, jitter_offset_seconds: offset / 1000 });
    const shown = await call('GET', `/api/cron/jobs/${id}`);
    for (const t of shown.body.next_runs as string[]) expect(Date.parse(t) % 3_600_000).toBe(offset);

    const tooBig = await call('POST', '/api/cron/jobs', { schedule: '0 * * * *', prompt: 'x', jitter: 3600 });
    expect(tooBig.status).toBe(400);
    expect(tooBig.body.error).toMatchObject({ param: 'jitter' });
    expect(tooBig.body.error.message).toMatch(/^`jitter` 1h must be less than 1h/);
    expect((await call('POST', '/api/cron/jobs', { schedule: '0 * * * *', prompt: 'x', jitter: -5 })).status).toBe(400);

    const patched = await call('PATCH', `/api/cron/jobs/${id}`, { jitter: 60 });
    expect(patched.status).toBe(200);
    expect(patched.body.jitter_seconds).toBe(60);
    for (const t of patched.body.next_runs as string[]) expect(Date.parse(t) % 3_600_000).toBe(jitterOffsetMs(id, 60));
    expect((await call('PATCH', `/api/cron/jobs/${id}`, { jitter: '2h' })).status).toBe(400);
    expect((await call('GET', `/api/cron/jobs/${id}`)).body.jitter_seconds).toBe(60);
    expect((await call('GET', '/api/cron/jobs')).body.data).toHaveLength(1);
  });
});
