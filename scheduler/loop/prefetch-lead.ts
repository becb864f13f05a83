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
 * @param leadMs - the lead, ms (0: the job is released when due)
 * @returns `jobAt(dueAt)`: epoch ms the job of an occurrence due at `dueAt` is released (the lead
 *   added); `dueAt(jobAt)`: epoch ms the occurrence of a job released at `jobAt` is due (the lead removed)
 */
export function prefetchLead(leadMs: number): { readonly leadMs: number; jobAt(dueAt: number): number; dueAt(jobAt: number): number } {
  return {
    leadMs,
    jobAt: (dueAt) => dueAt - leadMs,
    dueAt: (jobAt) => jobAt + leadMs,
  };
}
