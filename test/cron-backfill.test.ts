/**
 * Backfill (docs/CRON.md, "Backfill"): `hermes cron backfill` and `POST /api/cron/jobs/:ref/backfill` run the
 * occurrences a job's schedule had in a past window, oldest first and one at a time, each recorded once with
 * trigger `backfill`; a window over `cron.max_backfill_occurrences` is refused whole; a request made again
 * queues nothing already recorded. The occurrences come from the engine that fires jobs (DST included).
 * `--misfire all` after an outage runs each missed occurrence inside the catch-up window once, oldest first,
 * and none older.
 * Real Redis, real BullMQ workers, a real `hermes` process for the command.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe } from 'vitest';
import { isoUtc, nextOccurrences } from '../scheduler/cron/cron-engine.ts';
import { backfillOccurrences, parseBackfillWindow } from '../scheduler/cron/backfill.ts';
import { catchUpsAfter, decideOccurrence } from '../scheduler/cron/misfire.ts';
import { parseSchedule } from '../scheduler/cron/schedule-grammar.ts';
import { ScheduleInputError } from '../scheduler/errors/schedule-input-error.ts';
import { runCronCli } from './support/cron-cli.ts';
import { createTestDeps, openCronService, startCronWorker } from './support/cron-worker.ts';
import { cronOccurrenceId, cronSessionId } from '../scheduler/cron/cron-job.ts';
import { startCronApiGateway } from './support/cron-api-gateway.ts';
import { testEnv } from './support/env.ts';
import { lastUserText, startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import { sleep, waitFor } from './support/wait-for.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { cronJobFixture } from './support/record-fixtures.ts';

const DAY_MS = 86_400_000;
const root = new URL('..', import.meta.url).pathname;

let model: FakeOpenAI;
beforeAll(async () => {
  model = await startFakeOpenAI();
  // Each answer takes a moment, so runs that overlapped would show it.
  model.respond(async (req) => {
    await new Promise((r) => setTimeout(r, 150));
    return `report: ${lastUserText(req)}`;
  });
});
afterAll(async () => model.close());

function setup(cleanups: CleanUp[], overrides: Record<string, unknown> = {}) {
  const env = testEnv({ 'agent.base_url': model.baseUrl, ...overrides });
  cleanups.push(() => env.cleanup());
  const api = openCronService(env.config);
  cleanups.push(() => api.close());
  return { env, api, cli: (...args: string[]) => runCronCli(env.config, args) };
}

/** Midnight UTC of today, and the ISO text of an instant. */
const today = () => Math.floor(Date.now() / DAY_MS) * DAY_MS;
const iso = (ms: number) => new Date(ms).toISOString();

