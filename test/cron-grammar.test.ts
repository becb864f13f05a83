import { describe, expect, it } from 'vitest';
import { ScheduleInputError } from '../scheduler/errors/schedule-input-error.ts';
import { parseSchedule } from '../scheduler/cron/schedule-grammar.ts';
import { isoUtc, nextOccurrences } from '../scheduler/cron/cron-engine.ts';
import { parseDeliver } from '../scheduler/cron/cron-job.ts';

// 2026-03-04T10:00:00Z is a Wednesday.
const NOW = Date.parse('2026-03-04T10:00:00Z');
const opts = { tz: 'UTC', now: NOW, minIntervalSeconds: 60 };
const parse = (s: string, o: Partial<typeof opts> = {}) => parseSchedule(s, { ...opts, ...o });
const next3 = (s: string, tz = 'UTC') => nextOccurrences(parse(s, { tz }), tz, NOW, 3).map(isoUtc);

describe('cron schedule grammar: intervals (docs/DESIGN.md §7)', () => {
  it.each([
    ['30m', 1_800_000, 'every 30m'],
    ['every 2h', 7_200_000, 'every 2h'],
    ['every hour', 3_600_000, 'every 1h'],
    ['every minute', 60_000, 'every 1m'],
    ['every 10 minutes', 600_000, 'every 10m'],
    ['every 1h30m', 5_400_000, 'every 1h30m'],
    ['EVERY 2H', 7_200_000, 'every 2h'],
  ])('%s is an interval of %d ms', (text, everyMs, display) => {
    expect(parse(text)).toEqual({ kind: 'interval', expression: display, display, everyMs, anchorMs: NOW });
  });

  it('is fixed-rate from creation', () => {
    expect(next3('every 2h')).toEqual(['2026-03-04T12:00:00Z', '2026-03-04T14:00:00Z', '2026-03-04T16:00:00Z']);
  });
});

describe('cron schedule grammar: one-shots', () => {
  it('in 30m is a one-shot 30 minutes from now', () => {
    expect(parse('in 30m')).toMatchObject({ kind: 'once', atMs: NOW + 1_800_000 });
    expect(parse('in 2 hours')).toMatchObject({ kind: 'once', atMs: NOW + 7_200_000 });
  });

  it('an ISO timestamp without offset is read in the job zone', () => {
    expect(parse('2026-07-01T09:00', { tz: 'Europe/Berlin' })).toMatchObject({ kind: 'once', atMs: Date.parse('2026-07-01T07:00:00Z') });
    expect(parse('2026-12-01 09:00:30', { tz: 'America/New_York' })).toMatchObject({ atMs: Date.parse('2026-12-01T14:00:30Z') });
    expect(parse('2026-12-01', { tz: 'Asia/Tokyo' })).toMatchObject({ atMs: Date.parse('2026-11-30T15:00:00Z') });
  });

  it('an ISO timestamp with an offset is that instant', () => {
    expect(parse('2026-07-01T09:00:00Z', { tz: 'Europe/Berlin' })).toMatchObject({ atMs: Date.parse('2026-07-01T09:00:00Z') });
    expect(parse('2026-07-01T09:00+05:30')).toMatchObject({ atMs: Date.parse('2026-07-01T03:30:00Z') });
  });

  it('a wall time in the spring gap moves to the end of the gap; a repeated one takes the first', () => {
    const ny = { tz: 'America/New_York', now: Date.parse('2026-01-01T00:00:00Z') };
    expect(isoUtc((parse('2026-03-08T02:30', ny) as { atMs: number }).atMs)).toBe('2026-03-08T07:00:00Z');
    expect(isoUtc((parse('2026-11-01T01:30', ny) as { atMs: number }).atMs)).toBe('2026-11-01T05:30:00Z');
  });

  it('accepts a one-shot up to 120 s in the past and rejects one further back', () => {
    expect(parse(isoUtc(NOW - 119_000))).toMatchObject({ kind: 'once', atMs: NOW - 119_000 });
    expect(() => parse(isoUtc(NOW - 121_000))).toThrow(/is in the past .*121s ago/);
  });
});

