/**
 * The one time engine of cron jobs: when does a schedule fire next, in which
 * zone, and how wall times map to instants. Previews (`hermes cron next`), the
 * stored `next_run_at` and the BullMQ repeat strategy that decides real fire
 * times all call `nextOccurrence`, so a preview and a real run always agree.
 *
 * No function here reads the process time zone (`TZ`): every calendar
 * computation takes an explicit IANA zone. The host zone is only consulted by
 * `defaultTimeZone` when neither `--tz` nor the configured `timezone` is set,
 * and the result is stored on the job, so later runs never depend on it.
 */
import { Cron } from 'croner';
import { ScheduleInputError } from '../errors/schedule-input-error.ts';

/** The jitter of a recurring schedule (policy in jitter.ts): the window and the job's offset in it. */
export interface ScheduleJitter {
  /** The window (`--jitter`), whole seconds, > 0. */
  seconds: number;
  /** The job's fixed offset, in [0, seconds × 1000): a whole number of seconds, in ms. */
  offsetMs: number;
}

/** A parsed schedule as stored on a cron job. Times are epoch milliseconds. */
export type CronSchedule =
  | {
      kind: 'interval';
      /** What the user typed, normalised (`every 2h`). */
      expression: string;
      display: string;
      /** Period in milliseconds; fixed-rate in absolute time. */
      everyMs: number;
      /** Occurrences are `anchorMs + k × everyMs` for k ≥ 1 (the creation time). */
      anchorMs: number;
      /** `--jitter`: every occurrence shifted by `offsetMs` (jitter.ts); absent when none. */
      jitter?: ScheduleJitter;
    }
  | {
      kind: 'cron';
      /** 5- or 6-field cron expression handed to croner. */
      expression: string;
      display: string;
      /** `--jitter`: every occurrence shifted by `offsetMs` (jitter.ts); absent when none. */
      jitter?: ScheduleJitter;
    }
  | {
      kind: 'once';
      expression: string;
      display: string;
      /** The single occurrence. */
      atMs: number;
    }
  | {
      /** No times of its own: the job runs only after other jobs' runs (`CronJob.after`, cron-after.ts). */
      kind: 'after';
      expression: string;
      display: string;
      /** Never set: there are no times to shift. */
      jitter?: never;
    };

/*
 * DST policy (docs/DESIGN.md §7), Vixie cron's rule for fixed times, applied here:
 *  - A fixed-time job — seconds, minutes and hours each a single value or a list
 *    of values, no `*`, step or range (`30 2 * * *`, `30 2,5 * * *`, `@daily`) —
 *    runs at every listed wall time of every matching day. A wall time in the
 *    spring-forward gap runs at the first valid instant after the gap (03:00 local
 *    when 02:00–03:00 is skipped), also when the gap ends at midnight and that
 *    instant is the next calendar day (America/Nuuk 2024-03-30 23:00 → 00:00 on
 *    the 31st; field reports F31–F33). Two listed times that land on one instant
 *    run once. A wall time that occurs twice in the autumn runs once, at the first
 *    (earlier) occurrence. `fixedTimeNext` decides these; croner decides which
 *    days match (the day rule below).
 *  - Every other job (wildcards, steps or ranges in the time fields) runs at every
 *    real instant that matches, as croner computes it: it skips wall times that do
 *    not exist and runs in both copies of a repeated hour.
 *  Deviation from Vixie cron: a range (`0 1-3 * * *`) counts as interval-style,
 *  as a step does; Vixie treats every field not starting with `*` as fixed.
 *  - Interval schedules (`every 2h`) are fixed-rate in absolute time and ignore
 *    wall clocks entirely; one-shot wall times in a gap move to the end of the
 *    gap and ambiguous ones take the earlier instant, like fixed-time jobs.
 */
const CRON_OPTIONS = { paused: true, mode: '5-or-6-parts' as const };

