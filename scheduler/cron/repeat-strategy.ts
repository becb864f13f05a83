/**
 * The BullMQ `repeatStrategy` of the `ticks` queue: croner (through
 * `nextOccurrence`) decides every fire time of a cron job scheduler, so
 * BullMQ's own cron parser never does.
 *
 * BullMQ calls the strategy only for schedulers with a `pattern`: when a
 * scheduler is upserted (with "now") and when a worker picks up a scheduler's
 * job (with `max(thisJobMillis, now)`), to create the next job
 * `repeat:<schedulerId>:<millis>`. Recurring cron jobs are therefore always
 * stored with a `pattern`, also interval schedules, whose plan is encoded into
 * the pattern string (`every:<ms>:<anchorMs>`), and a job's jitter offset too
 * (`jitter:<s>:<offsetMs>:<pattern>`), so the strategy needs nothing but the
 * pattern to compute the same shifted time as every preview. Loop and heartbeat schedulers
 * use `every` and never reach this function.
 *
 * Because the next job is computed from the pick-up time, an outage leaves at
 * most one overdue job per scheduler, and the job after it is the first
 * occurrence after the pick-up: missed occurrences coalesce into one, which the
 * worker then runs late, catches up once or skips (see misfire.ts).
 *
 * Both the `ticks` Queue and every Worker of the `ticks` queue must be created
 * with `settings: { repeatStrategy: cronRepeatStrategy }`: the Queue through
 * `openQueues` (scheduler/services.ts), which hands it to store/queues.ts.
 */
import type { RepeatOptions } from 'bullmq';
import { nextOccurrence, type CronSchedule } from './cron-engine.ts';

const EVERY_PREFIX = 'every:';
/** A jittered schedule: `jitter:<seconds>:<offsetMs>:<pattern of the unshifted schedule>`. */
const JITTER_PREFIX = 'jitter:';

/** The `pattern` string a schedule is stored under in its BullMQ job scheduler. */
export function encodePattern(schedule: CronSchedule): string {
  if (schedule.kind === 'once' || schedule.kind === 'after') throw new Error(`${schedule.kind} cron jobs have no job scheduler`);
  const own = schedule.kind === 'interval' ? `${EVERY_PREFIX}${schedule.everyMs}:${schedule.anchorMs}` : schedule.expression;
  return schedule.jitter ? `${JITTER_PREFIX}${schedule.jitter.seconds}:${schedule.jitter.offsetMs}:${own}` : own;
}

/** The schedule a stored `pattern` stands for (inverse of `encodePattern`). */
export function decodePattern(pattern: string): CronSchedule {
  if (pattern.startsWith(JITTER_PREFIX)) {
    // Stryker disable next-line Regex: the prefix is checked above and `(.*)` with `s` reaches the end, so neither anchor changes a match.
    const m = /^jitter:(\d+):(\d+):(.*)$/s.exec(pattern);
    if (!m) throw new Error(`bad jitter pattern ${pattern}`);
    const own = decodePattern(m[3]!);
    // Stryker disable next-line all: decodePattern yields only interval and cron schedules; this line narrows the type.
    if (own.kind === 'once' || own.kind === 'after') throw new Error(`bad jitter pattern ${pattern}`);
    return { ...own, jitter: { seconds: Number(m[1]), offsetMs: Number(m[2]) } };
  }
  if (pattern.startsWith(EVERY_PREFIX)) {
    const [everyMs, anchorMs] = pattern.slice(EVERY_PREFIX.length).split(':').map(Number);
    return { kind: 'interval', expression: pattern, display: pattern, everyMs: everyMs!, anchorMs: anchorMs! };
  }
  return { kind: 'cron', expression: pattern, display: pattern };
}

/**
 * BullMQ repeat strategy: the first occurrence strictly after `millis` in the
 * scheduler's zone (`opts.tz`, UTC when absent).
 * @returns epoch ms, or `undefined` when the schedule has no further occurrence
 *   (BullMQ then adds no job)
 */
export function cronRepeatStrategy(millis: number, opts: RepeatOptions): number | undefined {
  if (!opts.pattern) return undefined;
  try {
    return nextOccurrence(decodePattern(opts.pattern), opts.tz ?? 'UTC', millis);
  } catch {
    // An invalid pattern cannot reach the store (the grammar validates first); if one
    // does, the scheduler stops instead of crashing the worker.
    return undefined;
  }
}
