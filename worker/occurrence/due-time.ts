/**
 * Nothing early (docs/CRON.md, "What happens at run time"): an occurrence's turn never starts
 * before its due time. A loop or heartbeat tick comes `worker.prefetch_lead_ms` early on purpose and
 * is held until due (`Occurrence.holdUntil`, on `sleepUntil`); a gate that reads a record saying
 * "not yet" (a cron occurrence, `decideOccurrence`) waits as {@link decideEarly} says.
 */
import type { OccurrenceDefer } from './defer-decision.ts';

/** Longest wait inside a processor before an early job is put back as delayed, ms. */
export const MAX_IN_PROCESS_WAIT_MS = 30_000;

/**
 * A job picked up before `untilMs` waits for it in this process (in steps of at most
 * {@link MAX_IN_PROCESS_WAIT_MS}, the record read again after each), unless the wait is longer than
 * that or the worker is draining: then it is put back as delayed until due.
 * @param canDefer - the job can be moved (`Occurrence.canDefer`)
 * @returns `sleep` for `ms` then decide again, or `defer` until due
 */
export function decideEarly(
  untilMs: number,
  now: number,
  f: { draining: boolean; canDefer: boolean },
): { action: 'sleep'; ms: number } | OccurrenceDefer<'early'> {
  const waitMs = untilMs - now;
  if ((waitMs > MAX_IN_PROCESS_WAIT_MS || f.draining) && f.canDefer) return { action: 'defer', reason: 'early', delayMs: waitMs };
  return { action: 'sleep', ms: Math.min(waitMs, MAX_IN_PROCESS_WAIT_MS) };
}
