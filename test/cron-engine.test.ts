/**
 * The cron time engine (scheduler/cron/cron-engine.ts) as pure functions: the next
 * occurrence of each schedule kind with and without jitter, the day rule, fixed-time
 * jobs, wall times and zone offsets, zone names, and the formats of instants and
 * relative times. The DST cases of test/fixtures/dst.json run here through the engine
 * in this process; cron-dst.test.ts runs them through every path and under another TZ.
 */
import { describe, expect, it } from 'vitest';
import {
  assertTimeZone,
  cronFor,
  dayFieldsAnded,
  defaultTimeZone,
  formatInZone,
  formatRelative,
  instantOfWallTime,
  isoUtc,
  isTimeZone,
  nextOccurrence,
  nextOccurrences,
  periodAt,
  wallTimeOf,
  zoneOffsetMs,
  type CronSchedule,
} from '../scheduler/cron/cron-engine.ts';
import { ScheduleInputError } from '../scheduler/errors/schedule-input-error.ts';
import { dstCases } from './support/dst-probe.ts';

const SEC = 1_000;
const MIN = 60_000;
const HOUR = 3_600_000;
const at = (iso: string) => Date.parse(iso);
const cron = (expression: string, offsetMs?: number): CronSchedule => ({
  kind: 'cron',
  expression,
  display: expression,
  ...(offsetMs !== undefined ? { jitter: { seconds: 300, offsetMs } } : {}),
});
const every = (everyMs: number, anchorMs: number, offsetMs?: number): CronSchedule => ({
  kind: 'interval',
  expression: 'every',
  display: 'every',
  everyMs,
  anchorMs,
  ...(offsetMs !== undefined ? { jitter: { seconds: 300, offsetMs } } : {}),
});
const next = (schedule: CronSchedule, from: string, n: number, tz = 'UTC') => nextOccurrences(schedule, tz, at(from), n).map(isoUtc);

describe('nextOccurrence: the first occurrence strictly after a time', () => {
  it('an interval is fixed-rate from its anchor: anchor + k × every, k ≥ 1', () => {
    const s = every(10 * MIN, 0);
    expect(nextOccurrence(s, 'UTC', -5 * MIN)).toBe(10 * MIN);
    expect(nextOccurrence(s, 'UTC', -25 * MIN)).toBe(10 * MIN);
    expect(nextOccurrence(s, 'UTC', 0)).toBe(10 * MIN);
    expect(nextOccurrence(s, 'UTC', 10 * MIN - 1)).toBe(10 * MIN);
    expect(nextOccurrence(s, 'UTC', 10 * MIN)).toBe(20 * MIN);
    expect(nextOccurrence(s, 'UTC', 35 * MIN)).toBe(40 * MIN);
    expect(nextOccurrence(every(HOUR, 7 * MIN), 'UTC', 2 * HOUR)).toBe(2 * HOUR + 7 * MIN);
  });

  it('a one-shot is its time while that is after the time asked, then none', () => {
    const once: CronSchedule = { kind: 'once', expression: 'x', display: 'x', atMs: 5_000 };
    expect(nextOccurrence(once, 'UTC', 4_999)).toBe(5_000);
    expect(nextOccurrence(once, 'UTC', 5_000)).toBeUndefined();
    expect(nextOccurrences(once, 'UTC', 0, 3)).toEqual([5_000]);
    expect(periodAt(once, 'UTC', 5_000)).toBeUndefined();
  });

  it('a job that runs only after other jobs has no times of its own', () => {
    const after: CronSchedule = { kind: 'after', expression: 'after', display: 'after' };
    expect(nextOccurrence(after, 'UTC', 0)).toBeUndefined();
    expect(nextOccurrences(after, 'UTC', 0, 3)).toEqual([]);
    expect(periodAt(after, 'UTC', 0)).toBeUndefined();
  });

  it('a cron expression that never matches has no occurrence and no period', () => {
    expect(nextOccurrence(cron('0 0 30 2 *'), 'UTC', 0)).toBeUndefined();
    expect(nextOccurrence(cron('0 0 30 2 *', 5_000), 'UTC', 0)).toBeUndefined();
    expect(periodAt(cron('0 0 30 2 *'), 'UTC', 0)).toBeUndefined();
  });

  it('jitter shifts every occurrence by the offset: the first shifted time strictly after', () => {
    // Interval: own times 10, 20, 30 min; offset 3 min → 13, 23, 33 min.
    const s = every(10 * MIN, 0, 3 * MIN);
    expect(nextOccurrence(s, 'UTC', 12 * MIN)).toBe(13 * MIN);
    expect(nextOccurrence(s, 'UTC', 13 * MIN)).toBe(23 * MIN);
    expect(nextOccurrence(s, 'UTC', 19 * MIN)).toBe(23 * MIN);
    // Cron: hourly at :00, offset 90 s → :01:30.
    expect(next(cron('0 * * * *', 90 * SEC), '2026-06-01T10:00:30Z', 2)).toEqual(['2026-06-01T10:01:30Z', '2026-06-01T11:01:30Z']);
    expect(next(cron('0 * * * *', 90 * SEC), '2026-06-01T10:01:30Z', 1)).toEqual(['2026-06-01T11:01:30Z']);
    // A fixed-time job too.
    expect(next(cron('0 9 * * *', 2 * MIN), '2026-06-01T09:01:00Z', 1)).toEqual(['2026-06-01T09:02:00Z']);
    // No offset: the schedule's own times.
    expect(next(cron('0 * * * *', 0), '2026-06-01T10:00:30Z', 1)).toEqual(['2026-06-01T11:00:00Z']);
  });

  it('nextOccurrences gives count times, each after the one before', () => {
    expect(nextOccurrences(every(MIN, 0), 'UTC', 0, 3)).toEqual([MIN, 2 * MIN, 3 * MIN]);
    expect(nextOccurrences(every(MIN, 0), 'UTC', 0, 0)).toEqual([]);
  });

  it('periodAt: the time from an occurrence to the next (an interval: its period)', () => {
    expect(periodAt(every(7 * MIN, 0), 'UTC', 0)).toBe(7 * MIN);
    expect(periodAt(cron('0 * * * *'), 'UTC', at('2026-06-01T10:00:00Z'))).toBe(HOUR);
    expect(periodAt(cron('0 9,17 * * *'), 'UTC', at('2026-06-01T09:00:00Z'))).toBe(8 * HOUR);
    expect(periodAt(cron('0 9,17 * * *'), 'UTC', at('2026-06-01T17:00:00Z'))).toBe(16 * HOUR);
  });
});