/*
 * Day rule (Vixie cron, crontab(5); field report F13). A day field counts as
 * restricted only when it does not begin with `*` (`?` is croner's spelling of
 * `*`): `*`, `*\/2` and `*\/3` are unrestricted, `1-15`, `1,15`, `mon` are
 * restricted.
 *  - Both day fields restricted (`0 0 1,15 * mon`): day-of-month OR day-of-week.
 *  - Otherwise the two are AND-ed (`0 0 *\/2 * 1` runs on odd days that are
 *    Mondays; `0 0 * * mon` on Mondays; `0 0 1 * *` on the 1st).
 *  This is Vixie's DOM_STAR/DOW_STAR test: a field "is a star" when its first
 *  character is `*`, whatever follows. croner decides the match; this only
 *  chooses its `domAndDow` option per expression (croner's own default treats
 *  only a bare `*` as unrestricted, which OR-s `*\/2` with the weekday).
 *  croner's `+` prefix on the day-of-week field also forces AND.
 */

/**
 * The croner `domAndDow` setting of an expression under the day rule above:
 * `true` (AND) unless both day fields are restricted.
 * @param expression - 5- or 6-field cron, or a nickname (`@daily`)
 */
export function dayFieldsAnded(expression: string): boolean {
  const fields = expression.trim().split(/\s+/);
  if (fields.length < 5) return true; // nicknames all leave one day field `*`
  const [dom, dow] = fields.length === 6 ? [fields[3]!, fields[5]!] : [fields[2]!, fields[4]!];
  const star = (f: string) => f.startsWith('*') || f.startsWith('?');
  return star(dom) || star(dow);
}

const cronCache = new Map<string, Cron>();

/**
 * A paused croner instance for `expression` in `tz` (cached; croner instances
 * are only used for their `nextRun`, never started).
 * @param domAndDow - the day rule's setting; derived from `expression` unless given (a
 *   fixed-time job's day matcher takes its job's)
 * @throws ScheduleInputError when croner rejects the expression or zone
 */
export function cronFor(expression: string, tz: string, domAndDow = dayFieldsAnded(expression)): Cron {
  const key = `${tz}\u0000${domAndDow ? 'and' : 'or'}\u0000${expression}`;
  let cron = cronCache.get(key);
  if (!cron) {
    try {
      cron = new Cron(expression, { ...CRON_OPTIONS, domAndDow, timezone: tz });
    } catch (err) {
      const detail = String((err as Error).message)
        .replace(/^CronPattern:\s*/, '')
        .replace(/^CronOptions:\s*/, '');
      throw new ScheduleInputError(`Invalid cron expression "${expression}": ${detail}`, { field: 'schedule', cause: err });
    }
    // Stryker disable next-line all: the cache only saves work; cleared or not, the next lookup gives the same answer.
    if (cronCache.size > 5000) cronCache.clear();
    cronCache.set(key, cron);
  }
  return cron;
}

/**
 * The first occurrence strictly after `afterMs`, with the schedule's jitter
 * offset applied (every caller — previews, `next_run_at`, the repeat strategy —
 * gets the shifted time).
 * @param tz - IANA zone the schedule's wall times are read in
 * @returns epoch ms, or `undefined` when the schedule has no further occurrence
 *   (a one-shot that passed, a cron expression that never matches again)
 */
export function nextOccurrence(schedule: CronSchedule, tz: string, afterMs: number): number | undefined {
  // Jitter (jitter.ts): the occurrences are the schedule's own times plus a fixed
  // offset, so the first one after `afterMs` is the first own time after `afterMs - offset`.
  if (schedule.kind === 'after') return undefined;
  const offsetMs = schedule.kind === 'once' ? 0 : (schedule.jitter?.offsetMs ?? 0);
  if (offsetMs === 0) return unshiftedNext(schedule, tz, afterMs);
  const next = unshiftedNext(schedule, tz, afterMs - offsetMs);
  return next === undefined ? undefined : next + offsetMs;
}