describe('cron schedule grammar: day one-shots (tomorrow, today, one day name)', () => {
  const at = (text: string, o: Partial<typeof opts> = {}) => isoUtc((parse(text, o) as { atMs: number }).atMs);

  it.each([
    ['tomorrow at 9am', '2026-03-05T09:00:00Z'],
    ['tomorrow 9:30', '2026-03-05T09:30:00Z'],
    ['Tomorrow 9 am', '2026-03-05T09:00:00Z'],
    ['today at 6pm', '2026-03-04T18:00:00Z'],
    ['today at noon', '2026-03-04T12:00:00Z'],
    ['monday at 9am', '2026-03-09T09:00:00Z'], // the next Monday (now is a Wednesday)
    ['mon 9am', '2026-03-09T09:00:00Z'],
    ['on friday 17:00', '2026-03-06T17:00:00Z'],
    ['wednesday at 11am', '2026-03-04T11:00:00Z'], // today, still ahead
    ['wednesday at 9am', '2026-03-11T09:00:00Z'], // today's has passed: next week's
  ])('%s is one run, at %s', (text, iso) => {
    const s = parse(text);
    expect(s).toMatchObject({ kind: 'once', expression: iso, display: `once at ${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC` });
    expect(nextOccurrences(s, 'UTC', NOW, 3).map(isoUtc)).toEqual([iso]);
  });

  it("days and times are the job zone's: tomorrow in Tokyo, 9am in Berlin", () => {
    expect(at('tomorrow at 9am', { tz: 'Europe/Berlin' })).toBe('2026-03-05T08:00:00Z');
    // 23:30 UTC on the 4th is 08:30 on the 5th in Tokyo: tomorrow there is the 6th.
    expect(at('tomorrow at 9am', { tz: 'Asia/Tokyo', now: Date.parse('2026-03-04T23:30:00Z') })).toBe('2026-03-06T00:00:00Z');
    expect(at('today at 9am', { tz: 'Asia/Tokyo', now: Date.parse('2026-03-04T23:30:00Z') })).toBe('2026-03-05T00:00:00Z');
  });

  it('DST (docs/CRON.md): a time in the spring-forward gap runs at the end of the gap, a repeated time at its first instant', () => {
    const ny = { tz: 'America/New_York' };
    // 2026-03-08: 02:00–03:00 does not exist in New York; 2026-11-01: 01:00–02:00 happens twice.
    expect(at('tomorrow at 2:30am', { ...ny, now: Date.parse('2026-03-07T17:00:00Z') })).toBe('2026-03-08T07:00:00Z');
    expect(at('sunday at 2:30am', { ...ny, now: Date.parse('2026-03-07T17:00:00Z') })).toBe('2026-03-08T07:00:00Z');
    expect(at('tomorrow at 1:30am', { ...ny, now: Date.parse('2026-10-31T16:00:00Z') })).toBe('2026-11-01T05:30:00Z');
    // `in` is real time: 24 hours later, whatever the clock did.
    expect(at('in 24h', { ...ny, now: Date.parse('2026-03-07T17:00:00Z') })).toBe('2026-03-08T17:00:00Z');
  });

  it('several days, plurals and "every" still repeat; "today" without a time or a time past today is refused', () => {
    expect(parse('mondays at 9am')).toMatchObject({ kind: 'cron', expression: '0 9 * * 1' });
    expect(parse('every monday at 9am')).toMatchObject({ kind: 'cron', expression: '0 9 * * 1' });
    expect(parse('monday, wednesday at 9am')).toMatchObject({ kind: 'cron', expression: '0 9 * * 1,3' });
    expect(parse('mon and fri at 17:00')).toMatchObject({ kind: 'cron', expression: '0 17 * * 1,5' });
    expect(() => parse('today')).toThrow(/^"today" needs a time of day, e.g. "today at 6pm"\.$/);
    expect(() => parse('tomorrow at 25:00')).toThrow(/hour 25 is out of range/);
    expect(() => parse('tomorrow at 9')).toThrow(/"9" is ambiguous/);
    expect(() => parse('today at 8am')).toThrow(
      /^"today at 8am" is in the past \(2026-03-04 08:00 UTC\); a one-shot must be in the future — "tomorrow at 8am"\?$/,
    );
    for (const text of ['today', 'today at 8am']) expect(() => parse(text)).toThrow(ScheduleInputError);
  });
});

