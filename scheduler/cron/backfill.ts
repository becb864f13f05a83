/**
 * Backfill (`hermes cron backfill`, `POST /api/cron/jobs/:ref/backfill`; docs/CRON.md, "Backfill"): the
 * occurrences a job's schedule had in a past window, as pure functions. The times come from the
 * same engine (croner, in the job's zone, with its jitter and the DST rules of `cron-engine.ts`) that
 * fires the job, so a backfill runs exactly the occurrences the schedule would have run.
 *
 * Policy:
 *  - The window is `from` to `to`, both included. Both are ISO-8601 instants; without an offset
 *    they are wall times in the job's zone (`parseInstant`, as `cron next --from` reads them).
 *    `to` defaults to now; a `to` in the future is clipped to now (a backfill never runs an
 *    occurrence ahead of its time: those are the schedule's to run).
 *  - At most `cron.max_backfill_occurrences` occurrences per request: a window with more is
 *    refused whole, naming the count and the bound, and nothing is queued.
 *  - A one-shot's only occurrence is its time, when it falls in the window.
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import { isoUtc, nextOccurrence, type CronSchedule } from './cron-engine.ts';
import { parseInstant } from './preview.ts';
import { cronOccurrenceId } from './cron-job.ts';

/** Counting stops here: a window with more occurrences than this is named "more than" it. */
export const BACKFILL_COUNT_CEILING = 100_000;

/** A backfill window, epoch ms, `from` ≤ `to` ≤ now. */
export interface BackfillWindow {
  fromMs: number;
  toMs: number;
  /** `to` was in the future and is now. */
  clipped: boolean;
}

/**
 * Read a backfill window as a user typed it.
 * @param tz - the job's zone: instants without an offset are wall times there
 * @throws ScheduleInputError (field `from` or `to`) for a missing or bad instant, or `from` after `to`
 */
export function parseBackfillWindow(input: { from?: string; to?: string }, tz: string, now: number): BackfillWindow {
  if (input.from === undefined || input.from.trim() === '') {
    throw new ScheduleInputError('`from` is required: the start of the window, e.g. 2026-03-01T00:00:00Z.', { field: 'from' });
  }
  const fromMs = instant(input.from, 'from', tz);
  const asked = input.to === undefined || input.to.trim() === '' || input.to.trim() === 'now' ? now : instant(input.to, 'to', tz);
  const toMs = Math.min(asked, now);
  if (fromMs > now) {
    throw new ScheduleInputError(`\`from\` (${isoUtc(fromMs)}) is in the future: a backfill runs past occurrences only.`, {
      field: 'from',
    });
  }
  if (fromMs > toMs) throw new ScheduleInputError(`\`from\` (${isoUtc(fromMs)}) is after \`to\` (${isoUtc(toMs)}).`, { field: 'from' });
  return { fromMs, toMs, clipped: asked > now };
}

/**
 * The schedule's occurrences in the window, oldest first.
 * @param max - the bound (`cron.max_backfill_occurrences`)
 * @throws ScheduleInputError (field `from`) when there are more than `max`, naming how many and the bound
 */
export function backfillOccurrences(schedule: CronSchedule, tz: string, window: BackfillWindow, max: number): number[] {
  const { fromMs, toMs } = window;
  const out: number[] = [];
  if (schedule.kind === 'once') {
    if (schedule.atMs >= fromMs && schedule.atMs <= toMs) out.push(schedule.atMs);
  } else {
    for (let at = nextOccurrence(schedule, tz, fromMs - 1); at !== undefined && at <= toMs; at = nextOccurrence(schedule, tz, at)) {
      if (out.length >= BACKFILL_COUNT_CEILING) break;
      out.push(at);
    }
  }
  if (out.length > max) {
    const count = out.length >= BACKFILL_COUNT_CEILING ? `more than ${BACKFILL_COUNT_CEILING}` : String(out.length);
    throw new ScheduleInputError(
      `The window ${isoUtc(fromMs)} to ${isoUtc(toMs)} has ${count} occurrences, over the bound of ${max} (cron.max_backfill_occurrences); nothing was queued. Give a shorter window.`,
      { field: 'from' },
    );
  }
  return out;
}

/** The public view of what a backfill queued (`--json`, `/api`): ISO-8601 UTC times and the occurrence ids queued. */
export function backfillView(jobId: string, window: BackfillWindow, queued: number[], recorded: number[]): Record<string, unknown> {
  return {
    from: isoUtc(window.fromMs),
    to: isoUtc(window.toMs),
    to_clipped: window.clipped,
    queued: queued.map(isoUtc),
    occurrence_ids: queued.map((at) => cronOccurrenceId(jobId, at, 'backfill')),
    already_recorded: recorded.map(isoUtc),
  };
}

/** One end of the window, its field named when it is not an instant. */
function instant(text: string, field: 'from' | 'to', tz: string): number {
  try {
    return parseInstant(text, tz);
  } catch (err) {
    if (!(err instanceof ScheduleInputError)) throw err;
    throw new ScheduleInputError(`\`${field}\`: ${err.message}`, { field });
  }
}