describe('fixed-time jobs (the DST policy)', () => {
  it.each(dstCases().map((c) => [`${c.pattern} in ${c.tz} from ${c.from} (${c.why})`, c] as const))('%s', (_name, c) => {
    expect(next(cron(c.pattern), c.from, c.expect.length, c.tz)).toEqual(c.expect);
  });

  it('listed times run in order of the day, once each; seconds are a field of their own in six fields', () => {
    expect(next(cron('0 17,9 * * *'), '2026-06-01T00:00:00Z', 3)).toEqual([
      '2026-06-01T09:00:00Z',
      '2026-06-01T17:00:00Z',
      '2026-06-02T09:00:00Z',
    ]);
    expect(next(cron('15 30 2 * * *'), '2026-06-01T00:00:00Z', 2)).toEqual(['2026-06-01T02:30:15Z', '2026-06-02T02:30:15Z']);
    expect(next(cron('0,30 0 9 * * *'), '2026-06-01T00:00:00Z', 3)).toEqual([
      '2026-06-01T09:00:00Z',
      '2026-06-01T09:00:30Z',
      '2026-06-02T09:00:00Z',
    ]);
    expect(next(cron('  30   2  * * *  '), '2026-06-01T00:00:00Z', 1)).toEqual(['2026-06-01T02:30:00Z']);
  });

  it('the fixed nicknames in any case; @hourly is not one', () => {
    expect(next(cron('@DAILY'), '2026-06-01T10:00:00Z', 1)).toEqual(['2026-06-02T00:00:00Z']);
    expect(next(cron('@weekly'), '2026-06-01T10:00:00Z', 1)).toEqual(['2026-06-07T00:00:00Z']);
    expect(next(cron('@monthly'), '2026-06-01T10:00:00Z', 1)).toEqual(['2026-07-01T00:00:00Z']);
    expect(next(cron('@yearly'), '2026-06-01T10:00:00Z', 1)).toEqual(['2027-01-01T00:00:00Z']);
    expect(next(cron('@annually'), '2026-06-01T10:00:00Z', 1)).toEqual(['2027-01-01T00:00:00Z']);
    expect(next(cron('@midnight'), '2026-06-01T10:00:00Z', 1)).toEqual(['2026-06-02T00:00:00Z']);
    expect(next(cron('@hourly'), '2026-06-01T10:00:00Z', 1)).toEqual(['2026-06-01T11:00:00Z']);
    // F31's zone: a daily job at 23:00 in a gap that ends at midnight runs at midnight.
    expect(next(cron('0 23 * * *'), '2024-03-30T00:00:00Z', 3, 'America/Nuuk')).toEqual([
      '2024-03-30T01:00:00Z',
      '2024-03-31T01:00:00Z',
      '2024-04-01T00:00:00Z',
    ]);
  });

  it('a fixed time is one however it is written: six fields, spaces around, a list of two-digit values', () => {
    // In Nuuk 23:00 of 30 March 2024 falls in a gap that ends at midnight: a fixed time runs at 00:00 local.
    const nuuk = ['2024-03-30T01:00:00Z', '2024-03-31T01:00:00Z', '2024-04-01T00:00:00Z'];
    expect(next(cron('0 0 23 * * *'), '2024-03-30T00:00:00Z', 3, 'America/Nuuk')).toEqual(nuuk);
    expect(next(cron('  0  23 * * *  '), '2024-03-30T00:00:00Z', 3, 'America/Nuuk')).toEqual(nuuk);
    expect(next(cron('0 12,23 * * *'), '2024-03-30T16:00:00Z', 2, 'America/Nuuk')).toEqual([
      '2024-03-31T01:00:00Z',
      '2024-03-31T13:00:00Z',
    ]);
  });

  it('a step or a range in a time field is not a fixed time: 02:30 in the gap is skipped', () => {
    expect(next(cron('30 2-3 * * *'), '2025-03-09T00:00:00Z', 2, 'America/New_York')).toEqual([
      '2025-03-09T07:30:00Z',
      '2025-03-10T06:30:00Z',
    ]);
    expect(next(cron('30 */2 * * *'), '2025-03-09T05:00:00Z', 2, 'America/New_York')).toEqual([
      '2025-03-09T05:30:00Z', // 00:30 EST
      '2025-03-09T08:30:00Z', // 04:30 EDT: 02:30 does not exist
    ]);
  });

  it('the days of a fixed-time job follow the day rule (both day fields restricted: either matches)', () => {
    // 2026-06-01 is a Monday; the 15th a Monday too.
    expect(next(cron('0 9 1,15 * fri'), '2026-06-01T10:00:00Z', 3)).toEqual([
      '2026-06-05T09:00:00Z',
      '2026-06-12T09:00:00Z',
      '2026-06-15T09:00:00Z',
    ]);
    expect(next(cron('0 9 */2 * 1'), '2026-06-01T10:00:00Z', 2)).toEqual(['2026-06-15T09:00:00Z', '2026-06-29T09:00:00Z']);
  });
});