describe('hermes cron backfill', () => {
  it('runs the three past daily occurrences of a window in order, each once with trigger backfill (a real hermes process)', async ({
    cleanups,
    expect,
  }) => {
    const { env, api, cli } = setup(cleanups);
    const added = await cli('add', 'daily at 7am', 'the daily report', '--tz', 'UTC', '--json');
    expect(added.code).toBe(0);
    const job = JSON.parse(added.stdout) as { id: string; next_run_at: string };
    const worker = await startCronWorker(env.config, { concurrency: 8 });
    cleanups.push(() => worker.close());
    const from = today() - 3 * DAY_MS;
    const run = promisify(execFile);
    const out = await run(process.execPath, ['cli/hermes.mjs', 'cron', 'backfill', job.id, '--from', iso(from), '--to', iso(today())], {
      cwd: root,
      env: { ...process.env, ...env.childEnv, HERMES_LOG_LEVEL: 'silent' },
    });
    const due = [from + 7 * 3_600_000, from + DAY_MS + 7 * 3_600_000, from + 2 * DAY_MS + 7 * 3_600_000];
    expect(out.stdout).toContain(`Queued 3 backfilled occurrences of ${job.id}`);
    await waitFor(async () => (await api.store.runs(job.id, 100)).length >= 3 || undefined, 30_000, 'three backfilled runs');
    const runs = (await api.store.runs(job.id, 100)).reverse();
    expect(runs.map((r) => r.due_at)).toEqual(due);
    for (const r of runs) expect(r).toMatchObject({ trigger: 'backfill', status: 'ok', output: 'report: the daily report', late: false });
    // Oldest first, one after another (the worker could have run all three at once).
    for (let i = 1; i < runs.length; i++) expect(runs[i]!.started_at!).toBeGreaterThanOrEqual(runs[i - 1]!.finished_at!);
    // The schedule did not move: a backfill is no scheduled occurrence.
    const after = (await api.store.get(job.id))!;
    expect(after).toMatchObject({ last_due_at: null, state: 'scheduled', repeat: { completed: 0 } });
    expect(isoUtc(after.next_run_at!)).toBe(job.next_run_at);
    // `cron runs` shows the trigger.
    const listed = await cli('runs', job.id);
    expect(listed.stdout.split('\n').filter((l) => l.includes('backfill'))).toHaveLength(3);
  });

  it('a request made again, or twice at once, runs no occurrence twice', async ({ cleanups, expect }) => {
    const { env, api, cli } = setup(cleanups);
    const job = await api.service.add(
      { schedule: 'daily at 9am', prompt: 'count me', tz: 'UTC' },
      { origin: { surface: 'cli' }, trusted: true },
    );
    const window = ['--from', iso(today() - 3 * DAY_MS), '--to', iso(today()), '--json'];
    // Twice at once before any worker runs: both name the same three occurrences.
    const [a, b] = await Promise.all([cli('backfill', job.id, ...window), cli('backfill', job.id, ...window)]);
    expect([a.code, b.code]).toEqual([0, 0]);
    expect((JSON.parse(a.stdout) as { queued: string[] }).queued).toHaveLength(3);
    const seen = model.requests.length;
    const worker = await startCronWorker(env.config, { concurrency: 8 });
    cleanups.push(() => worker.close());
    await waitFor(async () => (await api.store.runs(job.id, 100)).length >= 3 || undefined, 30_000, 'three backfilled runs');
    // Once they are recorded, the same request queues nothing and says so.
    const again = await cli('backfill', job.id, ...window);
    expect(JSON.parse(again.stdout)).toMatchObject({ queued: [], already_recorded: (JSON.parse(a.stdout) as { queued: string[] }).queued });
    await waitFor(async () => (await api.queues.ticks.getActiveCount()) === 0 || undefined, 15_000, 'no run in flight');
    const runs = await api.store.runs(job.id, 100);
    expect(runs).toHaveLength(3);
    expect(new Set(runs.map((r) => r.occurrence_id)).size).toBe(3);
    expect(model.requests.slice(seen).filter((r) => lastUserText(r) === 'count me')).toHaveLength(3);
  });

  it('refuses a window over cron.max_backfill_occurrences whole, naming the count and the bound (CLI exit 2, /api 400)', async ({
    cleanups,
    expect,
  }) => {
    const key = 'k'.repeat(32);
    const { env, api, cli } = setup(cleanups, { 'cron.max_backfill_occurrences': 2, 'api_server.port': 0, 'api_server.key': key });
    const job = await api.service.add({ schedule: 'daily at 7am', prompt: 'x', tz: 'UTC' }, { origin: { surface: 'cli' }, trusted: true });
    const before = await api.queues.ticks.getJobCounts();
    const r = await cli('backfill', job.id, '--from', iso(today() - 3 * DAY_MS), '--to', iso(today()));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/has 3 occurrences, over the bound of 2 \(cron\.max_backfill_occurrences\); nothing was queued/);
    const { call } = await startCronApiGateway(cleanups, env, key);
    const res = await call('POST', `/api/cron/jobs/${job.id}/backfill`, { from: iso(today() - 3 * DAY_MS), to: iso(today()) });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toMatch(/has 3 occurrences, over the bound of 2/);
    expect(await api.queues.ticks.getJobCounts()).toEqual(before);
    // Within the bound, the route queues them.
    const ok = await call('POST', `/api/cron/jobs/${job.id}/backfill`, { from: iso(today() - 2 * DAY_MS), to: iso(today()) });
    expect(ok.status).toBe(202);
    expect(ok.body.backfill).toMatchObject({
      queued: [isoUtc(today() - 2 * DAY_MS + 7 * 3_600_000), isoUtc(today() - DAY_MS + 7 * 3_600_000)],
    });
  });
});

