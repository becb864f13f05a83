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
 * The prefetch lead (`cron.prefetch_lead_ms`, at most half the schedule's shortest period: `leadFor`),
 * written here only: a scheduler armed with a lead releases each occurrence's job `leadMs` before it is due (`lead:<ms>:<pattern>`), so that at the
 * top of the hour the worker has fetched the burst before it is due and starts each turn on the due
 * time (it holds the job until then: `worker/cron/cron-tick-jobs.ts`). A job's time is then always
 * "due minus the lead" (`dueAtOfJob`), and the strategy answers the next occurrence strictly after
 * `millis + leadMs`, minus the lead. What that leaves out, each made good by a job of its own for the
 * occurrence (the "passed first" job, `CronStore.arm`):
 *  - at arming, an occurrence due within the lead (the first job would be released in the past);
 *  - at a pick-up later than the lead allows (a worker outage, a starved worker), each occurrence due
 *    between the pick-up and the job scheduler's next job (`skippedByLead`).
 * A scheduler armed before the lead existed, or with 0, has no prefix and no lead.
 *
 * Both the `ticks` Queue and every Worker of the `ticks` queue must be created
 * with `settings: { repeatStrategy: cronRepeatStrategy }`: the Queue through
 * `openQueues` (scheduler/services.ts), which hands it to store/queues.ts.
 */
import type { RepeatOptions } from 'bullmq';
import { nextOccurrence, nextOccurrences, type CronSchedule } from './cron-engine.ts';

const EVERY_PREFIX = 'every:';
/** A schedule whose jobs are released before they are due: `lead:<ms>:<pattern>` (outermost). */
const LEAD_PREFIX = 'lead:';
/** A jittered schedule: `jitter:<seconds>:<offsetMs>:<pattern of the unshifted schedule>`. */
const JITTER_PREFIX = 'jitter:';

/**
 * The `pattern` string a schedule is stored under in its BullMQ job scheduler.
 * @param leadMs - the prefetch lead its jobs are released with (the rule above); 0: none
 */
export function encodePattern(schedule: CronSchedule, leadMs = 0): string {
  if (schedule.kind === 'once' || schedule.kind === 'after') throw new Error(`${schedule.kind} cron jobs have no job scheduler`);
  const own = schedule.kind === 'interval' ? `${EVERY_PREFIX}${schedule.everyMs}:${schedule.anchorMs}` : schedule.expression;
  const shifted = schedule.jitter ? `${JITTER_PREFIX}${schedule.jitter.seconds}:${schedule.jitter.offsetMs}:${own}` : own;
  return leadMs > 0 ? `${LEAD_PREFIX}${leadMs}:${shifted}` : shifted;
}

/**
 * The lead a schedule's jobs are released with: the configured one, at most half the shortest time
 * between its next occurrences (`LEAD_SAMPLE` of them), so the job of one occurrence is never
 * released before the one before it is due — a job scheduler keeps one pending job, as without a lead.
 * @param leadMs - `cron.prefetch_lead_ms`
 */
export function leadFor(schedule: CronSchedule, tz: string, leadMs: number, now: number): number {
  if (leadMs === 0) return 0;
  const times = nextOccurrences(schedule, tz, now, LEAD_SAMPLE);
  let shortest = Infinity;
  for (let i = 1; i < times.length; i++) shortest = Math.min(shortest, times[i]! - times[i - 1]!);
  return Math.max(0, Math.min(leadMs, Math.floor(shortest / 2)));
}

/** Occurrences whose gaps bound the lead (`leadFor`). */
const LEAD_SAMPLE = 8;

/** The prefetch lead a stored `pattern` releases its jobs with, ms (0: none), and the pattern without it. */
export function patternLead(pattern: string): { leadMs: number; pattern: string } {
  if (!pattern.startsWith(LEAD_PREFIX)) return { leadMs: 0, pattern };
  const end = pattern.indexOf(':', LEAD_PREFIX.length);
  const leadMs = Number(pattern.slice(LEAD_PREFIX.length, end));
  if (end < 0 || !Number.isInteger(leadMs) || leadMs < 0) throw new Error(`bad lead pattern ${pattern}`);
  return { leadMs, pattern: pattern.slice(end + 1) };
}

/**
 * The occurrences a pick-up later than the lead allows leaves without a job (the rule above): the job
 * scheduler, asked at the pick-up for the job after the one due at `dueAt`, answers the first occurrence
 * after the pick-up plus `leadMs`; without a lead it would have answered the first after the pick-up. Every
 * occurrence between the two needs a job of its own — more than one when BullMQ asked late (below).
 *
 * The pick-up is the fetch (`processedOn`, stamped by the fetch script), but BullMQ asks the strategy with its
 * own clock once the fetch has answered, which on a starved process can be seconds later: `pickedUp` brackets
 * that moment — from the fetch (`from`) to when the job was in hand (`to`, any time after it).
 * @param leadMs - the lead the job was released with (its data's `leadMs`)
 * @returns the due times (epoch ms) of the occurrences left without a job, oldest first (at most
 *   `MAX_SKIPPED_BY_LEAD`) — `sure: false` for one that only a strategy asked late in the bracket leaves out
 *   (the job scheduler's traces tell: `CronStore.schedulerMadeOccurrence`; the first one it made ends the
 *   list) — or none when the scheduler's next job is the next occurrence
 */
export function skippedByLead(
  schedule: CronSchedule,
  tz: string,
  leadMs: number,
  dueAt: number,
  pickedUp: { from: number; to: number },
): Array<{ dueAt: number; sure: boolean }> {
  const missed: Array<{ dueAt: number; sure: boolean }> = [];
  if (leadMs === 0) return missed;
  // Asked at S, the strategy answers the first occurrence after max(dueAt, S + leadMs): every one up to then is missed.
  let next = nextOccurrence(schedule, tz, Math.max(dueAt, pickedUp.from));
  while (next !== undefined && next <= pickedUp.to + leadMs && missed.length < MAX_SKIPPED_BY_LEAD) {
    missed.push({ dueAt: next, sure: next <= pickedUp.from + leadMs });
    next = nextOccurrence(schedule, tz, next);
  }
  return missed;
}

/** The most occurrences one late pick-up makes good (`skippedByLead`): a bound on a starved process's lag, not a rule. */
export const MAX_SKIPPED_BY_LEAD = 100;

/** The schedule a stored `pattern` stands for (inverse of `encodePattern`; the lead is not part of it). */
export function decodePattern(pattern: string): CronSchedule {
  if (pattern.startsWith(LEAD_PREFIX)) return decodePattern(patternLead(pattern).pattern);
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
 * scheduler's zone (`opts.tz`, UTC when absent); with a lead, the time its job is released.
 * @returns epoch ms, or `undefined` when the schedule has no further occurrence
 *   (BullMQ then adds no job)
 */
export function cronRepeatStrategy(millis: number, opts: RepeatOptions): number | undefined {
  if (!opts.pattern) return undefined;
  try {
    const { leadMs, pattern } = patternLead(opts.pattern);
    const next = nextOccurrence(decodePattern(pattern), opts.tz ?? 'UTC', millis + leadMs);
    return next === undefined ? undefined : next - leadMs;
  } catch {
    // An invalid pattern cannot reach the store (the grammar validates first); if one
    // does, the scheduler stops instead of crashing the worker.
    return undefined;
  }
}
