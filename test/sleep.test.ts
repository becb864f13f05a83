/** The one abortable wait (`scheduler/time/sleep.ts`): it resolves when waited out and when stopped, never rejects. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { sleep } from '../scheduler/time/sleep.ts';

describe('sleep', () => {
  beforeEach(() => void vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] }));
  afterEach(() => void vi.useRealTimers());

  it('resolves once its time has passed on the clock, not a millisecond before', async () => {
    let done = false;
    const p = sleep(1_000).then(() => (done = true));
    await vi.advanceTimersByTimeAsync(999);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await p;
    expect(done).toBe(true);
  });

  it('an abort ends the wait at once and resolves (no AbortError); its timer is cleared', async () => {
    const controller = new AbortController();
    const p = sleep(600_000, controller.signal);
    controller.abort(new Error('stop'));
    await expect(p).resolves.toBeUndefined();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a signal already aborted does not wait', async () => {
    await expect(sleep(600_000, AbortSignal.abort())).resolves.toBeUndefined();
    expect(vi.getTimerCount()).toBe(0);
  });
});