describe('cron schedule grammar: calendar phrases become cron', () => {
  it.each([
    ['daily at 7am', '0 7 * * *'],
    ['every day at 7:30pm', '30 19 * * *'],
    ['weekdays at 9am', '0 9 * * 1-5'],
    ['weekends at 10:15', '15 10 * * 0,6'],
    ['every monday 9am', '0 9 * * 1'],
    ['every monday at 9 am', '0 9 * * 1'],
    ['monday, wednesday at 9am', '0 9 * * 1,3'],
    ['mon and fri at 17:00', '0 17 * * 1,5'],
    ['tuesdays at noon', '0 12 * * 2'],
    ['noon', '0 12 * * *'],
    ['midnight', '0 0 * * *'],
    ['at 6am', '0 6 * * *'],
    ['12am', '0 0 * * *'],
    ['12pm', '0 12 * * *'],
    ['hourly', '0 * * * *'],
  ])('%s → %s', (text, expr) => {
    expect(parse(text)).toMatchObject({ kind: 'cron', expression: expr });
  });

  it('fires at the wall time in the job zone', () => {
    expect(next3('weekdays at 9am', 'Europe/Berlin')).toEqual(['2026-03-05T08:00:00Z', '2026-03-06T08:00:00Z', '2026-03-09T08:00:00Z']);
  });
});

describe('cron schedule grammar: phrases people type (daily use, round 2)', () => {
  it.each([
    ['mon-fri 9:00', '0 9 * * 1-5', 'weekdays at 09:00'],
    ['mon-fri at 9am', '0 9 * * 1-5', 'weekdays at 09:00'],
    ['tue-thu 9:30', '30 9 * * 2,3,4', 'every tuesday, wednesday, thursday at 09:30'],
    ['fri-mon at 8am', '0 8 * * 0,1,5,6', 'every sunday, monday, friday, saturday at 08:00'],
    ['sat-sun 10:00', '0 10 * * 0,6', 'weekends at 10:00'],
    ['first monday of the month at 9am', '0 9 * * 1#1', 'the first monday of the month at 09:00'],
    ['on the 2nd tuesday of every month at 18:00', '0 18 * * 2#2', 'the 2nd tuesday of the month at 18:00'],
    ['last friday of each month at 5pm', '0 17 * * 5#L', 'the last friday of the month at 17:00'],
    ['the last day of the month at 18:00', '0 18 L * *', 'the last day of the month at 18:00'],
  ])('%s → %s', (text, expression, display) => {
    expect(parse(text)).toEqual({ kind: 'cron', expression, display });
  });

  it('the month phrases fire on the right days', () => {
    // 2026-03-04 is a Wednesday: the first Mondays after it are 6 April and 4 May.
    expect(next3('first monday of the month at 9am')).toEqual(['2026-04-06T09:00:00Z', '2026-05-04T09:00:00Z', '2026-06-01T09:00:00Z']);
    expect(next3('last day of the month at 18:00')).toEqual(['2026-03-31T18:00:00Z', '2026-04-30T18:00:00Z', '2026-05-31T18:00:00Z']);
  });

  it('every other day is every 2d from now; every other hour every 2h', () => {
    expect(parse('every other day')).toEqual({
      kind: 'interval',
      expression: 'every 2d',
      display: 'every 2d',
      everyMs: 172_800_000,
      anchorMs: NOW,
    });
    expect(parse('every other hour')).toMatchObject({ kind: 'interval', everyMs: 7_200_000 });
  });

  it('next <day> at <time> is the first such day after today, never today', () => {
    // NOW is a Wednesday at 10:00: "wednesday at 11am" is today, "next wednesday at 11am" a week later.
    expect(isoUtc((parse('wednesday at 11am') as { atMs: number }).atMs)).toBe('2026-03-04T11:00:00Z');
    expect(isoUtc((parse('next wednesday at 11am') as { atMs: number }).atMs)).toBe('2026-03-11T11:00:00Z');
    expect(isoUtc((parse('next friday 9:00') as { atMs: number }).atMs)).toBe('2026-03-06T09:00:00Z');
  });

  it.each([
    // NOW is Wednesday 10:00 UTC: today's 09:00 has passed.
    ['next tuesday', '2026-03-10T09:00:00Z'],
    ['next wednesday', '2026-03-11T09:00:00Z'],
    ['on next fri', '2026-03-06T09:00:00Z'],
    ['thursday', '2026-03-05T09:00:00Z'],
    ['wednesday', '2026-03-11T09:00:00Z'],
    ['tomorrow', '2026-03-05T09:00:00Z'],
  ])('a day without a time of day (%s) is one run at 09:00 in the job zone: %s', (text, iso) => {
    const s = parse(text);
    expect(s).toMatchObject({ kind: 'once', expression: iso, display: `once at ${iso.slice(0, 10)} 09:00 UTC` });
    expect(nextOccurrences(s, 'UTC', NOW, 3).map(isoUtc)).toEqual([iso]);
    expect(isoUtc((parse(text, { tz: 'Europe/Berlin' }) as { atMs: number }).atMs)).toBe(iso.replace('T09:', 'T08:'));
  });

  it.each([
    ['every monday', '0 9 * * 1', 'every monday at 09:00'],
    ['mondays', '0 9 * * 1', 'every monday at 09:00'],
    ['weekdays', '0 9 * * 1-5', 'weekdays at 09:00'],
    ['mon-fri', '0 9 * * 1-5', 'weekdays at 09:00'],
    ['every day', '0 9 * * *', 'daily at 09:00'],
    ['first monday of the month', '0 9 * * 1#1', 'the first monday of the month at 09:00'],
  ])('a repeating day phrase without a time of day (%s) runs at 09:00 too: %s', (text, expression, display) => {
    expect(parse(text)).toEqual({ kind: 'cron', expression, display });
  });

  it.each([
    ['every weekday at 9', /"9" is ambiguous/],
    ['every other day at 9am', /takes no time of day; .*"0 9 \*\/2 \* \*"/],
    ['first funday of the month at 9am', /unknown day/],
    ['mon-funday 9am', /unknown day "mon-funday"/],
    ['constructor at 9am', /unknown day "constructor"/],
    ['next toString at 9am', /unknown day/],
    ['every __proto__ 9am', /unknown day "__proto__"/],
    ['hasOwnProperty-fri 9am', /unknown day "hasownproperty-fri"/],
  ])('%s is refused with a clear reason', (text, reason) => {
    expect(() => parse(text)).toThrow(ScheduleInputError);
    expect(() => parse(text)).toThrow(reason);
  });
});

