/**
 * Whether a due cron occurrence runs now, waits, runs late, catches up or is
 * skipped — a pure decision from the job record, the occurrence's due time and
 * the clock (docs/DESIGN.md §7 Misfires).
 *
 * Policy:
 *  - Nothing runs before it is due: an occurrence picked up early waits.
 *  - Grace window: half the schedule's period at that occurrence, clamped to
 *    [graceMinMs, graceMaxMs] (120 s … 2 h by default); a one-shot gets the
 *    upper clamp. Within it a late occurrence runs and is marked late.
 *  - Beyond it: `misfire once` runs it as the single catch-up, `misfire skip`
 *    records a skipped run. Never more than one catch-up: an occurrence due at
 *    or before the last occurrence already handled is coalesced (dropped), and
 *    BullMQ keeps at most one overdue job per job scheduler (repeat-strategy.ts).
 *  - `misfire all` (Temporal's catchup window): every missed occurrence no older
 *    than the job's catch-up window (`--catchup-window`, else
 *    `cron.catchup_window_seconds`) runs as a catch-up, oldest first, at most
 *    `cron.max_backfill_occurrences` of them (the newest); older ones are not run.
 *    BullMQ holds only the first missed occurrence (the overdue job); when it is
 *    picked up, the others are found by the engine (`catchUpsAfter`) and queued,
 *    each after the one before it. Those queued catch-ups are not coalesced by a
 *    later occurrence handled first (the window bounds them instead); the overdue
 *    one itself, beyond the window or below the newest bound, is recorded skipped.
 *  - Paused, completed or removed jobs and occurrences of an older generation
 *    (the schedule was edited, or paused and resumed) never run: paused jobs
 *    never catch up.
 *  - A manual run (`hermes cron run`) is due when requested and is exempt from
 *    the pause and coalescing rules, never from "not before due". So is a
 *    backfilled occurrence (`hermes cron backfill`, backfill.ts), due at its past
 *    time: it runs when picked up, never late, never a catch-up.
 */
import { onRequest, type CronJob, type OccurrenceTrigger } from './cron-job.ts';
import { nextOccurrence, type CronSchedule } from './cron-engine.ts';

/** Defined with the run record (`cron-job.ts`); re-exported for the misfire rule's callers. */
export type { OccurrenceTrigger };

/** Grace clamp settings in ms (`cron.misfire_grace_min_seconds` / `_max_seconds`). */
export interface GraceSettings {
  graceMinMs: number;
  graceMaxMs: number;
}

/** The grace clamp of the `cron` settings, in ms. */
export function graceSettings(cron: { misfire_grace_min_seconds: number; misfire_grace_max_seconds: number }): GraceSettings {
  return { graceMinMs: cron.misfire_grace_min_seconds * 1000, graceMaxMs: cron.misfire_grace_max_seconds * 1000 };
}

/** Runs later than this count as "late" in run records (queue and clock jitter below it does not). */
export const ON_TIME_TOLERANCE_MS = 2_000;

export type OccurrenceDecision =
  | { action: 'wait'; untilMs: number }
  | { action: 'drop'; reason: 'removed' | 'paused' | 'completed' | 'stale' | 'coalesced' }
  | { action: 'run'; latenessMs: number; late: boolean; catchUp: boolean }
  | { action: 'skip'; reason: 'misfire'; latenessMs: number; graceMs: number };

/** The grace window for an occurrence whose schedule period there is `periodMs` (undefined: one-shot). */
export function graceWindowMs(periodMs: number | undefined, settings: GraceSettings): number {
  if (periodMs === undefined) return settings.graceMaxMs;
  return Math.min(settings.graceMaxMs, Math.max(settings.graceMinMs, Math.floor(periodMs / 2)));
}

/**
 * Decide what to do with an occurrence (pure).
 * @param input.job - the current record, or `null` when the job was removed
 * @param input.dueAt - when the occurrence was due (epoch ms)
 * @param input.generation - the job generation the occurrence was created for
 * @param input.periodMs - the schedule's period at `dueAt` (`periodAt`), undefined for one-shots
 * @param input.now - the clock (epoch ms)
 */
export function decideOccurrence(input: {
  job: CronJob | null;
  dueAt: number;
  generation: number;
  trigger: OccurrenceTrigger;
  periodMs: number | undefined;
  now: number;
  grace: GraceSettings;
  /** `--misfire all`: the job's catch-up window, ms (its `--catchup-window`, else `cron.catchup_window_seconds`). */
  catchUpWindowMs?: number;
  /** A missed occurrence queued by `--misfire all` (`catchUpsAfter`): not coalesced, bounded by the window. */
  queuedCatchUp?: boolean;
}): OccurrenceDecision {
  const { job, dueAt, now, trigger } = input;
  if (!job) return { action: 'drop', reason: 'removed' };
  if (trigger === 'schedule') {
    if (job.state === 'paused') return { action: 'drop', reason: 'paused' };
    if (job.state === 'completed' || job.state === 'error') return { action: 'drop', reason: 'completed' };
    if (input.generation !== job.generation) return { action: 'drop', reason: 'stale' };
    if (!input.queuedCatchUp && job.last_due_at !== null && dueAt <= job.last_due_at) return { action: 'drop', reason: 'coalesced' };
  }
  // A run after another job's run (`--after`) runs while its job is scheduled, whatever its schedule's generation.
  if (trigger === 'after') {
    if (job.state === 'paused') return { action: 'drop', reason: 'paused' };
    if (job.state === 'completed' || job.state === 'error') return { action: 'drop', reason: 'completed' };
  }
  if (now < dueAt) return { action: 'wait', untilMs: dueAt };
  const latenessMs = now - dueAt;
  if (onRequest(trigger) || trigger === 'after') return { action: 'run', latenessMs, late: false, catchUp: false };
  const graceMs = graceWindowMs(input.periodMs, input.grace);
  if (latenessMs <= graceMs) return { action: 'run', latenessMs, late: latenessMs > ON_TIME_TOLERANCE_MS, catchUp: false };
  if (job.misfire === 'skip') return { action: 'skip', reason: 'misfire', latenessMs, graceMs };
  if (job.misfire === 'all' && latenessMs > (input.catchUpWindowMs ?? Infinity))
    return { action: 'skip', reason: 'misfire', latenessMs, graceMs };
  return { action: 'run', latenessMs, late: true, catchUp: true };
}

/**
 * `--misfire all`: the missed occurrences to queue when the overdue occurrence due at `dueAt` is picked up at
 * `now` — the schedule's times after `dueAt` up to `now`, no older than the window, the newest `max` counting
 * the overdue one when it is in the window too — and whether the overdue one is among those run (pure).
 * @returns `queue`: due times after `dueAt`, oldest first; `runsFirst`: the overdue occurrence is run (else recorded skipped)
 */
export function catchUpsAfter(input: { schedule: CronSchedule; tz: string; dueAt: number; now: number; windowMs: number; max: number }): {
  queue: number[];
  runsFirst: boolean;
} {
  const { schedule, tz, dueAt, now, windowMs, max } = input;
  const oldest = now - windowMs;
  const missed: number[] = dueAt >= oldest ? [dueAt] : [];
  if (schedule.kind !== 'once') {
    for (
      let at = nextOccurrence(schedule, tz, Math.max(dueAt, oldest - 1));
      at !== undefined && at <= now;
      at = nextOccurrence(schedule, tz, at)
    ) {
      missed.push(at);
      if (missed.length > max) missed.shift();
    }
  }
  return { queue: missed.filter((at) => at > dueAt), runsFirst: missed[0] === dueAt };
}
