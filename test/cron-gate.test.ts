/**
 * The cron gate's decisions as pure functions (no Redis): how a job picked up
 * before its due time waits, what `--overlap` does when the job's previous run
 * is still going, and how a run whose turn threw ends. The misfire decision
 * itself is in cron-rules.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { CRON_DRAIN_HAND_BACK, decideEarly, decideOverlap, decideRunEnding, MAX_IN_PROCESS_WAIT_MS } from '../worker/cron/cron-gate.ts';

const NOW = Date.parse('2026-06-01T10:00:00Z');

describe('decideEarly (nothing early)', () => {
  it('waits in this process for a short wait, in steps of at most MAX_IN_PROCESS_WAIT_MS', () => {
    expect(decideEarly(NOW + 1_500, NOW, { draining: false, canDefer: true })).toEqual({ action: 'sleep', ms: 1_500 });
    expect(decideEarly(NOW + MAX_IN_PROCESS_WAIT_MS, NOW, { draining: false, canDefer: true })).toEqual({
      action: 'sleep',
      ms: MAX_IN_PROCESS_WAIT_MS,
    });
  });

  it('puts a long wait back as delayed until due, and any wait while draining', () => {
    expect(decideEarly(NOW + 90_000, NOW, { draining: false, canDefer: true })).toEqual({
      action: 'defer',
      reason: 'early',
      delayMs: 90_000,
    });
    expect(decideEarly(NOW + 500, NOW, { draining: true, canDefer: true })).toEqual({ action: 'defer', reason: 'early', delayMs: 500 });
  });

  it('without a lock token the job cannot be moved: it waits in capped steps', () => {
    expect(decideEarly(NOW + 90_000, NOW, { draining: true, canDefer: false })).toEqual({ action: 'sleep', ms: MAX_IN_PROCESS_WAIT_MS });
  });
});

describe('decideOverlap (--overlap)', () => {
  const policy = { deferMs: 250, canDefer: true };
  it('runs when the lock was free, and always with allow', () => {
    for (const overlap of ['skip', 'queue', 'allow'] as const) expect(decideOverlap(overlap, false, policy)).toEqual({ action: 'run' });
    expect(decideOverlap('allow', true, policy)).toEqual({ action: 'run' });
  });

  it('with the previous run still going: skip records a skipped run, queue waits', () => {
    expect(decideOverlap('skip', true, policy)).toEqual({ action: 'skip', reason: 'overlap' });
    expect(decideOverlap('queue', true, policy)).toEqual({ action: 'defer', reason: 'overlap-queue', delayMs: 250 });
  });

  it('queue skips when the job cannot be moved', () => {
    expect(decideOverlap('queue', true, { deferMs: 250, canDefer: false })).toEqual({ action: 'skip', reason: 'overlap' });
  });
});

describe('decideRunEnding', () => {
  const network = { retryable: true };
  const model = { retryable: false };
  it('hands a drained run back (not recorded), abandons one whose lock was lost', () => {
    expect(decideRunEnding({ abortedByDrain: true, lockLost: false }, network, 1, 3)).toBe('hand-back');
    expect(decideRunEnding({ abortedByDrain: false, lockLost: true }, network, 1, 3)).toBe('abandon');
    expect(CRON_DRAIN_HAND_BACK).toEqual({ action: 'defer', reason: 'drain', delayMs: 0 });
  });

  it('retries a failure that never reached the model while attempts are left; records anything else', () => {
    expect(decideRunEnding({ abortedByDrain: false, lockLost: false }, network, 1, 3)).toBe('retry');
    expect(decideRunEnding({ abortedByDrain: false, lockLost: false }, network, 2, 3)).toBe('retry');
    expect(decideRunEnding({ abortedByDrain: false, lockLost: false }, network, 3, 3)).toBe('failed');
    expect(decideRunEnding({ abortedByDrain: false, lockLost: false }, model, 1, 3)).toBe('failed');
  });
});
