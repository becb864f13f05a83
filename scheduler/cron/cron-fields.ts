/**
 * What a cron expression's fields may hold, checked before croner parses it,
 * so an error names the field, the value as the user typed it and the allowed
 * range (field report F15: croner counts months and days from zero inside and
 * reports `month: 12` for a typed 13). croner stays the only matcher: this
 * module checks ranges and, through croner's own `CronPattern`, the shortest
 * time between two fires of an expression (field report F14).
 */
import { CronPattern } from 'croner';
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import { formatSeconds } from '../interval.ts';
import { nameTable, type NameTable } from '../names/name-table.ts';

/** A cron field: its name in messages and the values it allows. */
interface FieldSpec {
  name: string;
  min: number;
  max: number;
  /** Names allowed in the field, lower-case, with their numbers. */
  names?: NameTable<number>;
}

const MONTHS = nameTable({
  jan: 1,
  feb: 2,
  mar: 3,
  apr: 4,
  may: 5,
  jun: 6,
  jul: 7,
  aug: 8,
  sep: 9,
  oct: 10,
  nov: 11,
  dec: 12,
});
const WEEKDAYS = nameTable({ sun: 0, mon: 1, tue: 2, wed: 3, thu: 4, fri: 5, sat: 6 });

const SECOND: FieldSpec = { name: 'second', min: 0, max: 59 };
const FIVE: FieldSpec[] = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day-of-month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: MONTHS },
  { name: 'day-of-week', min: 0, max: 7, names: WEEKDAYS },
];

function range(spec: FieldSpec): string {
  const names = spec.names === MONTHS ? ' or jan–dec' : spec.names === WEEKDAYS ? ' or sun–sat, 0 and 7 are Sunday' : '';
  return `${spec.min}–${spec.max}${names}`;
}

/**
 * Check each field of a 5- or 6-field expression against its range.
 * Modifiers croner supports (`L`, `W`, `#n`, `#L`, `?`, a leading `+` on day-of-week)
 * pass; their syntax is left to croner.
 * @throws ScheduleInputError naming the field, the value as typed and the
 *   allowed range, e.g. `month 13 is out of range (1–12 or jan–dec) in "0 0 * 13 *"`
 */
export function checkCronFields(expression: string): void {
  const fields = expression.trim().split(/\s+/);
  const specs = fields.length === 6 ? [SECOND, ...FIVE] : fields.length === 5 ? FIVE : undefined;
  if (!specs) return; // the field count is checked by the caller
  fields.forEach((field, i) => checkField(field, specs[i]!, expression));
}

function checkField(field: string, spec: FieldSpec, expression: string): void {
  const where = `in "${expression}"`;
  const body = spec.name === 'day-of-week' && field.startsWith('+') ? field.slice(1) : field;
  for (const item of body.split(',')) {
    if (item === '') throw new ScheduleInputError(`${spec.name} field "${field}" has an empty list item ${where}.`, { field: spec.name });
    const [base, step, ...extra] = item.split('/');
    if (extra.length > 0) throw new ScheduleInputError(`${spec.name} "${item}" has more than one step ${where}.`, { field: spec.name });
    if (step !== undefined) {
      if (!/^\d+$/.test(step)) {
        throw new ScheduleInputError(`${spec.name} step "${step}" is not a whole number ${where} (e.g. */5).`, { field: spec.name });
      }
      const span = spec.max - spec.min + 1;
      if (Number(step) < 1 || Number(step) > span) {
        throw new ScheduleInputError(`${spec.name} step ${step} is out of range (1–${span}) ${where}.`, { field: spec.name });
      }
    }
    if (base === '*' || base === '?') continue;
    for (const value of base!.split('-')) checkValue(value, item, spec, where);
  }
}

function checkValue(typed: string, item: string, spec: FieldSpec, where: string): void {
  // Modifiers on a value: `5L`, `15W`, `1#2`, `FRI#L`, `L`, `LW` (croner checks where they are allowed).
  const value = typed.replace(/#(\d+|l)$/i, '').replace(/(?<=\d)[lw]$/i, '');
  if (/^l?w?$/i.test(value) && value !== '') return;
  if (/^\d+$/.test(value)) {
    const n = Number(value);
    if (n < spec.min || n > spec.max) {
      throw new ScheduleInputError(`${spec.name} ${value} is out of range (${range(spec)}) ${where}.`, { field: spec.name });
    }
    return;
  }
  if (spec.names && spec.names[value.toLowerCase()] !== undefined) return;
  const what = value === '' ? `"${item}"` : `"${value}"`;
  throw new ScheduleInputError(`${spec.name} ${what} is not a valid value (${range(spec)}) ${where}.`, { field: spec.name });
}

/**
 * The shortest time between two consecutive fires of a cron expression, in
 * seconds, from croner's parse of its time fields: the smallest gap between
 * two matching times of one day, and across midnight (last time of a day to
 * the first of the next, as if both days matched). It may be smaller than any
 * real gap of a rare pattern, never larger, so a minimum checked against it
 * holds for every fire.
 * @param expression - an expression croner accepts (5 or 6 fields, or a nickname)
 * @param stopBelowSeconds - return as soon as a gap below this is found (the
 *   answer is then that gap, not necessarily the smallest)
 */
export function minCronGapSeconds(expression: string, stopBelowSeconds = 0): number {
  const p = new CronPattern(expression, undefined, { mode: '5-or-6-parts' });
  const pick = (bits: number[]) => bits.flatMap((b, i) => (b ? [i] : []));
  const [hours, minutes, seconds] = [pick(p.hour), pick(p.minute), pick(p.second)];
  // Nested in ascending order, the times of day come out sorted: one pass, no array.
  let first = -1;
  let previous = -1;
  let gap = 86_400;
  for (const h of hours) {
    for (const m of minutes) {
      for (const s of seconds) {
        const t = h * 3600 + m * 60 + s;
        if (first < 0) first = t;
        else gap = Math.min(gap, t - previous);
        previous = t;
        if (gap < stopBelowSeconds) return gap;
      }
    }
  }
  return Math.min(gap, 86_400 - previous + first);
}

/**
 * Refuse a cron expression whose fires can come closer than the minimum.
 * @param minSeconds - `cron.min_interval_seconds`
 * @throws ScheduleInputError naming the shortest gap and the minimum
 */
export function assertCronMinimum(expression: string, minSeconds: number): void {
  if (minSeconds <= 0) return;
  const gap = minCronGapSeconds(expression, minSeconds);
  if (gap < minSeconds) {
    throw new ScheduleInputError(
      `"${expression}" fires as often as every ${formatSeconds(gap)}; the minimum is ${formatSeconds(minSeconds)} (cron.min_interval_seconds).`,
      { field: 'schedule' },
    );
  }
}
