/**
 * `hermes cron next`: the next fire times of a schedule, computed by the same
 * grammar and engine that arm real jobs, so a preview agrees exactly with when
 * a job created from the same text fires (no Redis needed).
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import { instantOfWallTime, nextOccurrences, type CronSchedule } from './cron-engine.ts';
import { parseSchedule } from './schedule-grammar.ts';

/** Result of a preview. Times are epoch ms, ascending. */
export interface SchedulePreview {
  schedule: CronSchedule;
  tz: string;
  fromMs: number;
  times: number[];
}

/** Largest `-n` accepted. */
export const MAX_PREVIEW_COUNT = 1000;

/**
 * Preview the next `count` fire times strictly after `fromMs`. Relative forms
 * (`in 30m`, intervals) are anchored at `fromMs`, as if the job were created then.
 * @throws ScheduleInputError for a bad schedule, zone or count
 */
export function previewSchedule(
  text: string,
  options: { tz: string; fromMs: number; count: number; minIntervalSeconds: number; maxScheduleChars?: number },
): SchedulePreview {
  if (!Number.isInteger(options.count) || options.count < 1 || options.count > MAX_PREVIEW_COUNT) {
    throw new ScheduleInputError(`\`n\` must be a whole number from 1 to ${MAX_PREVIEW_COUNT}, got ${options.count}.`, { field: 'n' });
  }
  const schedule = parseSchedule(text, {
    tz: options.tz,
    now: options.fromMs,
    minIntervalSeconds: options.minIntervalSeconds,
    maxChars: options.maxScheduleChars,
  });
  const times =
    schedule.kind === 'once'
      ? [Math.max(schedule.atMs, options.fromMs)]
      : nextOccurrences(schedule, options.tz, options.fromMs, options.count);
  return { schedule, tz: options.tz, fromMs: options.fromMs, times };
}

/**
 * Parse a `--from` instant: ISO-8601 with an offset, or without one as a wall
 * time in `tz`.
 * @throws ScheduleInputError when it is not a date
 */
export function parseInstant(text: string, tz: string): number {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,3})?)?)?$/.exec(text.trim());
  if (m) {
    const wall = { year: +m[1]!, month: +m[2]!, day: +m[3]!, hour: +(m[4] ?? 0), minute: +(m[5] ?? 0), second: +(m[6] ?? 0) };
    return instantOfWallTime(wall, tz) + (m[7] ? Math.round(Number(m[7]) * 1000) : 0);
  }
  const ms = Date.parse(text);
  if (!/^\d{4}-\d{2}-\d{2}/.test(text.trim()) || Number.isNaN(ms)) {
    throw new ScheduleInputError(`"${text}" is not an ISO-8601 date and time (e.g. 2025-03-09T00:00:00Z).`, { field: 'from' });
  }
  return ms;
}