describe('the backfill window (pure)', () => {
  const now = Date.UTC(2026, 2, 20, 12);
  const at2_30 = parseSchedule('30 2 * * *', { tz: 'America/New_York', now, minIntervalSeconds: 60 });

  it('takes the occurrences the engine fires, across a DST change in the job zone', ({ expect }) => {
    const window = parseBackfillWindow({ from: '2026-03-07', to: '2026-03-10' }, 'America/New_York', now);
    // Without an offset the ends are wall times in the job's zone.
    expect(window).toEqual({ fromMs: Date.UTC(2026, 2, 7, 5), toMs: Date.UTC(2026, 2, 10, 4), clipped: false });
    const times = backfillOccurrences(at2_30, 'America/New_York', window, 100);
    expect(times).toEqual(nextOccurrences(at2_30, 'America/New_York', window.fromMs - 1, 3));
    expect(times).toHaveLength(3);
  });

  it('clips a --to in the future to now, and refuses a window that starts after it ends', ({ expect }) => {
    expect(parseBackfillWindow({ from: '2026-03-19T00:00:00Z', to: '2027-01-01T00:00:00Z' }, 'UTC', now)).toEqual({
      fromMs: Date.UTC(2026, 2, 19),
      toMs: now,
      clipped: true,
    });
    expect(parseBackfillWindow({ from: '2026-03-19T00:00:00Z' }, 'UTC', now).toMs).toBe(now);
    expect(() => parseBackfillWindow({ from: '2026-03-21T00:00:00Z' }, 'UTC', now)).toThrow(/is in the future/);
    expect(() => parseBackfillWindow({ from: '2026-03-19T00:00:00Z', to: '2026-03-18T00:00:00Z' }, 'UTC', now)).toThrow(/is after `to`/);
    expect(() => parseBackfillWindow({ from: 'yesterday' }, 'UTC', now)).toThrow(ScheduleInputError);
  });
});