function unshiftedNext(schedule: Exclude<CronSchedule, { kind: 'after' }>, tz: string, afterMs: number): number | undefined {
  switch (schedule.kind) {
    case 'interval': {
      const k = afterMs < schedule.anchorMs ? 1 : Math.floor((afterMs - schedule.anchorMs) / schedule.everyMs) + 1;
      return schedule.anchorMs + Math.max(1, k) * schedule.everyMs;
    }
    case 'once':
      return schedule.atMs > afterMs ? schedule.atMs : undefined;
    case 'cron': {
      const known = knownNext(schedule.expression, tz, afterMs);
      if (known !== undefined) return known;
      const fixed = fixedTimesOf(schedule.expression);
      const found = fixed
        ? fixedTimeNext(fixed, schedule.expression, tz, afterMs)
        : cronFor(schedule.expression, tz).nextRun(new Date(afterMs))?.getTime();
      if (found !== undefined) rememberNext(schedule.expression, tz, afterMs, found);
      return found;
    }
  }
}

/**
 * Answers found before, by expression and zone: the span `[fromMs, nextMs)` in which every instant's next
 * occurrence is `nextMs`. The occurrences of an expression in a zone never change, so when `nextMs` is the
 * first one after `fromMs`, it is the first one after any instant from `fromMs` up to it. The jobs of one
 * instant (the top of the hour) ask the same question thousands of times — the job scheduler's next time,
 * the misfire window — and croner with the zone's wall times costs tens of µs an answer.
 */
const knownSpans = new Map<string, { fromMs: number; nextMs: number }>();

function knownNext(expression: string, tz: string, afterMs: number): number | undefined {
  const span = knownSpans.get(`${tz}\u0000${expression}`);
  return span && span.fromMs <= afterMs && afterMs < span.nextMs ? span.nextMs : undefined;
}

function rememberNext(expression: string, tz: string, fromMs: number, nextMs: number): void {
  const key = `${tz}\u0000${expression}`;
  const span = knownSpans.get(key);
  // Widen the span known when the new one joins it (the same next, asked from earlier); else the latest wins.
  if (span && span.nextMs === nextMs && fromMs < span.fromMs) span.fromMs = fromMs;
  else {
    if (!span && knownSpans.size >= 5000) knownSpans.clear();
    knownSpans.set(key, { fromMs, nextMs });
  }
}

/** croner's nicknames with a fixed time, as the fields they stand for (`@hourly` is not one). */
const FIXED_NICKNAMES: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
};

/** A fixed-time expression: its times of day and its day fields. */
interface FixedTimes {
  /** Seconds since local midnight, ascending, distinct. */
  secondsOfDay: number[];
  /** `dom month dow` as typed. */
  dayFields: string;
}

const fixedCache = new Map<string, FixedTimes | null>();

/** The times of day of a fixed-time expression (the DST policy above), or null for any other. */
function fixedTimesOf(expression: string): FixedTimes | null {
  const cached = fixedCache.get(expression);
  if (cached !== undefined) return cached;
  const trimmed = expression.trim();
  const fields = (Object.hasOwn(FIXED_NICKNAMES, trimmed.toLowerCase()) ? FIXED_NICKNAMES[trimmed.toLowerCase()]! : trimmed).split(/\s+/);
  let result: FixedTimes | null = null;
  if (fields.length === 5 || fields.length === 6) {
    const [second, minute, hour, ...days] = fields.length === 6 ? fields : ['0', ...fields];
    const values = (field: string) => (/^\d+(,\d+)*$/.test(field) ? field.split(',').map(Number) : undefined);
    const [s, m, h] = [values(second!), values(minute!), values(hour!)];
    if (s && m && h) {
      const all = h.flatMap((hh) => m.flatMap((mm) => s.map((ss) => hh * 3600 + mm * 60 + ss)));
      result = { secondsOfDay: [...new Set(all)].sort((a, b) => a - b), dayFields: days.join(' ') };
    }
  }
  // Stryker disable next-line all: the cache only saves work; cleared or not, the next lookup gives the same answer.
  if (fixedCache.size > 5000) fixedCache.clear();
  fixedCache.set(expression, result);
  return result;
}

