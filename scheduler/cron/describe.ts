/**
 * A schedule in words, for every surface that shows one (`hermes cron`, the console):
 * cronstrue for cron expressions, the display form for the others.
 */
import cronstrue from 'cronstrue';
import { dayFieldsAnded, type CronSchedule } from './cron-engine.ts';

/**
 * A cron expression in words (cronstrue, 24-hour clock), e.g. `0 9 * * 1-5` →
 * "At 09:00, Monday through Friday"; `undefined` when cronstrue cannot read it.
 * When both day fields are given, cronstrue's "…, and on Monday" reads the same
 * for both day rules, so the rule that applies (`dayFieldsAnded`, docs/CRON.md)
 * is added: `0 0 *\/2 * 1` → "…, and on Monday (days matching both)",
 * `0 0 1,15 * 1` → "… (days matching either)".
 */
export function describeCron(expression: string): string | undefined {
  let words: string;
  try {
    words = cronstrue.toString(expression, { use24HourTimeFormat: true, verbose: false });
  } catch {
    return undefined;
  }
  const fields = expression.trim().split(/\s+/);
  if (fields.length < 5) return words;
  const [dom, dow] = fields.length === 6 ? [fields[3]!, fields[5]!] : [fields[2]!, fields[4]!];
  const bare = (f: string) => f === '*' || f === '?';
  if (bare(dom) || bare(dow)) return words;
  return `${words} (days matching ${dayFieldsAnded(expression) ? 'both' : 'either'})`;
}

/**
 * How a schedule is shown: its display form; a raw cron expression with its
 * description beside it (`0 9 * * 1-5 · At 09:00, Monday through Friday`), and a
 * converted one with the expression it became (`weekdays at 9am = 0 9 * * 1-5`).
 */
export function scheduleText(schedule: CronSchedule): string {
  if (schedule.kind !== 'cron') return schedule.display;
  const words = describeCron(schedule.expression);
  if (schedule.display === schedule.expression) return words ? `${schedule.expression} · ${words}` : schedule.expression;
  return `${schedule.display} = ${schedule.expression}`;
}

/** `scheduleText` with the job's zone after it, unless the text already ends with it (`once at … UTC`). */
export function scheduleTextInZone(schedule: CronSchedule, tz: string): string {
  const text = scheduleText(schedule);
  return text.endsWith(` ${tz}`) ? text : `${text} (${tz})`;
}
