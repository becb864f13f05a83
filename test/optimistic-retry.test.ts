/**
 * The one attempt policy for optimistic writes (`scheduler/store/optimistic-retry.ts`).
 */
import { describe, expect, it } from 'vitest';
import { CONFLICT, OPTIMISTIC_ATTEMPTS, retryOnConflict } from '../scheduler/store/optimistic-retry.ts';

describe('retryOnConflict', () => {
  it('tries again after each conflict and returns the first result', async () => {
    let calls = 0;
    const result = await retryOnConflict(
      async () => (++calls < OPTIMISTIC_ATTEMPTS ? CONFLICT : 'written'),
      () => new Error('gave up'),
    );
    expect(result).toBe('written');
    expect(calls).toBe(OPTIMISTIC_ATTEMPTS);
  });

  it("gives up with the caller's error after exactly OPTIMISTIC_ATTEMPTS conflicts; other errors pass through at once", async () => {
    let calls = 0;
    await expect(
      retryOnConflict(
        async () => (calls++, CONFLICT),
        () => new Error('kept changing'),
      ),
    ).rejects.toThrow('kept changing');
    expect(calls).toBe(OPTIMISTIC_ATTEMPTS);
    calls = 0;
    await expect(
      retryOnConflict(
        async () => {
          calls++;
          throw new Error('redis down');
        },
        () => new Error('kept changing'),
      ),
    ).rejects.toThrow('redis down');
    expect(calls).toBe(1);
  });
});
