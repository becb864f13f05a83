/** Poll `check` every 50 ms until it returns a truthy value or `timeoutMs` passes. */
export async function waitFor<T>(check: () => Promise<T> | T, timeoutMs: number, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Resolve after `ms`. */
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
