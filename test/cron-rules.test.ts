/**
 * The cron rules of docs/DESIGN.md §7 as pure functions with an injected clock: misfire
 * (grace window, once, skip, never before due), occurrence coalescing after an
 * outage (the repeat strategy, the record's next run, the worker's decision),
 * and `--repeat` accounting of runs, skips and manual runs. No Redis, no
 * BullMQ: cron-semantics.test.ts proves each rule's wiring end to end once.
 * Overlap decisions are in cron-gate.test.ts, jitter offsets in cron-jitter.test.ts,
 * DST cases in cron-dst.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { isoUtc, nextOccurrence, periodAt } from '../scheduler/cron/cron-engine.ts';
import { AFTER_ONLY_SCHEDULE } from '../scheduler/cron/cron-after.ts';
import { configDefaults } from '../scheduler/config/config.ts';
import { applyRun as applyRunWith, pauseCronJob, resumeCronJob, type CronJob, type CronRun } from '../scheduler/cron/cron-job.ts';
import { catchUpsAfter, decideOccurrence, graceWindowMs, ON_TIME_TOLERANCE_MS, type OccurrenceTrigger } from '../scheduler/cron/misfire.ts';
import {
  cronRepeatStrategy,
  decodePattern,
  encodePattern,
  leadFor,
  patternLead,
  skippedByLead,
} from '../scheduler/cron/repeat-strategy.ts';
import { parseSchedule } from '../scheduler/cron/schedule-grammar.ts';
import { cronJobFixture } from './support/record-fixtures.ts';
import { CRON_TICK_JOB_NAME, cronTickData, isCronTick, type CronTickData } from '../scheduler/cron/cron-store.ts';

/** `applyRun` with `cron.max_consecutive_failures` from the config's defaults unless a test sets it. */
const applyRun = (job: CronJob, run: CronRun, pickedAt: number, now: number, options: Partial<Parameters<typeof applyRunWith>[4]> = {}) =>
  applyRunWith(job, run, pickedAt, now, { maxConsecutiveFailures: configDefaults().cron.max_consecutive_failures, ...options });

const T0 = Date.parse('2026-06-01T10:00:00Z');
const MIN = 60_000;
const GRACE = { graceMinMs: 120_000, graceMaxMs: 7_200_000 };

function jobOf(
  schedule: string,
  over: Partial<Pick<CronJob, 'misfire' | 'overlap'>> & { repeat?: number; tz?: string; now?: number } = {},
): CronJob {
  const { repeat = null, tz = 'UTC', now = T0, ...policy } = over;
  return cronJobFixture({ schedule: parseSchedule(schedule, { tz, now, minIntervalSeconds: 60 }), tz, repeat, now, ...policy });
}

/** The worker's decision for the occurrence due at `dueAt` of `job`, on the clock `now`. */
function decide(job: CronJob | null, dueAt: number, now: number, trigger: OccurrenceTrigger = 'schedule') {
  return decideOccurrence({
    job,
    dueAt,
    now,
    trigger,
    generation: job?.generation ?? 1,
    grace: GRACE,
    periodMs: job ? periodAt(job.schedule, job.tz, dueAt) : undefined,
  });
}

function runOf(
  job: CronJob,
  dueAt: number,
  f: { status?: CronRun['status']; trigger?: CronRun['trigger']; startedAt?: number } = {},
): CronRun {
  const status = f.status ?? 'ok';
  const startedAt = status === 'skipped' ? null : (f.startedAt ?? dueAt);
  return {
    occurrence_id: `cron:${job.id}:${dueAt}`,
    job_id: job.id,
    trigger: f.trigger ?? 'schedule',
    status,
    reason: status === 'skipped' ? 'overlap' : null,
    attempts: 1,
    due_at: dueAt,
    started_at: startedAt,
    finished_at: (startedAt ?? dueAt) + 10,
    lateness_ms: Math.max(0, (startedAt ?? dueAt) - dueAt),
    late: false,
    output: status === 'ok' ? 'fine' : null,
    error: status === 'error' ? 'exit 1' : null,
    silent: false,
    deliveries: [],
    worker_id: 'w',
  };
}