describe('cron schedule grammar: cron expressions', () => {
  it.each([
    ['0 9 * * 1-5', '2026-03-05T09:00:00Z'],
    ['0 9 * * MON-FRI', '2026-03-05T09:00:00Z'],
    ['0 0 1 JAN *', '2027-01-01T00:00:00Z'],
    ['*/15 * * * *', '2026-03-04T10:15:00Z'],
    ['30 0 9 * * *', '2026-03-05T09:00:30Z'],
    ['@daily', '2026-03-05T00:00:00Z'],
  ])('%s next fires at %s', (expr, first) => {
    const s = parse(expr);
    expect(s).toMatchObject({ kind: 'cron', expression: expr });
    expect(nextOccurrences(s, 'UTC', NOW, 1).map(isoUtc)).toEqual([first]);
  });
});

describe('cron schedule grammar: every bad input gets a specific error (docs/DESIGN.md §11)', () => {
  it.each([
    ['', /A schedule is required/],
    ['   ', /A schedule is required/],
    ['whenever', /unknown day "whenever"/],
    ['every', /"every" must be followed by an interval or a day/],
    ['every 0m', /longer than zero/],
    ['0s', /longer than zero/],
    ['every 5 parsecs', /"5" is not a valid interval|unknown day/],
    ['every 2h please', /unexpected "please" after the interval/],
    ['30s', /"30s": interval 30s is below the minimum of 1m \(cron.min_interval_seconds\)/],
    ['45', /a number needs a unit/],
    ['in', /"in" must be followed by a duration/],
    ['in soon', /"in" must be followed by a duration/],
    ['in 5m and more', /"in" must be followed by a duration/],
    ['daily at', /"at" must be followed by a time/],
    ['daily at 25:00', /hour 25 is out of range/],
    ['daily at 9:75', /minute 75 is out of range/],
    ['daily at 13pm', /13pm is not a 12-hour time/],
    ['daily at 9', /"9" is ambiguous; write 9am, 9pm or 09:00/],
    ['daily at teatime', /"teatime" is not a time of day/],
    ['every funday 9am', /unknown day "funday"/],
    ['weekdays and monday at 9am', /"weekdays" cannot be combined/],
    ['0 9 * *', /has 4 fields; use 5 .* or 6/],
    ['0 0 9 * * * 2030', /has 7 fields/],
    ['61 * * * *', /^minute 61 is out of range \(0–59\) in "61 \* \* \* \*"\.$/],
    ['0 9 * * FUNDAY', /day-of-week "FUNDAY" is not a valid value/],
    ['0 0 30 2 *', /never matches a date/],
    ['@reboot', /not a schedule/],
    ['2026-02-30T09:00', /day 30 is out of range \(01–28 in 2026-02\)/],
    ['2026-13-01', /month 13 is out of range \(01–12\)/],
    ['2020-01-01T00:00:00Z', /is in the past/],
  ])('rejects %j', (text, message) => {
    let caught: unknown;
    try {
      parse(text);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ScheduleInputError);
    expect((caught as Error).message).toMatch(message);
  });

  it('rejects an unknown time zone', () => {
    expect(() => parse('daily at 7am', { tz: 'Mars/Olympus' })).toThrow(/Unknown time zone "Mars\/Olympus"/);
  });
});

