/**
 * Jitter of a cron job (`--jitter <duration>`, systemd's `RandomizedDelaySec`):
 * every occurrence of a recurring schedule fires a fixed offset after the
 * schedule's own time, so many jobs on the same schedule (`0 * * * *`) do not
 * all start in the same second.
 *
 * Policy:
 *  - The offset is a pure function of the job id and the jitter window: whole
 *    seconds in [0, jitter), from a SHA-256 of the id. It is the same in every
 *    process (workers, CLI previews, `/api`), so every worker computes the same
 *    fire time and the occurrence id (which names the due time) stays unique:
 *    exactly-once holds as without jitter.
 *  - The offset is fixed per job, not drawn per occurrence (unlike systemd):
 *    fires keep their spacing, and a preview is the real fire time.
 *  - It applies to every occurrence of interval and cron schedules. A
 *    one-shot has one time the user chose; `--jitter` with one is refused.
 *  - The window must be smaller than the schedule's shortest gap between two
 *    fires (`minCronGapSeconds` for cron expressions, the period for
 *    intervals), so a shifted fire always comes before the schedule's next
 *    own time: each run stays in its slot (a constant offset never reorders
 *    occurrences, but an hourly run shifted by 2 h would pass for a later
 *    hour's run; systemd's window has the same meaning).
 *  - Shifted times are absolute: a job due 02:00 local with offset 90 s fires
 *    at 02:01:30 of the same instant line, whatever the DST rule chose for 02:00.
 *  - Misfire grace, lateness and occurrence ids all use the shifted due time.
 */
import { createHash } from 'node:crypto';
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import { formatSeconds, parseIntervalToken } from '../interval.ts';
import type { CronSchedule, ScheduleJitter } from './cron-engine.ts';
import { minCronGapSeconds } from './cron-fields.ts';

/**
 * The fixed offset of a job, in ms: a whole number of seconds in [0, jitterSeconds).
 * Pure: the same id and window give the same offset in every process.
 */
export function jitterOffsetMs(jobId: string, jitterSeconds: number): number {
  if (jitterSeconds <= 0) return 0;
  const hash = createHash('sha256').update(`cron-jitter:${jobId}`).digest();
  return (hash.readUIntBE(0, 6) % jitterSeconds) * 1000;
}

/**
 * Parse a jitter window as typed: a duration (`30s`, `5m`, `1h30m`), a whole
 * number of seconds (`90`, or a JSON number), or `0` for none.
 * @returns whole seconds ≥ 0
 * @throws ScheduleInputError naming the field and the value
 */
export function parseJitter(value: string | number): number {
  if (typeof value === 'number') {
    if (Number.isInteger(value) && value >= 0) return value;
  } else {
    const t = value.trim();
    if (/^\d+$/.test(t)) return Number(t);
    if (/^0+(\.0+)?[a-z]*$/i.test(t)) return 0;
    const seconds = parseIntervalToken(t);
    if (seconds !== undefined) return seconds;
  }
  throw new ScheduleInputError(`\`jitter\` must be a duration of 0 or more (e.g. 30s, 5m, 1h, or whole seconds), got "${value}".`, {
    field: 'jitter',
  });
}

/**
 * The schedule with a job's jitter set (or removed when `jitterSeconds` is 0).
 * @throws ScheduleInputError when the window is not below the schedule's
 *   shortest gap between fires, or the schedule is a one-shot
 */
export function withJitter(schedule: CronSchedule, jobId: string, jitterSeconds: number): CronSchedule {
  const { jitter: _old, ...base } = schedule as CronSchedule & { jitter?: ScheduleJitter };
  if (jitterSeconds === 0) return base;
  if (base.kind === 'once' || base.kind === 'after') {
    throw new ScheduleInputError(
      `\`jitter\` ${formatSeconds(jitterSeconds)} applies only to recurring schedules; "${base.display}" ${base.kind === 'once' ? 'runs once' : 'has no times of its own'} (give \`jitter\` 0).`,
      { field: 'jitter' },
    );
  }
  const gapSeconds = base.kind === 'interval' ? base.everyMs / 1000 : minCronGapSeconds(base.expression);
  if (jitterSeconds >= gapSeconds) {
    throw new ScheduleInputError(
      `\`jitter\` ${formatSeconds(jitterSeconds)} must be less than ${formatSeconds(gapSeconds)}, the shortest time between two fires of "${base.display}".`,
      { field: 'jitter' },
    );
  }
  return { ...base, jitter: { seconds: jitterSeconds, offsetMs: jitterOffsetMs(jobId, jitterSeconds) } };
}

/** The jitter window of a schedule in seconds (0 when none). */
export function jitterSecondsOf(schedule: CronSchedule): number {
  return schedule.kind === 'once' ? 0 : (schedule.jitter?.seconds ?? 0);
}