/**
 * The first instant after `afterMs` of a fixed-time job (the DST policy above): croner
 * names the matching calendar days (read in UTC, where every day has every time), and
 * each listed wall time of such a day becomes an instant in `tz` by `instantOfWallTime`.
 * That map never goes backwards, so the first instant past `afterMs` is the answer.
 */
function fixedTimeNext(fixed: FixedTimes, expression: string, tz: string, afterMs: number): number | undefined {
  const days = cronFor(`0 0 12 ${fixed.dayFields}`, 'UTC', dayFieldsAnded(expression));
  const start = wallTimeOf(afterMs, tz);
  // From the day before `afterMs`'s wall date: its gap-moved times can fall after midnight.
  let cursor = Date.UTC(start.year, start.month - 1, start.day - 1, 11);
  for (let day = days.nextRun(new Date(cursor)); day; day = days.nextRun(new Date(cursor))) {
    for (const s of fixed.secondsOfDay) {
      const at = instantOfWallTime(
        {
          year: day.getUTCFullYear(),
          month: day.getUTCMonth() + 1,
          day: day.getUTCDate(),
          hour: Math.floor(s / 3600),
          minute: Math.floor(s / 60) % 60,
          second: s % 60,
        },
        tz,
      );
      if (at > afterMs) return at;
    }
    cursor = day.getTime();
  }
  return undefined;
}

/** The next `count` occurrences strictly after `afterMs` (fewer when the schedule ends). */
export function nextOccurrences(schedule: CronSchedule, tz: string, afterMs: number, count: number): number[] {
  const out: number[] = [];
  let cursor = afterMs;
  while (out.length < count) {
    const next = nextOccurrence(schedule, tz, cursor);
    if (next === undefined) break;
    out.push(next);
    cursor = next;
  }
  return out;
}

/**
 * The time between `dueMs` and the occurrence after it, used for the misfire
 * grace window; `undefined` for a one-shot or a schedule that ends.
 */
export function periodAt(schedule: CronSchedule, tz: string, dueMs: number): number | undefined {
  if (schedule.kind === 'interval') return schedule.everyMs;
  if (schedule.kind === 'once' || schedule.kind === 'after') return undefined;
  const next = nextOccurrence(schedule, tz, dueMs);
  return next === undefined ? undefined : next - dueMs;
}

/** True when `tz` is an IANA zone this runtime knows. */
export function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/**
 * Validate a zone name.
 * @throws ScheduleInputError naming the zone when it is unknown
 */
export function assertTimeZone(tz: string): string {
  if (tz.length === 0 || !isTimeZone(tz)) {
    throw new ScheduleInputError(`Unknown time zone "${tz}": use an IANA name like Europe/Berlin or UTC.`, { field: 'tz' });
  }
  return tz;
}

/**
 * The zone of a new job: `--tz`, else the configured `timezone`, else the host's.
 * @throws ScheduleInputError when the chosen zone is unknown
 */
export function defaultTimeZone(explicit: string | undefined, configured: string | undefined): string {
  if (explicit !== undefined) return assertTimeZone(explicit);
  if (configured) return assertTimeZone(configured);
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}

/** Wall-clock fields of an instant in a zone (month 1–12). */
export interface WallTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();
const nameFormatters = new Map<string, Intl.DateTimeFormat>();

/** The wall time of `ms` in `tz`. */
export function wallTimeOf(ms: number, tz: string): WallTime {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(tz, f);
  }
  const parts: Record<string, number> = {};
  for (const p of f.formatToParts(new Date(ms))) {
    if (p.type !== 'literal') parts[p.type] = Number(p.value);
  }
  return {
    year: parts.year!,
    month: parts.month!,
    day: parts.day!,
    hour: parts.hour! === 24 ? 0 : parts.hour!,
    minute: parts.minute!,
    second: parts.second!,
  };
}

