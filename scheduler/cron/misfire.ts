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
 *  - Paused, completed or removed jobs and occurrences of an older generation
 *    (the schedule was edited, or paused and resumed) never run: paused jobs
 *    never catch up.
 *  - A manual run (`hermes cron run`) is due when requested and is exempt from
 *    the pause and coalescing rules, never from "not before due". So is a
 *    backfilled occurrence (`hermes cron backfill`, backfill.ts), due at its past
 *    time: it runs when picked up, never late, never a catch-up.
 */
import { onRequest, type CronJob, type OccurrenceTrigger } from './cron-job.ts';

/** Defined with the run record (`cron-job.ts`); re-exported for the misfire rule's callers. */
export type { OccurrenceTrigger };

/** Grace clamp settings in ms (`cron.misfire_grace_min_seconds` / `_max_seconds`). */
export interface GraceSettings {
  graceMinMs: number;
  graceMaxMs: number;
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
}): OccurrenceDecision {
  const { job, dueAt, now, trigger } = input;
  if (!job) return { action: 'drop', reason: 'removed' };
  if (trigger === 'schedule') {
    if (job.state === 'paused') return { action: 'drop', reason: 'paused' };
    if (job.state === 'completed' || job.state === 'error') return { action: 'drop', reason: 'completed' };
    if (input.generation !== job.generation) return { action: 'drop', reason: 'stale' };
    if (job.last_due_at !== null && dueAt <= job.last_due_at) return { action: 'drop', reason: 'coalesced' };
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
  return { action: 'run', latenessMs, late: true, catchUp: true };
}