describe('misfire: grace window, once, skip (docs/DESIGN.md §7 Misfires)', () => {
  it('the grace window is half the period at the occurrence, clamped to [min, max]; a one-shot gets the max', () => {
    expect(graceWindowMs(10 * MIN, GRACE)).toBe(5 * MIN);
    expect(graceWindowMs(MIN, GRACE)).toBe(120_000); // half is 30 s: the lower clamp
    expect(graceWindowMs(24 * 60 * MIN, GRACE)).toBe(7_200_000); // half is 12 h: the upper clamp
    expect(graceWindowMs(undefined, GRACE)).toBe(7_200_000);
    // The period is the schedule's at that occurrence: weekdays at 9 → 24 h on Tuesday, 72 h from Friday.
    const weekdays = jobOf('weekdays at 9am');
    const friday = Date.parse('2026-06-05T09:00:00Z');
    expect(periodAt(weekdays.schedule, 'UTC', friday)).toBe(72 * 60 * MIN);
  });

  it('nothing runs before it is due, whatever the policy; due exactly now runs on time', () => {
    for (const misfire of ['once', 'skip'] as const) {
      const job = jobOf('every 10m', { misfire });
      const due = job.next_run_at!;
      expect(due).toBe(T0 + 10 * MIN);
      expect(decide(job, due, due - 1)).toEqual({ action: 'wait', untilMs: due });
      expect(decide(job, due, T0)).toEqual({ action: 'wait', untilMs: due });
      expect(decide(job, due, due)).toEqual({ action: 'run', latenessMs: 0, late: false, catchUp: false });
      expect(decide(job, due, due - 1, 'manual')).toEqual({ action: 'wait', untilMs: due });
    }
  });

  it('within the grace window a late occurrence runs, marked late beyond the on-time tolerance', () => {
    const job = jobOf('every 10m', { misfire: 'skip' });
    const due = job.next_run_at!;
    expect(decide(job, due, due + ON_TIME_TOLERANCE_MS)).toEqual({
      action: 'run',
      latenessMs: ON_TIME_TOLERANCE_MS,
      late: false,
      catchUp: false,
    });
    expect(decide(job, due, due + ON_TIME_TOLERANCE_MS + 1)).toEqual({
      action: 'run',
      latenessMs: ON_TIME_TOLERANCE_MS + 1,
      late: true,
      catchUp: false,
    });
    expect(decide(job, due, due + 5 * MIN)).toEqual({ action: 'run', latenessMs: 5 * MIN, late: true, catchUp: false });
  });

  it('beyond the grace window: --misfire once runs it as the catch-up, --misfire skip records a skip', () => {
    const once = jobOf('every 10m', { misfire: 'once' });
    const skip = jobOf('every 10m', { misfire: 'skip' });
    const due = once.next_run_at!;
    const at = due + 5 * MIN + 1;
    expect(decide(once, due, at)).toEqual({ action: 'run', latenessMs: 5 * MIN + 1, late: true, catchUp: true });
    expect(decide(skip, due, at)).toEqual({ action: 'skip', reason: 'misfire', latenessMs: 5 * MIN + 1, graceMs: 5 * MIN });
    // A manual run is due when requested: never a misfire.
    expect(decide(skip, due, due + 10 * 60 * MIN, 'manual')).toEqual({
      action: 'run',
      latenessMs: 10 * 60 * MIN,
      late: false,
      catchUp: false,
    });
  });

  it('paused, completed, failed, removed and edited jobs drop their occurrences; a manual run of a paused job still runs', () => {
    const job = jobOf('every 10m');
    const due = job.next_run_at!;
    const late = due + 10 * 60 * MIN;
    expect(decide(null, due, late)).toEqual({ action: 'drop', reason: 'removed' });
    expect(decide({ ...job, state: 'paused' }, due, late)).toEqual({ action: 'drop', reason: 'paused' });
    expect(decide({ ...job, state: 'completed' }, due, late)).toEqual({ action: 'drop', reason: 'completed' });
    expect(decide({ ...job, state: 'error' }, due, late)).toEqual({ action: 'drop', reason: 'completed' });
    expect(
      decideOccurrence({
        job: { ...job, generation: 2 },
        dueAt: due,
        generation: 1,
        trigger: 'schedule',
        periodMs: 10 * MIN,
        now: late,
        grace: GRACE,
      }),
    ).toEqual({ action: 'drop', reason: 'stale' });
    expect(decide({ ...job, state: 'paused' }, due, due + 1, 'manual')).toMatchObject({ action: 'run', catchUp: false });
  });

  it('a paused job never catches up: resume arms the first occurrence after the resume, in a new generation', () => {
    const job = jobOf('every 10m');
    const paused = pauseCronJob(job, T0 + MIN)!;
    expect(paused).toMatchObject({ state: 'paused', next_run_at: null, generation: job.generation + 1 });
    const resumed = resumeCronJob(paused, T0 + 35 * MIN)!;
    expect(resumed).toMatchObject({ state: 'scheduled', next_run_at: T0 + 40 * MIN, generation: job.generation + 2 });
    // An occurrence of the old generation that was already queued is dropped.
    expect(
      decideOccurrence({
        job: resumed,
        dueAt: T0 + 10 * MIN,
        generation: job.generation,
        trigger: 'schedule',
        periodMs: 10 * MIN,
        now: T0 + 36 * MIN,
        grace: GRACE,
      }),
    ).toEqual({ action: 'drop', reason: 'stale' });
  });
});

