/**
 * The one abortable wait of the code base (worker and gateway alike).
 *
 * Policy: a wait cut short by its signal resolves, it never rejects (no `AbortError` to catch); a caller
 * that must tell "waited it out" from "stopped" reads `signal.aborted` afterwards. A signal already
 * aborted does not wait. The timer is the global `setTimeout` rather than `node:timers/promises`, so a
 * test's fake clock (`vi.useFakeTimers`) drives every wait of the product the same way.
 */

/** Options of {@link sleep}. */
export interface SleepOptions {
  /** Let the process exit while this wait is pending (the timer is unref'd). @defaultValue false */
  unref?: boolean;
}

/**
 * Resolve after `ms` milliseconds (on the next timer for `ms` ≤ 0), or as soon as `signal` aborts.
 * @param signal - cuts the wait short; the promise still resolves
 */
export function sleep(ms: number, signal?: AbortSignal, options: SleepOptions = {}): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, Math.max(0, ms));
    if (options.unref) timer.unref();
    signal?.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
  });
}