describe('the day rule (Vixie cron)', () => {
  it('both day fields restricted: OR; either one starting with * or ?: AND', () => {
    expect(dayFieldsAnded('0 0 1,15 * mon')).toBe(false);
    expect(dayFieldsAnded('0 0 */2 * 1')).toBe(true);
    expect(dayFieldsAnded('0 0 1 * *')).toBe(true);
    expect(dayFieldsAnded('0 0 * * mon')).toBe(true);
    expect(dayFieldsAnded('0 0 ? * mon')).toBe(true);
    expect(dayFieldsAnded('0 0 1 * ?')).toBe(true);
    expect(dayFieldsAnded('0 0  1,15  *  mon ')).toBe(false);
    expect(dayFieldsAnded('0 0 */2  * 1')).toBe(true);
  });

  it('six fields: the day fields are the fourth and the sixth', () => {
    expect(dayFieldsAnded('0 0 0 1,15 * mon')).toBe(false);
    expect(dayFieldsAnded('0 0 0 * * mon')).toBe(true);
    expect(dayFieldsAnded('0 * 0 1 1 mon')).toBe(false);
  });

  it('nicknames leave a day field unrestricted', () => {
    expect(dayFieldsAnded('@weekly')).toBe(true);
    expect(dayFieldsAnded('0 0 1')).toBe(true);
  });

  it('croner gets the rule: OR runs on either day, AND on both', () => {
    // 2026-06-01 is a Monday.
    const or = cronFor('0 12 1,15 * mon', 'UTC');
    expect(isoUtc(or.nextRun(new Date(at('2026-06-01T13:00:00Z')))!.getTime())).toBe('2026-06-08T12:00:00Z');
    const and = cronFor('0 12 1,15 * mon', 'UTC', true);
    expect(isoUtc(and.nextRun(new Date(at('2026-06-01T13:00:00Z')))!.getTime())).toBe('2026-06-15T12:00:00Z');
  });

  it('a bad expression is a ScheduleInputError naming it and what croner said', () => {
    let error: unknown;
    try {
      cronFor('61 * * * *', 'UTC');
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ScheduleInputError);
    expect((error as Error).message).toBe('Invalid cron expression "61 * * * *": Invalid value for minute: 61');
    expect((error as ScheduleInputError).field).toBe('schedule');
  });

  it('five or six fields only: a seventh (a year) is refused', () => {
    expect(() => cronFor('0 0 0 1 1 * 2030', 'UTC')).toThrow(
      /^Invalid cron expression "0 0 0 1 1 \* 2030": mode '5-or-6-parts' requires exactly 5 or 6 parts/,
    );
  });
});