describe('occurrence coalescing after an outage', () => {
  it('the repeat strategy makes the next job the first occurrence after the pick-up: an outage leaves one overdue job', () => {
    const job = jobOf('every 10m');
    const opts = { pattern: encodePattern(job.schedule), tz: job.tz };
    const first = job.next_run_at!; // T0 + 10m, the job BullMQ holds during the outage
    const pickedUp = T0 + 47 * MIN; // a worker starts 37 minutes after it was due
    expect(cronRepeatStrategy(Math.max(first, pickedUp), opts)).toBe(T0 + 50 * MIN);
    // No job is ever made for 20m, 30m or 40m: they coalesce into the overdue one.
    expect(cronRepeatStrategy(first, opts)).toBe(T0 + 20 * MIN);
    // A cron expression in a zone: the same, in wall time.
    const daily = jobOf('0 8 * * *', { tz: 'Europe/Warsaw' });
    const dailyOpts = { pattern: encodePattern(daily.schedule), tz: 'Europe/Warsaw' };
    expect(isoUtc(cronRepeatStrategy(Date.parse('2026-06-04T12:00:00Z'), dailyOpts)!)).toBe('2026-06-05T06:00:00Z');
  });

  it('the record after the overdue run announces the same next occurrence; an occurrence at or before the last handled one is dropped', () => {
    const job = jobOf('every 10m', { misfire: 'once' });
    const first = job.next_run_at!;
    const pickedUp = T0 + 47 * MIN;
    const decision = decide(job, first, pickedUp);
    expect(decision).toEqual({ action: 'run', latenessMs: 37 * MIN, late: true, catchUp: true });
    const after = applyRun(job, runOf(job, first, { trigger: 'catch-up', startedAt: pickedUp }), pickedUp, pickedUp + 5);
    expect(after).toMatchObject({ last_due_at: first, next_run_at: T0 + 50 * MIN, state: 'scheduled' });
    expect(after.next_run_at).toBe(cronRepeatStrategy(pickedUp, { pattern: encodePattern(job.schedule), tz: job.tz }));
    // The overdue job coming again (a duplicate job, a retry) never makes a second catch-up.
    expect(decide(after, first, pickedUp + 1000)).toEqual({ action: 'drop', reason: 'coalesced' });
    expect(decide(after, T0 + 50 * MIN, T0 + 50 * MIN)).toMatchObject({ action: 'run', catchUp: false });
    // A manual run is not coalesced.
    expect(decide(after, first, pickedUp + 1000, 'manual')).toMatchObject({ action: 'run' });
  });

  it('a skipped occurrence advances the schedule like a run', () => {
    const job = jobOf('every 10m', { misfire: 'skip' });
    const first = job.next_run_at!;
    const after = applyRun(job, runOf(job, first, { status: 'skipped' }), T0 + 47 * MIN, T0 + 47 * MIN);
    expect(after).toMatchObject({ last_due_at: first, next_run_at: T0 + 50 * MIN, last_status: 'skipped', last_run_at: null });
  });
});

