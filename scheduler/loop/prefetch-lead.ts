/**
 * The prefetch lead (`worker.prefetch_lead_ms`), both ways, in one place: a
 * loop or heartbeat job is released to the queue `leadMs` before its occurrence
 * is due, so the queue's own latency (fetch, lock, a busy worker picking it up)
 * is spent before the due time; the worker then waits for the due time itself
 * (`sleepUntil`) and starts the turn exactly on it, never early (docs/DESIGN.md §7). The
 * job's time (its scheduler's millis, or its delay) thus always means "due
 * minus the lead", and every conversion between the two goes through here.
 * Measured effect: docs/BENCHMARKS.md.
 *
 * A job scheduler's first job cannot be released in the past: an occurrence armed to be due sooner
 * than the lead (a loop set to fire now) is released a little after arming instead
 * (`firstJobAt`), never at once — a job released at once could be taken by a worker before a
 * re-arm right after (a replaced prompt, the same schedule set twice) removes it, and then both
 * would fire, milliseconds apart (test/scheduler-upsert.test.ts, F1).
 *
 * @param leadMs - the lead, ms (0: the job is released when due)
 * @returns `jobAt(dueAt)`: epoch ms the job of an occurrence due at `dueAt` is released (the lead
 *   added); `dueAt(jobAt)`: epoch ms the occurrence of a job released at `jobAt` is due (the lead removed);
 *   `firstJobAt(dueAt, now)`: when a job scheduler armed at `now` for a first occurrence due at `dueAt`
 *   releases its first job (its occurrence is then due at `dueAt(firstJobAt(…))`, later than `dueAt`
 *   when that was sooner than the lead)
 */
export function prefetchLead(leadMs: number): {
  readonly leadMs: number;
  jobAt(dueAt: number): number;
  dueAt(jobAt: number): number;
  firstJobAt(dueAt: number, now: number): number;
} {
  return {
    leadMs,
    jobAt: (dueAt) => dueAt - leadMs,
    dueAt: (jobAt) => jobAt + leadMs,
    firstJobAt: (dueAt, now) => Math.max(now + Math.min(leadMs, FIRST_RELEASE_MS), dueAt - leadMs),
  };
}

/** The least time from arming a job scheduler to the release of its first job, ms (at most the lead). */
export const FIRST_RELEASE_MS = 200;