describe('wall times and zone offsets', () => {
  it('wallTimeOf reads an instant in a zone (hours 0–23)', () => {
    expect(wallTimeOf(at('2026-07-01T22:30:05Z'), 'Europe/Berlin')).toEqual({
      year: 2026,
      month: 7,
      day: 2,
      hour: 0,
      minute: 30,
      second: 5,
    });
    expect(wallTimeOf(at('2026-01-01T00:00:00Z'), 'UTC')).toEqual({ year: 2026, month: 1, day: 1, hour: 0, minute: 0, second: 0 });
    expect(wallTimeOf(-500, 'UTC')).toEqual({ year: 1969, month: 12, day: 31, hour: 23, minute: 59, second: 59 });
  });

  it('zoneOffsetMs: east of Greenwich positive, west negative; milliseconds do not count, before 1970 too', () => {
    expect(zoneOffsetMs(at('2026-07-01T00:00:00.250Z'), 'Europe/Berlin')).toBe(2 * HOUR);
    expect(zoneOffsetMs(at('2026-01-01T00:00:00.999Z'), 'Europe/Berlin')).toBe(HOUR);
    expect(zoneOffsetMs(at('2026-01-01T12:00:00Z'), 'America/New_York')).toBe(-5 * HOUR);
    expect(zoneOffsetMs(-500, 'UTC')).toBe(0);
    expect(zoneOffsetMs(1_500, 'UTC')).toBe(0);
    expect(zoneOffsetMs(-1_500, 'Asia/Tokyo')).toBe(9 * HOUR);
  });

  it('instantOfWallTime: a plain wall time, one in the spring gap (the end of the gap), a repeated one (the earlier)', () => {
    const w = (year: number, month: number, day: number, hour: number, minute = 0, second = 0) => ({
      year,
      month,
      day,
      hour,
      minute,
      second,
    });
    expect(isoUtc(instantOfWallTime(w(2026, 6, 1, 9, 15, 30), 'Europe/Berlin'))).toBe('2026-06-01T07:15:30Z');
    expect(isoUtc(instantOfWallTime(w(2025, 3, 9, 2, 30), 'America/New_York'))).toBe('2025-03-09T07:00:00Z');
    expect(isoUtc(instantOfWallTime(w(2025, 3, 30, 2, 0, 1), 'Europe/Berlin'))).toBe('2025-03-30T01:00:00Z');
    expect(isoUtc(instantOfWallTime(w(2025, 11, 2, 1, 30), 'America/New_York'))).toBe('2025-11-02T05:30:00Z');
    expect(isoUtc(instantOfWallTime(w(2025, 10, 26, 2, 30), 'Europe/Berlin'))).toBe('2025-10-26T00:30:00Z');
    expect(isoUtc(instantOfWallTime(w(2026, 1, 1, 0), 'Asia/Kolkata'))).toBe('2025-12-31T18:30:00Z');
  });

  it('half-hour changes (Lord Howe) and a whole skipped day (Apia, 30 December 2011) follow the same rule', () => {
    const w = (year: number, month: number, day: number, hour: number, minute = 0) => ({ year, month, day, hour, minute, second: 0 });
    // 02:00 → 02:30: 02:15 runs at 02:30; 01:30–02:00 repeats in April: 01:45 is the first one (+11).
    expect(isoUtc(instantOfWallTime(w(2025, 10, 5, 2, 15), 'Australia/Lord_Howe'))).toBe('2025-10-04T15:30:00Z');
    expect(isoUtc(instantOfWallTime(w(2025, 4, 6, 1, 45), 'Australia/Lord_Howe'))).toBe('2025-04-05T14:45:00Z');
    // Samoa went from UTC−10 to UTC+14: 30 December did not happen; its noon runs at 00:00 of the 31st.
    expect(isoUtc(instantOfWallTime(w(2011, 12, 30, 12), 'Pacific/Apia'))).toBe('2011-12-30T10:00:00Z');
  });
});