describe('--misfire all after an outage (docs/CRON.md, "Backfill"; Temporal\'s catchup window)', () => {
  it('runs each missed occurrence inside the catch-up window once, oldest first, and none older', async ({ cleanups, expect }) => {
    // Every 2 s, a grace of 1.5 s, a catch-up window of 8 s. No worker runs until 11 s after the anchor: the
    // occurrences at +2 … +10 s are missed. The worker decides when it picks up the one BullMQ holds (+2), some
    // seconds d after its start: +2 is then 9 s + d late, beyond the window whatever d; +8 is 3 s + d late, past the
    // grace and inside the window while d ≤ 5 s (a busy machine's slow start); +4 and +6 may go either way.
    // Without the prefetch lead, so that BullMQ holds only +2 (with a lead of 1 s the late pick-up also queues +12
    // on its own, `skippedByLead`, which then races the catch-ups for the job's lock).
    const { env, api } = setup(cleanups, {
      'cron.min_interval_seconds': 1,
      'cron.misfire_grace_min_seconds': 1.5,
      'cron.prefetch_lead_ms': 0,
    });
    const cli = { origin: { surface: 'cli' as const }, trusted: true };
    const job = await api.service.add({ schedule: 'every 2s', prompt: 'catch up', misfire: 'all', catchup_window: '8s' }, cli);
    expect(job).toMatchObject({ misfire: 'all', catchup_window_seconds: 8 });
    const anchor = job.created_at;
    await sleep(anchor + 11_000 - Date.now()); // the outage itself
    const restartedAt = Date.now();
    const worker = await startCronWorker(env.config, { concurrency: 8 });
    cleanups.push(() => worker.close());
    const at = (s: number) => anchor + s * 1000;
    const byDue = async () => (await api.store.runs(job.id, 1000)).sort((a, b) => a.due_at - b.due_at);
    await waitFor(
      async () => {
        const runs = await byDue();
        return [8, 10].every((s) => runs.some((r) => r.due_at === at(s) && r.status === 'ok')) || undefined;
      },
      20_000,
      'the missed occurrences inside the window',
    );
    await api.service.pause(job.id);
    await waitFor(async () => (await api.queues.ticks.getActiveCount()) === 0 || undefined, 15_000, 'no run in flight');
    const runs = await byDue();
    const seen = runs.map((r) => `${(r.due_at - anchor) / 1000}s ${r.trigger} ${r.status} ${r.reason ?? ''} late ${r.lateness_ms}`);
    // Each occurrence once at most: one record per due time.
    expect(new Set(runs.map((r) => r.due_at)).size).toBe(runs.length);
    // Older than the window: recorded skipped, not run.
    const said = seen.join('; ');
    expect(
      runs.find((r) => r.due_at === at(2)),
      said,
    ).toMatchObject({ status: 'skipped', reason: 'misfire', started_at: null });
    expect(
      runs.find((r) => r.due_at === at(8)),
      said,
    ).toMatchObject({ status: 'ok', trigger: 'catch-up', late: true });
    // +10 s ran: 1 s plus the worker's start late, on either side of the 1.5 s grace (so `late` either way).
    expect(
      runs.find((r) => r.due_at === at(10)),
      said,
    ).toMatchObject({ status: 'ok' });
    // Nothing ran later than the window allows (each queued one is decided again when it starts).
    for (const r of runs.filter((x) => x.status === 'ok')) expect(r.started_at! - r.due_at).toBeLessThanOrEqual(8_000 + 500);
    // The missed ones ran oldest first, one after another, after the restart.
    const missed = runs.filter((r) => r.status === 'ok' && r.due_at <= at(10));
    expect(missed[0]!.started_at!).toBeGreaterThanOrEqual(restartedAt);
    for (let i = 1; i < missed.length; i++) expect(missed[i]!.started_at!).toBeGreaterThanOrEqual(missed[i - 1]!.finished_at!);
  });

  it('a catch-up that finds the next occurrence running waits for it, whatever --overlap says, and then runs', async ({
    cleanups,
    expect,
  }) => {
    const { env, api } = setup(cleanups);
    const cli = { origin: { surface: 'cli' as const }, trusted: true };
    const job = await api.service.add({ schedule: 'every 1h', prompt: 'catch up', misfire: 'all', overlap: 'skip' }, cli);
    const record = (await api.store.get(job.id))!;
    // The occurrence after the outage runs: its claim made, the job's turn lock held by its BullMQ job.
    const running = createTestDeps(env.config);
    cleanups.push(() => running.close());
    const next = { occurrenceId: cronOccurrenceId(job.id, Date.now(), 'schedule'), holder: 'the-next-occurrence' };
    const lock = (await running.lock.acquire(cronSessionId(job.id), next.holder))!;
    const claim = await api.store.claim({ jobId: job.id, ...next, generation: record.generation, manual: false, dueAt: Date.now() });
    expect(claim.status).toBe('ok');
    // A missed occurrence queued behind one that is done (its job gone): it comes to the running one at once.
    const missedAt = Date.now() - 10 * 60_000;
    await api.store.enqueueCatchUps(record, { occurrenceId: 'cron:gone', queueJobId: 'gone' }, [missedAt]);
    const worker = await startCronWorker(env.config);
    cleanups.push(() => worker.close());
    let picked = 0;
    worker.worker.on('active', () => picked++);
    await waitFor(() => picked >= 2 || undefined, 20_000, 'the catch-up put back and picked up again');
    expect(await api.store.runs(job.id, 10)).toEqual([]);
    await lock.release();
    const [run] = await waitFor(
      async () => ((await api.store.runs(job.id, 10)).length > 0 ? api.store.runs(job.id, 10) : undefined),
      20_000,
      'the catch-up run',
    );
    expect(run).toMatchObject({ due_at: missedAt, status: 'ok', late: true });
  });

  it('finds the missed occurrences in the window, the newest within the bound (pure)', ({ expect }) => {
    const schedule = parseSchedule('daily at 7am', { tz: 'UTC', now: 0, minIntervalSeconds: 60 });
    const d1 = Date.UTC(2026, 2, 1, 7);
    const now = d1 + 3 * DAY_MS + DAY_MS / 2;
    const days = (n: number) => d1 + n * DAY_MS;
    const found = (windowMs: number, max: number) => catchUpsAfter({ schedule, tz: 'UTC', dueAt: d1, now, windowMs, max });
    expect(found(10 * DAY_MS, 100)).toEqual({ queue: [days(1), days(2), days(3)], runsFirst: true });
    expect(found(2 * DAY_MS, 100)).toEqual({ queue: [days(2), days(3)], runsFirst: false });
    expect(found(10 * DAY_MS, 2)).toEqual({ queue: [days(2), days(3)], runsFirst: false });
    expect(found(DAY_MS / 4, 100)).toEqual({ queue: [], runsFirst: false });
  });

  it('decides a missed occurrence by the window, and never coalesces a queued catch-up (pure)', ({ expect }) => {
    const schedule = parseSchedule('every 1h', { tz: 'UTC', now: 0, minIntervalSeconds: 60 });
    const job = {
      ...cronJobFixture({ schedule, misfire: 'all', now: 0 }),
      last_due_at: 10 * 3_600_000,
    };
    const decide = (dueAt: number, now: number, queuedCatchUp = false) =>
      decideOccurrence({
        job,
        dueAt,
        generation: job.generation,
        trigger: 'schedule',
        periodMs: 3_600_000,
        now,
        grace: { graceMinMs: 120_000, graceMaxMs: 7_200_000 },
        catchUpWindowMs: 2 * 3_600_000,
        queuedCatchUp,
      });
    const due = 11 * 3_600_000;
    expect(decide(due, due + 3_600_000)).toMatchObject({ action: 'run', catchUp: true });
    expect(decide(due, due + 3 * 3_600_000)).toMatchObject({ action: 'skip', reason: 'misfire' });
    expect(decide(9 * 3_600_000, due)).toEqual({ action: 'drop', reason: 'coalesced' });
    expect(decide(9 * 3_600_000, due, true)).toMatchObject({ action: 'run', catchUp: true });
  });
});
