import { sleep } from '../../scheduler/time/sleep.ts';

/** Longest single timer of {@link sleepUntil}, ms: longer waits are taken in steps (croner's habit). */
export const MAX_TIMER_MS = 30_000;

/** One timer per instant waited for, with the callers waiting on it (`timer` is replaced when it fires early). */
interface Wakeup {
  timer: NodeJS.Timeout;
  waiters: Set<() => void>;
}

/** The pending timers of {@link sleepUntil}'s last step, by the epoch ms they wait for. */
const wakeups = new Map<number, Wakeup>();

/**
 * Call `wake` once the wall clock has reached epoch ms `at` (`ms` ≤ {@link MAX_TIMER_MS} from
 * now), on the one timer of every caller waiting for `at`: a timer that fires early (see
 * {@link sleepUntil}) is set again for the rest, so all of them wake in the same callback.
 * @returns cancel (drops the timer when no caller is left)
 */
function wakeAt(at: number, ms: number, wake: () => void): () => void {
  let w = wakeups.get(at);
  if (!w) {
    const waiters = new Set<() => void>();
    const fire = () => {
      const rest = at - Date.now();
      if (rest > 0) {
        entry.timer = setTimeout(fire, rest);
        return;
      }
      wakeups.delete(at);
      for (const fn of waiters) fn();
    };
    const entry: Wakeup = { timer: setTimeout(fire, ms), waiters };
    w = entry;
    wakeups.set(at, w);
  }
  const entry = w;
  entry.waiters.add(wake);
  return () => {
    entry.waiters.delete(wake);
    if (entry.waiters.size === 0 && wakeups.get(at) === entry) {
      clearTimeout(entry.timer);
      wakeups.delete(at);
    }
  };
}

/**
 * Call `wake` once the wall clock (`Date.now()`) has reached epoch ms `at` (at once, before returning,
 * when it has passed), by the same timers and rules as {@link sleepUntil}, without a promise or a
 * signal: what a worker keeps for each of thousands of held ticks (`JobTicket`, `turn-tracker.ts`).
 * @returns cancel: `wake` is not called after it
 */
export function callAt(at: number, wake: () => void): () => void {
  let cancel: () => void = () => {};
  let cancelled = false;
  const step = () => {
    if (cancelled) return;
    const ms = at - Date.now();
    if (ms <= 0) {
      wake();
      return;
    }
    if (ms <= MAX_TIMER_MS) {
      cancel = wakeAt(at, ms, step);
    } else {
      const timer = setTimeout(step, MAX_TIMER_MS);
      cancel = () => clearTimeout(timer);
    }
  };
  step();
  return () => {
    cancelled = true;
    cancel();
  };
}

/**
 * Resolve once the wall clock (`Date.now()`) has reached epoch ms `at` (at once when it has passed),
 * or when `signal` aborts.
 *
 * Policy (docs/DESIGN.md §7 "nothing that is not yet due fires early"): a Node timer counts from the event
 * loop's cached time, which lags the real time after synchronous work, so a timer can fire that many
 * milliseconds before the wall clock reaches `at`. The wait is therefore re-checked against
 * `Date.now()` and taken again for the rest. Each timer is at most {@link MAX_TIMER_MS}, so a clock
 * jump or a suspended host cannot strand a tick behind one long timer.
 *
 * Every caller waiting for the same `at` shares the last step's timer: the burst batching this
 * serves is written at `TickClaim.readGate` (`scheduler/loop/tick-claim.ts`).
 */
export async function sleepUntil(at: number, signal?: AbortSignal): Promise<void> {
  for (;;) {
    const ms = at - Date.now();
    if (ms <= 0 || signal?.aborted) return;
    if (ms > MAX_TIMER_MS) {
      await sleep(MAX_TIMER_MS, signal);
      continue;
    }
    // The last step waits on the timer every caller waiting for `at` shares, so it is no `sleep` of
    // its own; an abort ends it the same way (resolved, never rejected).
    await new Promise<void>((resolve) => {
      const cancel = wakeAt(at, ms, done);
      function done() {
        cancel();
        signal?.removeEventListener('abort', done);
        resolve();
      }
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}