describe('zone names', () => {
  it('isTimeZone knows IANA names, not made-up ones nor the empty name', () => {
    expect(isTimeZone('Europe/Berlin')).toBe(true);
    expect(isTimeZone('UTC')).toBe(true);
    expect(isTimeZone('Mars/Olympus')).toBe(false);
    expect(isTimeZone('')).toBe(false);
  });

  it('assertTimeZone returns a known zone and refuses an unknown one naming it (field tz)', () => {
    expect(assertTimeZone('Asia/Tokyo')).toBe('Asia/Tokyo');
    for (const tz of ['Mars/Olympus', '']) {
      let error: unknown;
      try {
        assertTimeZone(tz);
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(ScheduleInputError);
      expect((error as Error).message).toBe(`Unknown time zone "${tz}": use an IANA name like Europe/Berlin or UTC.`);
      expect((error as ScheduleInputError).field).toBe('tz');
    }
  });

  it('defaultTimeZone: --tz, else the configured zone, else the host zone; an unknown one is refused', () => {
    expect(defaultTimeZone('Asia/Tokyo', 'Europe/Berlin')).toBe('Asia/Tokyo');
    expect(defaultTimeZone(undefined, 'Europe/Berlin')).toBe('Europe/Berlin');
    const host = Intl.DateTimeFormat().resolvedOptions().timeZone;
    expect(defaultTimeZone(undefined, undefined)).toBe(host);
    expect(defaultTimeZone(undefined, '')).toBe(host);
    expect(() => defaultTimeZone('', 'Europe/Berlin')).toThrow(ScheduleInputError);
    expect(() => defaultTimeZone('Mars/Olympus', 'Europe/Berlin')).toThrow(/Unknown time zone "Mars\/Olympus"/);
    expect(() => defaultTimeZone(undefined, 'Mars/Olympus')).toThrow(/Unknown time zone "Mars\/Olympus"/);
  });
});

describe('formats', () => {
  it('isoUtc drops zero milliseconds only', () => {
    expect(isoUtc(at('2025-03-09T07:00:00Z'))).toBe('2025-03-09T07:00:00Z');
    expect(isoUtc(at('2025-03-09T07:00:00.120Z'))).toBe('2025-03-09T07:00:00.120Z');
  });

  it('formatInZone: wall date and time in the zone with its short name; seconds when asked or not zero', () => {
    expect(formatInZone(at('2026-01-05T06:00:00Z'), 'America/New_York')).toBe('2026-01-05 01:00 EST');
    expect(formatInZone(at('2026-07-04T03:05:09Z'), 'Asia/Tokyo')).toBe('2026-07-04 12:05:09 GMT+9');
    expect(formatInZone(at('2026-01-05T06:00:00Z'), 'UTC', { seconds: true })).toBe('2026-01-05 06:00:00 UTC');
    expect(formatInZone(at('2026-01-05T06:00:00Z'), 'UTC', { seconds: false })).toBe('2026-01-05 06:00 UTC');
    expect(formatInZone(at('2026-03-30T06:00:00Z'), 'Europe/Berlin')).toBe('2026-03-30 08:00 GMT+2');
  });

  it('formatRelative: now within a second; seconds, minutes (with seconds under 10 min), hours and minutes, days and hours', () => {
    const t = at('2026-06-01T10:00:00Z');
    const rel = (ms: number) => formatRelative(t + ms, t);
    expect(rel(0)).toBe('now');
    expect(rel(999)).toBe('now');
    expect(rel(-999)).toBe('now');
    expect(rel(1_000)).toBe('in 1s');
    expect(rel(-1_000)).toBe('1s ago');
    expect(rel(1_500)).toBe('in 2s');
    expect(rel(59 * SEC)).toBe('in 59s');
    expect(rel(60 * SEC)).toBe('in 1m');
    expect(rel(61 * SEC)).toBe('in 1m1s');
    expect(rel(-(4 * MIN + 5 * SEC))).toBe('4m5s ago');
    expect(rel(599 * SEC)).toBe('in 9m59s');
    expect(rel(601 * SEC)).toBe('in 10m');
    expect(rel(3_599 * SEC)).toBe('in 59m');
    expect(rel(HOUR)).toBe('in 1h');
    expect(rel(HOUR + 59 * SEC)).toBe('in 1h');
    expect(rel(2 * HOUR + 10 * MIN)).toBe('in 2h10m');
    expect(rel(86_399 * SEC)).toBe('in 23h59m');
    expect(rel(24 * HOUR)).toBe('in 1d');
    expect(rel(-3 * 24 * HOUR)).toBe('3d ago');
    expect(rel(25 * HOUR)).toBe('in 1d1h');
    expect(rel(2 * 24 * HOUR + 23 * HOUR + 59 * MIN)).toBe('in 2d23h');
  });
});
