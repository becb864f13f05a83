import type { V1RunStatus } from '../../scheduler/v1/v1-runs.ts';

/**
 * Poll `check` until it returns a truthy value: every 25 ms for the first second, then every 100 ms. Most
 * waits end within the first second; the long ones (a due time, a lock to lapse) would otherwise poll Redis
 * 40 times a second for nothing, hundreds of them at once across the suite.
 * @throws Error naming `what` after `timeoutMs`
 */
export async function waitFor<T>(check: () => Promise<T> | T, timeoutMs = 15_000, what = 'condition'): Promise<NonNullable<T>> {
  const started = Date.now();
  const deadline = started + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    const now = Date.now();
    if (now > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, now - started < 1_000 ? 25 : 100));
  }
}

/** Resolve after `ms`. */
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Block this process's event loop until `until` (epoch ms), as a starved worker's is: no timer, socket or
 * promise callback runs meanwhile. The thread sleeps in `Atomics.wait` instead of spinning, so the
 * starvation costs no CPU (a spin took a core from the tests running beside it).
 */
export function blockEventLoopUntil(until: number): void {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  for (let left = until - Date.now(); left > 0; left = until - Date.now()) Atomics.wait(cell, 0, 0, left);
}

/**
 * A `/v1` run once it is in `status`, read by `read` as `waitFor` polls: from the run store
 * (`() => runs.get(id)`) or from the API (`() => readJson(get(`/v1/runs/${id}`))`).
 * @throws Error naming the status waited for after `timeoutMs`
 */
export async function waitForRunStatus<R extends { status: string }>(
  read: () => Promise<R | null | undefined>,
  status: V1RunStatus,
  timeoutMs = 15_000,
): Promise<R> {
  return waitFor(
    async () => {
      const run = await read();
      return run?.status === status ? run : undefined;
    },
    timeoutMs,
    `the run ${status}`,
  );
}