describe('delivery targets', () => {
  it('parses a comma list', () => {
    expect(parseDeliver(undefined)).toEqual(['local']);
    expect(parseDeliver('local, telegram:-100123:7,https://example.test/hook')).toEqual([
      'local',
      'telegram:-100123:7',
      'https://example.test/hook',
    ]);
    expect(parseDeliver('origin')).toEqual(['origin']);
  });

  it.each([
    ['email:me@example.test', /Unknown delivery target "email:me@example.test"/],
    ['telegram:', /Invalid delivery target "telegram:"/],
    ['telegram:abc', /Invalid delivery target/],
  ])('rejects %j', (value, message) => {
    expect(() => parseDeliver(value)).toThrow(ScheduleInputError);
    expect(() => parseDeliver(value)).toThrow(message);
  });
});

describe('cron day rule: a day field that begins with * is unrestricted (Vixie cron)', () => {
  const from = Date.parse('2024-12-31T23:59:00Z');
  const runs = (expr: string, n = 3) => nextOccurrences(parse(expr, { now: from }), 'UTC', from, n).map(isoUtc);

  it('F13: 0 0 */2 * 1 in UTC runs on odd days that are Mondays (fields AND-ed)', () => {
    expect(runs('0 0 */2 * 1')).toEqual(['2025-01-13T00:00:00Z', '2025-01-27T00:00:00Z', '2025-02-03T00:00:00Z']);
  });

  it.each([
    // both fields restricted: day-of-month OR day-of-week
    ['0 0 1,15 * 1', ['2025-01-01T00:00:00Z', '2025-01-06T00:00:00Z', '2025-01-13T00:00:00Z', '2025-01-15T00:00:00Z']],
    ['0 0 13 * fri', ['2025-01-03T00:00:00Z', '2025-01-10T00:00:00Z', '2025-01-13T00:00:00Z', '2025-01-17T00:00:00Z']],
    // a star-led field: AND
    ['0 0 13 * */2', ['2025-02-13T00:00:00Z', '2025-03-13T00:00:00Z', '2025-04-13T00:00:00Z', '2025-05-13T00:00:00Z']],
    ['0 0 * * mon', ['2025-01-06T00:00:00Z', '2025-01-13T00:00:00Z', '2025-01-20T00:00:00Z', '2025-01-27T00:00:00Z']],
    ['0 0 1 * *', ['2025-01-01T00:00:00Z', '2025-02-01T00:00:00Z', '2025-03-01T00:00:00Z', '2025-04-01T00:00:00Z']],
    ['0 0 */10 * *', ['2025-01-01T00:00:00Z', '2025-01-11T00:00:00Z', '2025-01-21T00:00:00Z', '2025-01-31T00:00:00Z']],
    // 6 fields: the day fields are the 4th and 6th
    ['0 0 0 */2 * 1', ['2025-01-13T00:00:00Z', '2025-01-27T00:00:00Z', '2025-02-03T00:00:00Z', '2025-02-17T00:00:00Z']],
  ])('%s → %j (same table as docs/CRON.md)', (expr, expected) => {
    expect(runs(expr, 4)).toEqual(expected);
  });

  it('the BullMQ repeat strategy (real fire times) follows the same rule as previews', async () => {
    const { cronRepeatStrategy } = await import('../scheduler/cron/repeat-strategy.ts');
    let t = from;
    const fired: string[] = [];
    for (let i = 0; i < 3; i++) {
      t = cronRepeatStrategy(t, { pattern: '0 0 */2 * 1', tz: 'UTC' })!;
      fired.push(isoUtc(t));
    }
    expect(fired).toEqual(['2025-01-13T00:00:00Z', '2025-01-27T00:00:00Z', '2025-02-03T00:00:00Z']);
  });
});

