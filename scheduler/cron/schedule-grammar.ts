/**
 * The schedule grammar of `hermes cron add|edit|next` (docs/DESIGN.md §7):
 *
 * | form | kind | example |
 * |---|---|---|
 * | interval | interval | `30m`, `every 2h`, `every hour`, `every 10 minutes`, `every other day` (every 2d) |
 * | relative one-shot | once | `in 30m`, `in 2 hours` |
 * | day one-shot | once | `tomorrow at 9am`, `tomorrow 9:30`, `today at 6pm`, `monday at 9am` (the next Monday at 09:00), `next tuesday at 9am` (never today), `next tuesday` (at 09:00) |
 * | calendar phrase | cron | `daily at 7am`, `weekdays at 9am`, `mon-fri 9:00`, `every monday 9am`, `mondays at 9am`, `monday, wednesday at 9am`, `first monday of the month at 9am`, `last day of the month at 18:00`, `noon`, `midnight`, `hourly` |
 * | cron | cron | `0 9 * * mon-fri`, `30 0 9 * * *` (6 fields: seconds first), `@daily` |
 * | ISO timestamp | once | `2026-12-01T09:00` (read in the job's zone), `2026-12-01T09:00:00Z`, `…+01:00` |
 *
 * One day name alone (`monday at 9am`) is one occurrence, the next; `every monday`, `mondays` or a
 * list of days repeat. A phrase that names days but no time of day runs at `DAY_PHRASE_TIME` (09:00):
 * `next tuesday` is `next tuesday at 9am`, `every monday` is `0 9 * * 1`; only `today` alone is
 * refused. A day one-shot is a wall time in the job's zone, placed on the calendar by the DST rule
 * of fixed-time jobs (cron-engine.ts): a time in the spring-forward gap runs at the first valid
 * instant after it, a repeated time at the first of its two instants.
 *
 * Every rejected input gets a `ScheduleInputError` that names the field, the
 * value as typed and the allowed range (cron-fields.ts); nothing is written
 * before parsing succeeds. One minimum, `cron.min_interval_seconds`, holds for
 * every form: intervals, calendar phrases and 5- or 6-field cron whose fires
 * can come closer than it are refused (`assertCronMinimum`).
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import { formatSeconds, parseIntervalAt } from '../interval.ts';
import { assertCronMinimum, checkCronFields } from './cron-fields.ts';
import { assertTimeZone, cronFor, instantOfWallTime, isoUtc, formatInZone, wallTimeOf, type CronSchedule } from './cron-engine.ts';
import { nameTable } from '../names/name-table.ts';

/** How far in the past a one-shot may be and still be accepted (it then runs at once). */
export const ONE_SHOT_PAST_TOLERANCE_MS = 120_000;

/** Context of a parse. */
export interface ParseScheduleOptions {
  /** IANA zone of the job (already chosen: `--tz`, config, host). */
  tz: string;
  /** "Now" in epoch ms: the anchor of intervals and `in …`. */
  now: number;
  /** Shortest allowed interval in seconds (`cron.min_interval_seconds`). */
  minIntervalSeconds: number;
  /** Longest schedule text, characters (`cron.max_schedule_chars`). @defaultValue `MAX_SCHEDULE_CHARS` */
  maxChars?: number;
}

/**
 * Longest schedule text accepted, characters, when the caller does not say. Checked before
 * anything else is done with the text: every real form fits in a few dozen characters, and a
 * megabyte of text would otherwise cost the parser (and every later `cron list`) seconds.
 */
export const MAX_SCHEDULE_CHARS = 256;

const DAY_NUMBERS = nameTable({
  sun: 0,
  sunday: 0,
  mon: 1,
  monday: 1,
  tue: 2,
  tues: 2,
  tuesday: 2,
  wed: 3,
  wednesday: 3,
  thu: 4,
  thur: 4,
  thurs: 4,
  thursday: 4,
  fri: 5,
  friday: 5,
  sat: 6,
  saturday: 6,
});
/**
 * The time of day of a phrase that names days but no time (`next tuesday`, `every monday`,
 * `weekdays`): 09:00 in the job's zone, the start of a working day. Part of the grammar, like `noon`.
 */
