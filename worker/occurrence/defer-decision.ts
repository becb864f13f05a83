/**
 * A deferral as a value, and the one every kind of occurrence shares: the drain hand-back.
 * Pure (no store, no queue), so the gates' deciders (`worker/loop/tick-gate.ts`, `worker/cron/cron-gate.ts`) can name
 * them; `defer.ts` carries a deferral out.
 */

/** A job put back to run again after `delayMs`, with why. */
export interface OccurrenceDefer<Reason extends string = string> {
  action: 'defer';
  reason: Reason;
  delayMs: number;
}

/**
 * Drain hand-back (docs/RELIABILITY.md, "A cron run cut by a drain is handed back"; as for `/v1`
 * runs): an occurrence a draining worker received before it was claimed, or whose turn the drain
 * deadline cut, goes back to the queue due at once, its attempt count untouched; the paused worker
 * does not take it again, another worker does. A paused worker still gets the job of a fetch in
 * flight when it paused: an occurrence not claimed yet is handed back instead of starting a turn the
 * drain deadline would cut; a cut turn is not committed, so it runs once, on the other worker.
 */
export const DRAIN_HAND_BACK = { action: 'defer', reason: 'drain', delayMs: 0 } as const satisfies OccurrenceDefer<'drain'>;
