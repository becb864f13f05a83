/** Longest single timer of {@link sleepUntil}, ms: longer waits are taken in steps (croner's habit). */
export const MAX_TIMER_MS = 30_000;

/**
 * Resolve once the wall clock (`Date.now()`) has reached epoch ms `at` (at once when it has passed),
 * or when `signal` aborts.
 *
 * Policy (SPEC §7 "nothing that is not yet due fires early"): a Node timer counts from the event
 * loop's cached time, which lags the real time after synchronous work, so a timer can fire that many
 * milliseconds before the wall clock reaches `at`. The wait is therefore re-checked against
 * `Date.now()` and taken again for the rest. Each timer is at most {@link MAX_TIMER_MS}, so a clock
 * jump or a suspended host cannot strand a tick behind one long timer.
 */
export async function sleepUntil(at: number, signal?: AbortSignal): Promise<void> {
  for (;;) {
    const ms = at - Date.now();
    if (ms <= 0 || signal?.aborted) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, Math.min(ms, MAX_TIMER_MS));
      function done() {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      }
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}