export const DAY_PHRASE_TIME: Readonly<{ hour: number; minute: number }> = { hour: 9, minute: 0 };

const DAY_LABEL = ['sunday', 'monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday'];

/** The weekday (0 = Sunday) a day name stands for; own keys only, as the word is the user's. */
function dayNumber(word: string): number | undefined {
  return Object.hasOwn(DAY_NUMBERS, word) ? DAY_NUMBERS[word] : undefined;
}

/** `first monday of the month`: the ordinal's croner day-of-week suffix. */
const ORDINALS: ReadonlyMap<string, string> = new Map([
  ['first', '#1'],
  ['1st', '#1'],
  ['second', '#2'],
  ['2nd', '#2'],
  ['third', '#3'],
  ['3rd', '#3'],
  ['fourth', '#4'],
  ['4th', '#4'],
  ['fifth', '#5'],
  ['5th', '#5'],
  ['last', '#L'],
]);

const EXAMPLES =
  'e.g. 30m, every 2h, in 30m, tomorrow at 9am, daily at 7am, weekdays at 9am, every monday 9am, 0 9 * * 1-5, 2026-12-01T09:00';

const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3})\d*)?)?)?\s*(Z|[+-]\d{2}:?\d{2})?$/i;

/**
 * Parse a schedule.
 * @throws ScheduleInputError with a message specific to what is wrong
 *   (empty, unknown form, bad interval, interval below the minimum, bad time of
 *   day, unknown day name, bad cron field, bad date, one-shot in the past, unknown zone)
 */
export function parseSchedule(input: string, options: ParseScheduleOptions): CronSchedule {
  const maxChars = options.maxChars ?? MAX_SCHEDULE_CHARS;
  if (input.length > maxChars) throw bad(`The schedule is ${input.length} characters; the limit is ${maxChars} (cron.max_schedule_chars).`);
  assertTimeZone(options.tz);
  const raw = input.trim().replace(/\s+/g, ' ');
  if (raw.length === 0) throw bad(`A schedule is required (${EXAMPLES}).`);
  const text = raw.toLowerCase();

  if (ISO.test(raw)) return parseIso(raw, options);
  if (raw.startsWith('@') || (/^[\d*?/,-]+$/.test(raw.split(' ')[0]!) && raw.split(' ').length >= 3)) {
    return parseCron(raw, options.tz, options.minIntervalSeconds);
  }

  const tokens = text.split(' ');
  if (tokens[0] === 'in') {
    const iv = parseIntervalAt(tokens, 1);
    if (!iv || 1 + iv.used !== tokens.length) {
      throw bad(`"${raw}": "in" must be followed by a duration like 30m or 2 hours.`);
    }
    const atMs = options.now + iv.seconds * 1000;
    return { kind: 'once', expression: `in ${formatSeconds(iv.seconds)}`, display: `once at ${formatInZone(atMs, options.tz)}`, atMs };
  }

  const day = parseDayOneShot(tokens, raw, options);
  if (day !== undefined) return day;

  const interval = parseIntervalForm(tokens, raw);
  if (interval !== undefined) {
    if (interval < options.minIntervalSeconds) {
      throw bad(
        `"${raw}": interval ${formatSeconds(interval)} is below the minimum of ${formatSeconds(options.minIntervalSeconds)} (cron.min_interval_seconds).`,
      );
    }
    const expression = `every ${formatSeconds(interval)}`;
    return { kind: 'interval', expression, display: expression, everyMs: interval * 1000, anchorMs: options.now };
  }

  const calendar = parseCalendar(tokens, raw, options.tz);
  assertCronMinimum(calendar.expression, options.minIntervalSeconds);
  return calendar;
}