describe('--repeat N accounting', () => {
  it('runs count, skipped and manual runs do not; the Nth run completes the job', () => {
    let job = jobOf('every 10m', { repeat: 2 });
    const at = (n: number) => T0 + n * 10 * MIN;
    job = applyRun(job, runOf(job, at(1), { status: 'skipped' }), at(1), at(1));
    expect(job.repeat).toEqual({ times: 2, completed: 0 });
    job = applyRun(job, runOf(job, at(1) + 5, { trigger: 'manual' }), at(1) + 5, at(1) + 5);
    expect(job.repeat).toEqual({ times: 2, completed: 0 });
    expect(job.next_run_at).toBe(at(2)); // a manual run does not move the next run (F12)
    job = applyRun(job, runOf(job, at(2), { status: 'error' }), at(2), at(2));
    expect(job).toMatchObject({ repeat: { times: 2, completed: 1 }, state: 'scheduled', next_run_at: at(3) });
    job = applyRun(job, runOf(job, at(3)), at(3), at(3));
    expect(job).toMatchObject({ repeat: { times: 2, completed: 2 }, state: 'completed', next_run_at: null });
    // A run that was in flight when the job completed is recorded, never re-arms it.
    job = applyRun(job, runOf(job, at(4)), at(4), at(4));
    expect(job).toMatchObject({ state: 'completed', next_run_at: null });
  });

  it('a one-shot completes after its run, or ends in error when the run failed', () => {
    const once = jobOf('in 5m');
    const due = once.next_run_at!;
    expect(applyRun(once, runOf(once, due), due, due)).toMatchObject({ state: 'completed', next_run_at: null });
    expect(applyRun(once, runOf(once, due, { status: 'error' }), due, due)).toMatchObject({
      state: 'error',
      next_run_at: null,
      failure_streak: 1,
    });
  });
});