/** Offset of `tz` from UTC at instant `ms`, in ms (positive east of Greenwich). */
export function zoneOffsetMs(ms: number, tz: string): number {
  const w = wallTimeOf(ms, tz);
  const asUtc = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second);
  return asUtc - (ms - (((ms % 1000) + 1000) % 1000));
}

/**
 * The instant of a wall time in `tz`. A wall time in a spring-forward gap
 * maps to the first instant after the gap; a repeated wall time maps to the
 * earlier instant (the DST policy above).
 */
export function instantOfWallTime(w: WallTime, tz: string): number {
  const naive = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second);
  const offsets = new Set([zoneOffsetMs(naive - 86_400_000, tz), zoneOffsetMs(naive, tz), zoneOffsetMs(naive + 86_400_000, tz)]);
  const matches: number[] = [];
  for (const off of offsets) {
    const t = naive - off;
    if (sameWall(wallTimeOf(t, tz), w)) matches.push(t);
  }
  if (matches.length > 0) return Math.min(...matches);
  // In a gap: find the transition between the two candidate instants.
  const candidates = [...offsets].map((off) => naive - off).sort((a, b) => a - b);
  let lo = candidates[0]!;
  let hi = candidates[candidates.length - 1]!;
  const before = zoneOffsetMs(lo, tz);
  while (hi - lo > 1000) {
    const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
    if (zoneOffsetMs(mid, tz) === before) lo = mid;
    else hi = mid;
  }
  return hi;
}

function sameWall(a: WallTime, b: WallTime): boolean {
  return a.year === b.year && a.month === b.month && a.day === b.day && a.hour === b.hour && a.minute === b.minute && a.second === b.second;
}

/** ISO-8601 UTC without milliseconds when they are zero: `2025-03-09T07:00:00Z`. */
export function isoUtc(ms: number): string {
  const iso = new Date(ms).toISOString();
  return iso.endsWith('.000Z') ? `${iso.slice(0, -5)}Z` : iso;
}

/** `2026-03-30 08:00 CEST` — an instant as wall time in `tz`, with the zone's abbreviation. */
export function formatInZone(ms: number, tz: string, options: { seconds?: boolean } = {}): string {
  const w = wallTimeOf(ms, tz);
  const pad = (n: number) => String(n).padStart(2, '0');
  let nf = nameFormatters.get(tz);
  if (!nf) {
    nf = new Intl.DateTimeFormat('en-US', { timeZone: tz, timeZoneName: 'short' });
    nameFormatters.set(tz, nf);
  }
  const name = nf.formatToParts(new Date(ms)).find((p) => p.type === 'timeZoneName')?.value ?? tz;
  const time = `${pad(w.hour)}:${pad(w.minute)}${options.seconds || w.second !== 0 ? `:${pad(w.second)}` : ''}`;
  return `${w.year}-${pad(w.month)}-${pad(w.day)} ${time} ${name}`;
}

/** `in 4m`, `in 2h10m`, `3d ago`, `now` — a compact relative time. */
export function formatRelative(ms: number, now: number): string {
  const diff = ms - now;
  const abs = Math.abs(diff);
  if (abs < 1000) return 'now';
  const s = Math.round(abs / 1000);
  let text: string;
  if (s < 60) text = `${s}s`;
  else if (s < 3600) text = `${Math.floor(s / 60)}m${s % 60 && s < 600 ? `${s % 60}s` : ''}`;
  else if (s < 86_400) text = `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60) ? `${Math.floor((s % 3600) / 60)}m` : ''}`;
  else text = `${Math.floor(s / 86_400)}d${Math.floor((s % 86_400) / 3600) ? `${Math.floor((s % 86_400) / 3600)}h` : ''}`;
  return diff > 0 ? `in ${text}` : `${text} ago`;
}