/**
 * `today|tomorrow [at] <time>` and `[on] [next] <one day name> [at] <time>` (`monday at 9am`: the next
 * Monday at 09:00 — today when that time is still ahead; the time defaults to `DAY_PHRASE_TIME`) → a one-shot at that wall time in the job's zone;
 * `undefined` for any other form. The wall time becomes an instant by `instantOfWallTime` (a time in
 * the spring-forward gap runs at the first valid instant after it, a repeated one at the earlier).
 * @throws ScheduleInputError for a bad time, `today` without a time, or `today` at a time already past
 */
function parseDayOneShot(tokens: string[], raw: string, options: ParseScheduleOptions): CronSchedule | undefined {
  let words = tokens[0] === 'on' ? tokens.slice(1) : tokens;
  // `next tuesday at 9am`: the first Tuesday after today, never today.
  const next = words[0] === 'next' && dayNumber(words[1] ?? '') !== undefined;
  if (next) words = words.slice(1);
  const first = words[0] ?? '';
  const weekday = dayNumber(first);
  if (first !== 'today' && first !== 'tomorrow' && weekday === undefined) return undefined;
  let rest = words.slice(1);
  if (rest[0] === 'at') rest = rest.slice(1);
  // `monday, wednesday at 9am`, `mon and fri 17:00`: several days repeat (a calendar phrase).
  if (
    weekday !== undefined &&
    !next &&
    rest.some((t) => t === ',' || t.endsWith(',') || t === 'and' || dayNumber(t.replace(/,$/, '')) !== undefined)
  )
    return undefined;
  if (first.endsWith(',')) return undefined;
  // `today` alone names no instant worth guessing (09:00 may be past); other days default to 09:00.
  if (rest.length === 0 && first === 'today') throw bad(`"${raw}" needs a time of day, e.g. "today at 6pm".`);
  const time = rest.length === 0 ? DAY_PHRASE_TIME : parseTimeOfDay(rest.join(''), raw);
  const today = wallTimeOf(options.now, options.tz);
  const at = (daysAhead: number) => {
    const date = new Date(Date.UTC(today.year, today.month - 1, today.day + daysAhead));
    return instantOfWallTime(
      {
        year: date.getUTCFullYear(),
        month: date.getUTCMonth() + 1,
        day: date.getUTCDate(),
        hour: time.hour,
        minute: time.minute,
        second: 0,
      },
      options.tz,
    );
  };
  let atMs: number;
  if (first === 'today') {
    atMs = at(0);
    if (atMs < options.now - ONE_SHOT_PAST_TOLERANCE_MS) {
      throw bad(
        `"${raw}" is in the past (${formatInZone(atMs, options.tz)}); a one-shot must be in the future — "tomorrow at ${rest.join(' ')}"?`,
      );
    }
  } else if (first === 'tomorrow') {
    atMs = at(1);
  } else {
    const todayNumber = new Date(Date.UTC(today.year, today.month - 1, today.day)).getUTCDay();
    const ahead = (weekday! - todayNumber + 7) % 7 || (next ? 7 : 0);
    atMs = at(ahead);
    if (atMs <= options.now) atMs = at(ahead + 7); // that day's time has passed: the same day next week
  }
  return { kind: 'once', expression: isoUtc(atMs), display: `once at ${formatInZone(atMs, options.tz)}`, atMs };
}

