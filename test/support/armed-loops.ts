/** Loops stored and armed straight through the store, for tests of many ticks at a set due time. */
import { createLoop } from '../../scheduler/loop/loop-state.ts';
import type { RunnerSpec } from '../../scheduler/session/origin.ts';
import type { TestClients } from './stack.ts';

/** Store and arm a loop every `intervalSeconds`, its first tick due at `firstDueAt`. */
export async function addLoop(
  c: TestClients,
  sessionId: string,
  runner: RunnerSpec,
  firstDueAt: number,
  intervalSeconds = 60,
): Promise<void> {
  const record = createLoop({
    kind: 'loop',
    loopId: `l-${sessionId}`,
    sessionId,
    prompt: 'check',
    intervalSeconds,
    times: null,
    until: null,
    maxTicks: 0,
    selfPacedFloorSeconds: 60,
    runner,
    origin: { surface: 'cli' },
    now: Date.now(),
  });
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