describe('misfire near misses: every path of the rule at its edges', () => {
  it('a run after another job (--after) is dropped while its job is paused, completed or in error, whatever its generation', () => {
    const job = jobOf('every 10m');
    const due = T0 + 10 * MIN;
    expect(decide({ ...job, state: 'paused' }, due, due, 'after')).toEqual({ action: 'drop', reason: 'paused' });
    expect(decide({ ...job, state: 'completed' }, due, due, 'after')).toEqual({ action: 'drop', reason: 'completed' });
    expect(decide({ ...job, state: 'error' }, due, due, 'after')).toEqual({ action: 'drop', reason: 'completed' });
    expect(decide({ ...job, state: 'error' }, due, due)).toEqual({ action: 'drop', reason: 'completed' });
    // Not the schedule's generation, long after it was due, and before the last handled occurrence: it still runs, on time.
    const edited = { ...job, generation: job.generation + 1, last_due_at: due + MIN };
    expect(decide(edited, due, due + 3 * 60 * MIN, 'after')).toEqual({
      action: 'run',
      latenessMs: 3 * 60 * MIN,
      late: false,
      catchUp: false,
    });
    expect(decide(edited, due + 1, due, 'after')).toEqual({ action: 'wait', untilMs: due + 1 });
  });

  it('--misfire all: lateness equal to the catch-up window runs as a catch-up, one ms more is skipped; no window, no bound', () => {
    const job = jobOf('every 10m', { misfire: 'all' });
    const due = T0 + 10 * MIN;
    const all = (now: number, catchUpWindowMs?: number) =>
      decideOccurrence({
        job,
        dueAt: due,
        now,
        trigger: 'schedule',
        generation: job.generation,
        grace: GRACE,
        periodMs: 10 * MIN,
        catchUpWindowMs,
      });
    expect(all(due + 30 * MIN, 30 * MIN)).toEqual({ action: 'run', latenessMs: 30 * MIN, late: true, catchUp: true });
    expect(all(due + 30 * MIN + 1, 30 * MIN)).toEqual({ action: 'skip', reason: 'misfire', latenessMs: 30 * MIN + 1, graceMs: 5 * MIN });
    expect(all(due + 30 * 24 * 60 * MIN)).toMatchObject({ action: 'run', catchUp: true });
    // The window bounds --misfire all only: --misfire once runs its one catch-up however late.
    const once = jobOf('every 10m', { misfire: 'once' });
    expect(
      decideOccurrence({
        job: once,
        dueAt: due,
        now: due + 60 * MIN,
        trigger: 'schedule',
        generation: once.generation,
        grace: GRACE,
        periodMs: 10 * MIN,
        catchUpWindowMs: 30 * MIN,
      }),
    ).toMatchObject({ action: 'run', catchUp: true });
    // A catch-up queued by --misfire all is not coalesced by a later occurrence handled first.
    const handled = { ...job, last_due_at: due + 20 * MIN };
    const queued = (queuedCatchUp: boolean) =>
      decideOccurrence({
        job: handled,
        dueAt: due,
        now: due + 25 * MIN,
        trigger: 'schedule',
        generation: job.generation,
        grace: GRACE,
        periodMs: 10 * MIN,
        catchUpWindowMs: 30 * MIN,
        queuedCatchUp,
      });
    expect(queued(true)).toEqual({ action: 'run', latenessMs: 25 * MIN, late: true, catchUp: true });
    expect(queued(false)).toEqual({ action: 'drop', reason: 'coalesced' });
  });

  it("catchUpsAfter: occurrences at exactly the window's start and at now are in; the newest max are kept; the overdue one runs only inside", () => {
    const job = jobOf('every 10m', { misfire: 'all' });
    const dueAt = T0 + 10 * MIN;
    const after = (now: number, windowMs: number, max = 100) =>
      catchUpsAfter({ schedule: job.schedule, tz: 'UTC', dueAt, now, windowMs, max });
    // Window starts at 30m exactly: 30m and 40m (= now) are queued; the overdue 10m is older, so it is not run.
    expect(after(T0 + 40 * MIN, 10 * MIN)).toEqual({ queue: [T0 + 30 * MIN, T0 + 40 * MIN], runsFirst: false });
    // Window starts at the overdue occurrence itself: it runs first, then every later one.
    expect(after(T0 + 40 * MIN, 30 * MIN)).toEqual({ queue: [T0 + 20 * MIN, T0 + 30 * MIN, T0 + 40 * MIN], runsFirst: true });
    // One ms less of window: the overdue one is out, 20m is in.
    expect(after(T0 + 40 * MIN, 30 * MIN - 1)).toEqual({ queue: [T0 + 20 * MIN, T0 + 30 * MIN, T0 + 40 * MIN], runsFirst: false });
    // At most `max`: the newest two of 10m…40m.
    expect(after(T0 + 40 * MIN, 30 * MIN, 2)).toEqual({ queue: [T0 + 30 * MIN, T0 + 40 * MIN], runsFirst: false });
    expect(after(T0 + 40 * MIN, 30 * MIN, 4)).toEqual({ queue: [T0 + 20 * MIN, T0 + 30 * MIN, T0 + 40 * MIN], runsFirst: true });
    // A one-shot has nothing after it.
    const once = jobOf('in 5m', { misfire: 'all' });
    const onceDue = once.next_run_at!;
    expect(catchUpsAfter({ schedule: once.schedule, tz: 'UTC', dueAt: onceDue, now: onceDue + MIN, windowMs: 2 * MIN, max: 5 })).toEqual({
      queue: [],
      runsFirst: true,
    });
  });
});