/** `30m`, `every 2h`, `every hour`, `every 10 minutes` → seconds; `undefined` when not an interval form. */
function parseIntervalForm(tokens: string[], raw: string): number | undefined {
  const every = tokens[0] === 'every';
  const rest = every ? tokens.slice(1) : tokens;
  if (every && rest.length === 0) throw bad(`"every" must be followed by an interval or a day, ${EXAMPLES}.`);
  const units: ReadonlyMap<string, number> = new Map([
    ['second', 1],
    ['minute', 60],
    ['hour', 3600],
    ['day', 86_400],
    ['week', 604_800],
  ]);
  if (every && rest.length === 1 && rest[0] !== 'day' && rest[0] !== 'week') {
    const unit = units.get(rest[0]!);
    if (unit !== undefined) return unit;
  }
  // `every other day`: twice the unit, fixed-rate from now like any interval.
  if (every && rest[0] === 'other' && units.has(rest[1] ?? '')) {
    if (rest.length === 2) return 2 * units.get(rest[1]!)!;
    throw bad(
      `"${raw}": "every other ${rest[1]}" runs every ${formatSeconds(2 * units.get(rest[1]!)!)} from now and takes no time of day; for a time of day use a cron expression such as "0 9 */2 * *" (odd days of the month).`,
    );
  }
  const iv = parseIntervalAt(rest, 0);
  if (iv && iv.used === rest.length) return iv.seconds;
  if (iv && every) throw bad(`"${raw}": unexpected "${rest.slice(iv.used).join(' ')}" after the interval.`);
  if (/^\d+(\.\d+)?$/.test(rest[0] ?? '') && rest.length === 1) {
    throw bad(`"${raw}": a number needs a unit (s, m, h, d), e.g. ${rest[0]}m.`);
  }
  if (/^0+(\.0+)?[a-z]+$/.test(rest[0] ?? '') || /^0+(\.0+)?$/.test(rest[0] ?? '')) {
    throw bad(`"${raw}": an interval must be longer than zero.`);
  }
  if (every && /^\d/.test(rest[0] ?? '')) throw bad(`"${raw}": "${rest[0]}" is not a valid interval (use s, m, h or d, e.g. 90m, 1h30m).`);
  return undefined;
}

/** Calendar phrases: `[every] <days> [at] <time>` (no time: `DAY_PHRASE_TIME`), `noon`, `midnight`, `hourly`. */
function parseCalendar(tokens: string[], raw: string, tz: string): CronSchedule {
  if (tokens.length === 1 && tokens[0] === 'hourly') return cronSchedule('0 * * * *', 'hourly', tz);
  // Split at the last "at", or take the last token as the time.
  let dayPart: string[];
  let timePart: string[];
  const at = tokens.lastIndexOf('at');
  if (at >= 0) {
    dayPart = tokens.slice(0, at);
    timePart = tokens.slice(at + 1);
    if (timePart.length === 0) throw bad(`"${raw}": "at" must be followed by a time like 7am, 9:30 or 18:00.`);
  } else {
    const split = splitTrailingTime(tokens);
    dayPart = split.days;
    timePart = split.time;
  }
  const days = parseMonthDay(dayPart) ?? { dom: '*', ...parseDays(dayPart, raw) };
  const time = timePart.length === 0 ? DAY_PHRASE_TIME : parseTimeOfDay(timePart.join(''), raw);
  const expression = `${time.minute} ${time.hour} ${days.dom} * ${days.cron}`;
  const clock = `${String(time.hour).padStart(2, '0')}:${String(time.minute).padStart(2, '0')}`;
  const display = days.label === 'daily' ? `daily at ${clock}` : `${days.label} at ${clock}`;
  return cronSchedule(expression, display, tz);
}

/** Take a trailing time (`9am`, `9 am`, `9:30`, `noon`) off the tokens. */
function splitTrailingTime(tokens: string[]): { days: string[]; time: string[] } {
  const n = tokens.length;
  if (n >= 2 && /^(am|pm)$/.test(tokens[n - 1]!) && /^\d{1,2}(:\d{2})?$/.test(tokens[n - 2]!)) {
    return { days: tokens.slice(0, n - 2), time: tokens.slice(n - 2) };
  }
  const last = tokens[n - 1] ?? '';
  if (/^(noon|midnight)$/.test(last) || /^\d{1,2}(:\d{2})?(am|pm)?$/.test(last) || /^\d/.test(last)) {
    return { days: tokens.slice(0, n - 1), time: [last] };
  }
  return { days: tokens, time: [] };
}

/**
 * `[on|every] [the] first monday of the month`, `last friday of every month` (croner's `1#1`,
 * `5#L`), `last day of the month` (`L`); `undefined` for any other day phrase.
 */