describe('cron schedule errors name the field, the value as typed and the range', () => {
  const message = (s: string) => {
    try {
      parse(s);
    } catch (err) {
      expect(err).toBeInstanceOf(ScheduleInputError);
      return (err as Error).message;
    }
    throw new Error(`"${s}" was accepted`);
  };

  it('F15: month 13 names 13 and 1–12; day-of-month 0 names 0 and 1–31', () => {
    expect(message('0 0 * 13 *')).toBe('month 13 is out of range (1–12 or jan–dec) in "0 0 * 13 *".');
    expect(message('0 0 0 * *')).toBe('day-of-month 0 is out of range (1–31) in "0 0 0 * *".');
  });

  it.each([
    ['60 * * * *', 'minute 60 is out of range (0–59)'],
    ['0 24 * * *', 'hour 24 is out of range (0–23)'],
    ['0 0 1-32 * *', 'day-of-month 32 is out of range (1–31)'],
    ['0 0 * 0 *', 'month 0 is out of range (1–12 or jan–dec)'],
    ['0 0 * * 8', 'day-of-week 8 is out of range (0–7 or sun–sat, 0 and 7 are Sunday)'],
    ['61 0 0 * * *', 'second 61 is out of range (0–59)'],
    ['0 0 * jan-foo *', 'month "foo" is not a valid value (1–12 or jan–dec)'],
    ['*/0 * * * *', 'minute step 0 is out of range (1–60)'],
    ['daily at 25:00', 'hour 25 is out of range (00–23)'],
    ['daily at 7:75', 'minute 75 is out of range (00–59)'],
    ['2027-13-01T09:00', 'month 13 is out of range (01–12)'],
    ['2027-02-30T09:00', 'day 30 is out of range (01–28 in 2027-02)'],
    ['2027-02-03T24:00', 'hour 24 is out of range (00–23)'],
    ['every 10s', '"every 10s": interval 10s is below the minimum of 1m'],
  ])('%s → %s', (input, expected) => {
    expect(message(input)).toContain(expected);
  });

  it('modifiers croner supports still pass', () => {
    for (const ok of ['0 0 L * *', '0 0 * * 5L', '0 0 * * 1#2', '0 0 15W * *', '0 0 ? * 1', '0 0 * * +1', '0 9 * jan-mar mon-fri']) {
      expect(parse(ok)).toMatchObject({ kind: 'cron', expression: ok });
    }
  });
});

describe('one minimum for every schedule form (cron.min_interval_seconds)', () => {
  it.each([
    ['* * * * * *', '1s'],
    ['*/30 * * * * *', '30s'],
    ['0,30 * * * * *', '30s'],
    ['every 10s', '10s'],
    ['every 59 seconds', '59s'],
  ])('F14: %s is refused, naming the gap (%s) and the minimum', (input, gap) => {
    expect(() => parse(input)).toThrow(new RegExp(`${gap}.*minimum (is|of) 1m \\(cron\\.min_interval_seconds\\)`));
  });

  it('accepts forms whose fires are never closer than the minimum', () => {
    for (const ok of ['0 */5 * * * *', '30 * * * * *', '* * * * *', 'every 1m', '@hourly']) expect(() => parse(ok)).not.toThrow();
  });

  it('a larger minimum applies to cron and calendar forms alike', () => {
    const strict = { minIntervalSeconds: 3600 };
    expect(() => parse('*/30 * * * *', strict)).toThrow(/every 30m; the minimum is 1h/);
    expect(() => parse('0 9,9 * * *', strict)).not.toThrow();
    expect(() => parse('hourly', strict)).not.toThrow();
    expect(() => parse('0 23,0 * * *', strict)).not.toThrow();
    expect(() => parse('59 23 * * *', { minIntervalSeconds: 90_000 })).toThrow(/every 1d; the minimum is 1d1h/);
  });
});