describe("the repeat strategy's pattern: every schedule kind round-trips, a bad one stops the scheduler", () => {
  it('interval and cron patterns, with and without jitter, decode to what was encoded', () => {
    const interval = { kind: 'interval' as const, expression: 'every 10m', display: 'every 10m', everyMs: 600_000, anchorMs: 1_234 };
    expect(encodePattern(interval)).toBe('every:600000:1234');
    expect(decodePattern('every:600000:1234')).toMatchObject({ kind: 'interval', everyMs: 600_000, anchorMs: 1_234 });
    const jittered = { ...interval, jitter: { seconds: 30, offsetMs: 17_000 } };
    expect(encodePattern(jittered)).toBe('jitter:30:17000:every:600000:1234');
    expect(decodePattern('jitter:30:17000:every:600000:1234')).toMatchObject({
      kind: 'interval',
      everyMs: 600_000,
      anchorMs: 1_234,
      jitter: { seconds: 30, offsetMs: 17_000 },
    });
    const cron = { kind: 'cron' as const, expression: '0 8 * * *', display: '0 8 * * *' };
    expect(encodePattern(cron)).toBe('0 8 * * *');
    expect(encodePattern({ ...cron, jitter: { seconds: 5, offsetMs: 2_000 } })).toBe('jitter:5:2000:0 8 * * *');
    expect(decodePattern('jitter:5:2000:0 8 * * *')).toEqual({ ...cron, jitter: { seconds: 5, offsetMs: 2_000 } });
    expect(decodePattern('0 8 * * *')).toEqual(cron);
  });

  it('one-shots and --after jobs have no pattern; a malformed jitter pattern is refused', () => {
    expect(() => encodePattern(jobOf('in 5m').schedule)).toThrow('once cron jobs have no job scheduler');
    expect(() => encodePattern(AFTER_ONLY_SCHEDULE)).toThrow('after cron jobs have no job scheduler');
    expect(() => decodePattern('jitter:x:1:0 8 * * *')).toThrow('bad jitter pattern jitter:x:1:0 8 * * *');
    expect(() => decodePattern('jitter:5:1')).toThrow('bad jitter pattern');
  });

  it('cronRepeatStrategy: the first time strictly after millis, in the zone given, else UTC; none without a valid pattern', () => {
    const at = Date.parse('2026-06-04T12:00:00Z');
    expect(cronRepeatStrategy(at, { pattern: '0 8 * * *' })).toBe(Date.parse('2026-06-05T08:00:00Z'));
    expect(cronRepeatStrategy(at, { pattern: '0 8 * * *', tz: 'Europe/Warsaw' })).toBe(Date.parse('2026-06-05T06:00:00Z'));
    expect(cronRepeatStrategy(Date.parse('2026-06-05T08:00:00Z'), { pattern: '0 8 * * *' })).toBe(Date.parse('2026-06-06T08:00:00Z'));
    expect(cronRepeatStrategy(at, {})).toBeUndefined();
    expect(cronRepeatStrategy(at, { pattern: 'not a cron' })).toBeUndefined();
  });
});

describe('next occurrences remembered for an aligned burst answer only inside their span', () => {
  it('asked in any order, around and on the occurrences, each answer is the first occurrence strictly after the instant', () => {
    const t = (iso: string) => Date.parse(iso);
    const daily = decodePattern('0 9 * * *');
    const sixField = decodePattern('30 0 9 * * *');
    const next = (s: typeof daily, at: string, tz = 'Europe/Berlin') => isoUtc(nextOccurrence(s, tz, t(at))!);
    // A span [10:00 day 1, 07:00Z day 2) is learned first; asking before it, on its end and past it must not reuse it.
    expect(next(daily, '2026-06-01T10:00:00Z')).toBe('2026-06-02T07:00:00Z');
    expect(next(daily, '2026-06-01T12:00:00Z')).toBe('2026-06-02T07:00:00Z');
    expect(next(daily, '2026-06-01T06:59:59.999Z')).toBe('2026-06-01T07:00:00Z');
    expect(next(daily, '2026-06-01T07:00:00Z')).toBe('2026-06-02T07:00:00Z');
    expect(next(daily, '2026-06-02T06:59:59.999Z')).toBe('2026-06-02T07:00:00Z');
    expect(next(daily, '2026-06-02T07:00:00Z')).toBe('2026-06-03T07:00:00Z');
    expect(next(daily, '2026-06-01T06:00:00Z')).toBe('2026-06-01T07:00:00Z');
    // The same expression in another zone, and another expression, have spans of their own.
    expect(next(daily, '2026-06-01T06:00:00Z', 'UTC')).toBe('2026-06-01T09:00:00Z');
    expect(next(sixField, '2026-06-01T07:00:00Z')).toBe('2026-06-01T07:00:30Z');
    expect(next(sixField, '2026-06-01T07:00:30Z')).toBe('2026-06-02T07:00:30Z');
  });
});