function parseMonthDay(tokens: string[]): { dom: string; cron: string; label: string } | undefined {
  const words = tokens.filter((t) => t !== 'on' && t !== 'every' && t !== 'the' && t !== 'each');
  if (words.length !== 4 || words[2] !== 'of' || words[3] !== 'month') return undefined;
  const ordinal = ORDINALS.get(words[0]!);
  if (ordinal === undefined) return undefined;
  if (words[1] === 'day' && ordinal === '#L') return { dom: 'L', cron: '*', label: 'the last day of the month' };
  const weekday = dayNumber(words[1]!);
  if (weekday === undefined) return undefined;
  return { dom: '*', cron: `${weekday}${ordinal}`, label: `the ${words[0]} ${DAY_LABEL[weekday]} of the month` };
}

/**
 * `daily`, `every day`, `weekdays`, `weekends`, `every monday`, `monday, wednesday`, `mon and fri`,
 * `mon-fri` (a range, `fri-mon` wrapping through the weekend).
 */
function parseDays(tokens: string[], raw: string): { cron: string; label: string } {
  const words = tokens
    .join(' ')
    .replace(/,/g, ' , ')
    .split(' ')
    .filter((t) => t.length > 0 && t !== ',' && t !== 'and' && t !== 'on');
  if (words[0] === 'every') words.shift();
  if (words.length === 0) return { cron: '*', label: 'daily' };
  if (words.length === 1) {
    const w = words[0]!;
    if (w === 'daily' || w === 'day' || w === 'everyday') return { cron: '*', label: 'daily' };
    if (w === 'weekdays' || w === 'weekday') return { cron: '1-5', label: 'weekdays' };
    if (w === 'weekends' || w === 'weekend') return { cron: '0,6', label: 'weekends' };
  }
  const days = new Set<number>();
  for (const w of words) {
    const range = /^([a-z]+)-([a-z]+)$/.exec(w);
    const [from, to] = range ? [dayNumber(range[1]!), dayNumber(range[2]!)] : [undefined, undefined];
    if (from !== undefined && to !== undefined) {
      for (let d = from; ; d = (d + 1) % 7) {
        days.add(d);
        if (d === to) break;
      }
      continue;
    }
    const name = w.endsWith('s') && dayNumber(w.slice(0, -1)) !== undefined ? w.slice(0, -1) : w;
    const d = dayNumber(name);
    if (d === undefined) {
      if (['daily', 'weekdays', 'weekends', 'day', 'weekday', 'weekend'].includes(w)) {
        throw bad(`"${raw}": "${w}" cannot be combined with other days.`);
      }
      throw bad(`"${raw}": unknown day "${w}" (use monday … sunday, mon … sun, weekdays, weekends or daily; ${EXAMPLES}).`);
    }
    days.add(d);
  }
  const sorted = [...days].sort((a, b) => a - b);
  if (sorted.join(',') === '1,2,3,4,5') return { cron: '1-5', label: 'weekdays' };
  if (sorted.join(',') === '0,6') return { cron: '0,6', label: 'weekends' };
  if (sorted.length === 7) return { cron: '*', label: 'daily' };
  return { cron: sorted.join(','), label: `every ${sorted.map((d) => DAY_LABEL[d]).join(', ')}` };
}

/** `7am`, `7:30pm`, `12am`, `19:00`, `noon`, `midnight`. */
function parseTimeOfDay(token: string, raw: string): { hour: number; minute: number } {
  if (token === 'noon') return { hour: 12, minute: 0 };
  if (token === 'midnight') return { hour: 0, minute: 0 };
  const m = /^(\d{1,2})(?::(\d{2}))?(am|pm)?$/.exec(token);
  if (!m) throw bad(`"${raw}": "${token}" is not a time of day (use 7am, 7:30pm, 19:00, noon or midnight).`);
  let hour = Number(m[1]);
  const minute = m[2] === undefined ? 0 : Number(m[2]);
  const suffix = m[3];
  if (m[2] === undefined && !suffix) {
    throw bad(`"${raw}": "${token}" is ambiguous; write ${token}am, ${token}pm or ${token.padStart(2, '0')}:00.`);
  }
  if (minute > 59) throw bad(`"${raw}": minute ${minute} is out of range (00–59).`);
  if (suffix) {
    if (hour < 1 || hour > 12) throw bad(`"${raw}": ${hour}${suffix} is not a 12-hour time (1–12 am/pm).`);
    hour = (hour % 12) + (suffix === 'pm' ? 12 : 0);
  } else if (hour > 23) {
    throw bad(`"${raw}": hour ${hour} is out of range (00–23).`);
  }
  return { hour, minute };
}

