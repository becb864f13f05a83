/** Loops stored and armed straight through the store, for tests of many ticks at a set due time. */
import type { RunnerSpec } from '../../scheduler/session/origin.ts';
import { TEST_LOCK_MS } from './env.ts';
import { loopFixture } from './record-fixtures.ts';
import type { TestClients } from './stack.ts';

/** Store and arm a loop every `intervalSeconds`, its first tick due at `firstDueAt`. */
export async function addLoop(
  c: TestClients,
  sessionId: string,
  runner: RunnerSpec,
  firstDueAt: number,
  intervalSeconds = 60,
): Promise<void> {
  const record = loopFixture({ loopId: `l-${sessionId}`, sessionId, intervalSeconds, runner, now: Date.now() });
  const stored = await c.loops.put(record, 'any');
  await c.loops.arm(stored!, firstDueAt);
}

/** Add `n` loops with `add(i)`, 32 at a time. */
export async function addLoops(n: number, add: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < n) await add(next++);
    }),
  );
}

/**
 * Worker settings for a held tick whose worker is starved past its job lock (`blockEventLoopUntil`): a 1 s lock
 * renewed every 400 ms, a stall check every 500 ms, and one held tick at most: once it holds the tick it has no
 * fetch waiting on the queue, so when the tick goes back to the queue another worker is the one woken for it.
 */
export const STARVABLE_HOLDER = {
  'worker.lock_duration_ms': 1000,
  'worker.lock_renew_ms': 400,
  'worker.stalled_interval_ms': 500,
  'worker.max_held_ticks': 1,
} as const;

/**
 * The environment of the `hermes worker` child that takes a starved holder's tick over: any number of held ticks,
 * and the suite's lock (`TEST_LOCK_MS`), not the starvable 1 s one it would inherit. Beside two other copies of
 * the suite its renewals on a 1 s lock came late too, and the tick went back to the queue from it as well.
 */
export const TAKEOVER_WORKER_ENV: NodeJS.ProcessEnv = {
  HERMES_WORKER_MAX_HELD_TICKS: '4096',
  HERMES_WORKER_LOCK_DURATION_MS: String(TEST_LOCK_MS),
  HERMES_WORKER_LOCK_RENEW_MS: '1000',
};