describe('the data of a cron tick job (cronTickData)', () => {
  it("a job scheduler's job stores its generation alone: the name, scheduler id and pattern give the rest; earlier data reads as it is", () => {
    const stored = { name: CRON_TICK_JOB_NAME, data: { generation: 4 }, opts: { repeat: { pattern: 'lead:10000:0 9 * * *' } } };
    const job = { ...stored, id: 'repeat:cron:0123456789ab:1780304390000', repeatJobKey: 'cron:0123456789ab' };
    expect(isCronTick(job)).toBe(true);
    expect(cronTickData(job)).toEqual({ type: 'cron-tick', jobId: '0123456789ab', generation: 4, leadMs: 10_000 });
    // Without the key BullMQ keeps apart (`repeatJobKey`), from the job id; without a lead, no `leadMs`.
    expect(cronTickData({ ...job, repeatJobKey: undefined, opts: { repeat: { pattern: '0 9 * * *' } } })).toEqual({
      type: 'cron-tick',
      jobId: '0123456789ab',
      generation: 4,
    });
    const earlier: CronTickData = { type: 'cron-tick', jobId: '0123456789ab', generation: 3, leadMs: 5_000 };
    expect(cronTickData({ ...job, data: earlier })).toBe(earlier);
    expect(isCronTick({ name: 'cron-tick-of-old', data: earlier })).toBe(true);
    // A loop's scheduler job is no cron tick, and names no cron job.
    const loopJob = { name: 'schedule-tick', data: { loopId: 'abc' }, opts: {}, id: 'repeat:loop:s:1780304390000', repeatJobKey: 'loop:s' };
    expect(isCronTick(loopJob)).toBe(false);
    expect(() => cronTickData(loopJob)).toThrow('names no cron job');
  });
});

