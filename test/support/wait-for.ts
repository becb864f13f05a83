import type { V1RunStatus } from '../../scheduler/v1/v1-runs.ts';

/**
 * The ceiling of a wait that names none: beside two other copies of the suite (load ~30 on 2 cores) a step that
 * takes a second alone took over 15 s. A ceiling, not a wait: a test that passes never waits it out.
 */
export const WAIT_CEILING_MS = 30_000;

/**
 * Poll `check` until it returns a truthy value: every 25 ms for the first second, then every 100 ms. Most
 * waits end within the first second; the long ones (a due time, a lock to lapse) would otherwise poll Redis
 * 40 times a second for nothing, hundreds of them at once across the suite.
 * @throws Error naming `what` after `timeoutMs`
 */
export async function waitFor<T>(check: () => Promise<T> | T, timeoutMs = WAIT_CEILING_MS, what = 'condition'): Promise<NonNullable<T>> {
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

/**
 * Poll `read` as {@link waitFor} does until it answers `done`, for as long as what it answers as `at` (a
 * count of steps: ticks run, messages written) keeps moving: a long run of steps is waited for however slow
 * a loaded machine makes each of them, and fails once it has stood still for `stallMs`.
 * @throws Error naming `what` and where it stood
 */
export async function waitWhileAdvancing<T>(
  read: () => Promise<{ done: T | undefined; at: number | string }>,
  stallMs: number,
  what: string,
): Promise<NonNullable<T>> {
  const started = Date.now();
  let at: number | string | undefined;
  let movedAt = started;
  for (;;) {
    const r = await read();
    if (r.done) return r.done;
    const now = Date.now();
    if (r.at !== at) [at, movedAt] = [r.at, now];
    else if (now - movedAt > stallMs)
      throw new Error(`timed out waiting for ${what}: it stood still at ${r.at} for ${stallMs} ms (${now - started} ms in all)`);
    await new Promise((resolve) => setTimeout(resolve, now - started < 1_000 ? 25 : 100));
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