function cronSchedule(expression: string, display: string, tz: string): CronSchedule {
  cronFor(expression, tz); // validates
  return { kind: 'cron', expression, display };
}

/** 5- or 6-field cron with names, or a croner nickname (`@daily`). */
function parseCron(raw: string, tz: string, minIntervalSeconds: number): CronSchedule {
  if (!raw.startsWith('@')) {
    const n = raw.split(' ').length;
    if (n !== 5 && n !== 6) {
      throw bad(`Cron expression "${raw}" has ${n} fields; use 5 (minute hour day-of-month month day-of-week) or 6 (seconds first).`);
    }
    checkCronFields(raw);
  } else if (raw.toLowerCase() === '@reboot') {
    throw bad('"@reboot" is not a schedule: cron jobs run on time, not at process start.');
  }
  const cron = cronFor(raw, tz);
  if (cron.nextRun(new Date(0)) === null && cron.nextRun() === null) {
    throw bad(`Cron expression "${raw}" never matches a date.`);
  }
  assertCronMinimum(raw, minIntervalSeconds);
  return { kind: 'cron', expression: raw, display: raw };
}

/** ISO timestamp one-shot; without an offset it is a wall time in the job's zone. */
function parseIso(raw: string, options: ParseScheduleOptions): CronSchedule {
  const m = ISO.exec(raw)!;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const [hour, minute, second] = [Number(m[4] ?? 0), Number(m[5] ?? 0), Number(m[6] ?? 0)];
  const ms = m[7] ? Number(m[7].padEnd(3, '0')) : 0;
  const probe = new Date(Date.UTC(year, month - 1, day, hour, minute, second));
  const outOf = (field: string, typed: string | undefined, allowed: string) =>
    bad(`"${raw}": ${field} ${typed} is out of range (${allowed}).`);
  if (month < 1 || month > 12) throw outOf('month', m[2], '01–12');
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (day < 1 || day > daysInMonth) throw outOf('day', m[3], `01–${daysInMonth} in ${m[1]}-${m[2]}`);
  if (hour > 23) throw outOf('hour', m[4], '00–23');
  if (minute > 59) throw outOf('minute', m[5], '00–59');
  if (second > 59) throw outOf('second', m[6], '00–59');
  if (probe.getUTCFullYear() !== year) throw bad(`"${raw}" is not a valid date and time.`);
  let atMs: number;
  if (m[8]) {
    const off = m[8].toUpperCase();
    let offsetMs = 0;
    if (off !== 'Z') {
      const o = /^([+-])(\d{2}):?(\d{2})$/.exec(off)!;
      if (Number(o[2]) > 14 || Number(o[3]) > 59) throw bad(`"${raw}": UTC offset ${off} is out of range.`);
      offsetMs = (o[1] === '-' ? -1 : 1) * (Number(o[2]) * 3600_000 + Number(o[3]) * 60_000);
    }
    atMs = probe.getTime() - offsetMs + ms;
  } else {
    atMs = instantOfWallTime({ year, month, day, hour, minute, second }, options.tz) + ms;
  }
  if (atMs < options.now - ONE_SHOT_PAST_TOLERANCE_MS) {
    throw bad(
      `"${raw}" is in the past (${isoUtc(atMs)}, ${Math.round((options.now - atMs) / 1000)}s ago); a one-shot must be in the future.`,
    );
  }
  return { kind: 'once', expression: isoUtc(atMs), display: `once at ${formatInZone(atMs, options.tz)}`, atMs };
}

function bad(message: string): ScheduleInputError {
  return new ScheduleInputError(message, { field: 'schedule' });
}