describe('the prefetch lead of a cron job scheduler (repeat-strategy.ts)', () => {
  const t = (iso: string) => Date.parse(iso);
  const daily = decodePattern('0 9 * * *');

  it('jobs are released the lead before each occurrence; the strategy answers the next one from a pick-up on time', () => {
    const pattern = encodePattern(daily, 10_000);
    expect(pattern).toBe('lead:10000:0 9 * * *');
    expect(patternLead(pattern)).toEqual({ leadMs: 10_000, pattern: '0 9 * * *' });
    expect(patternLead('0 9 * * *')).toEqual({ leadMs: 0, pattern: '0 9 * * *' });
    expect(decodePattern(pattern)).toEqual(daily);
    expect(encodePattern(decodePattern('jitter:5:2000:0 9 * * *'), 3_000)).toBe('lead:3000:jitter:5:2000:0 9 * * *');
    const opts = { pattern, tz: 'UTC' };
    // Armed at 08:00: the first job at 08:59:50; picked up then (a few ms late), the next at 08:59:50 the day after.
    expect(isoUtc(cronRepeatStrategy(t('2026-06-01T08:00:00Z'), opts)!)).toBe('2026-06-01T08:59:50Z');
    expect(isoUtc(cronRepeatStrategy(t('2026-06-01T08:59:50.020Z'), opts)!)).toBe('2026-06-02T08:59:50Z');
    // Armed within the lead of an occurrence: the scheduler starts at the one after it (that one gets its own job).
    expect(isoUtc(cronRepeatStrategy(t('2026-06-01T08:59:55Z'), opts)!)).toBe('2026-06-02T08:59:50Z');
    expect(() => patternLead('lead:x:0 9 * * *')).toThrow('bad lead pattern');
  });

  it('the lead is at most half the shortest period ahead; 0 stays 0', () => {
    const now = t('2026-06-01T00:00:00Z');
    expect(leadFor(daily, 'UTC', 10_000, now)).toBe(10_000);
    expect(leadFor(decodePattern('*/2 * * * * *'), 'UTC', 10_000, now)).toBe(1_000);
    expect(leadFor(decodePattern('0 9,10 * * *'), 'UTC', 3_600_000, now)).toBe(1_800_000);
    expect(leadFor(decodePattern('every:20000:0'), 'UTC', 10_000, now)).toBe(10_000);
    expect(leadFor(decodePattern('every:19998:0'), 'UTC', 10_000, now)).toBe(9_999);
    expect(leadFor(daily, 'UTC', 0, now)).toBe(0);
  });

  it('a pick-up later than the lead allows names the occurrence the scheduler left out; one on time names none', () => {
    const minutely = decodePattern('0 * * * * *');
    const due = t('2026-06-01T09:00:00Z');
    const at = (ms: number) => ({ from: ms, to: ms });
    // On time (fetched 10 s early, or any time up to the due time less nothing): the scheduler's next is the next one.
    expect(skippedByLead(minutely, 'UTC', 10_000, due, at(due - 10_000))).toEqual([]);
    expect(skippedByLead(minutely, 'UTC', 10_000, due, at(due + 49_999))).toEqual([]);
    // Fetched 55 s late: the scheduler answers after 09:01:05 (09:02); 09:01 is left out.
    expect(skippedByLead(minutely, 'UTC', 10_000, due, at(due + 55_000))).toEqual([{ dueAt: t('2026-06-01T09:01:00Z'), sure: true }]);
    expect(skippedByLead(minutely, 'UTC', 0, due, at(due + 55_000))).toEqual([]);
  });

  it("a pick-up whose strategy may have been asked later than the fetch (BullMQ's clock, a starved process) names the occurrence as unsure", () => {
    const minutely = decodePattern('0 * * * * *');
    const due = t('2026-06-01T09:00:00Z');
    // Fetched 49.9 s late, the job in hand 0.2 s later: asked at 09:00:50.1 the scheduler made 09:02, not 09:01.
    expect(skippedByLead(minutely, 'UTC', 10_000, due, { from: due + 49_900, to: due + 50_100 })).toEqual([
      { dueAt: t('2026-06-01T09:01:00Z'), sure: false },
    ]);
    // In hand exactly at the last moment that still makes 09:01: nothing left out.
    expect(skippedByLead(minutely, 'UTC', 10_000, due, { from: due + 49_900, to: due + 49_999 })).toEqual([]);
    // Fetched late enough that even the fetch's time leaves 09:01 out: sure.
    expect(skippedByLead(minutely, 'UTC', 10_000, due, { from: due + 50_000, to: due + 50_100 })).toEqual([
      { dueAt: t('2026-06-01T09:01:00Z'), sure: true },
    ]);
    // Asked over a minute after the fetch (a starved process): 09:01 is left out for sure, 09:02 only if BullMQ asked
    // after 09:01:50 — the job scheduler's traces tell; 09:03 is after the latest answer it could give.
    expect(skippedByLead(minutely, 'UTC', 10_000, due, { from: due + 55_000, to: due + 125_000 })).toEqual([
      { dueAt: t('2026-06-01T09:01:00Z'), sure: true },
      { dueAt: t('2026-06-01T09:02:00Z'), sure: false },
    ]);
    // Fetched before its due time and in hand 5 s after it: the scheduler's next is the next one either way.
    expect(skippedByLead(minutely, 'UTC', 10_000, due, { from: due - 10_000, to: due + 5_000 })).toEqual([]);
  });
});
