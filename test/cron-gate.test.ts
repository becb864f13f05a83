/**
 * The cron gate's decisions as pure functions (no Redis): how a job picked up
 * before its due time waits, what `--overlap` does when the job's previous run
 * is still going, and how a run whose turn threw ends. The misfire decision
 * itself is in cron-rules.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { OVERLAP_POLICIES } from '../scheduler/cron/cron-job.ts';
import { bufferMember, bufferPlace } from '../scheduler/cron/overlap-buffer.ts';
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
  const policy = { deferMs: 250, canDefer: true, maxBuffered: 3 };
  it('runs when the lock was free, and always with allow', () => {
    for (const overlap of OVERLAP_POLICIES) expect(decideOverlap(overlap, false, policy)).toEqual({ action: 'run' });
    expect(decideOverlap('allow', true, policy)).toEqual({ action: 'run' });
  });

  it('with the previous run still going: skip records a skipped run, queue waits', () => {
    expect(decideOverlap('skip', true, policy)).toEqual({ action: 'skip', reason: 'overlap' });
    expect(decideOverlap('queue', true, policy)).toEqual({ action: 'defer', reason: 'overlap-queue', delayMs: 250 });
  });

  it('buffer_all waits its place in the buffer while fewer than the bound wait before it, else is skipped as buffer-full', () => {
    for (const place of [0, 1, 2]) {
      expect(decideOverlap('buffer_all', true, policy, place)).toEqual({ action: 'defer', reason: 'overlap-buffer', delayMs: 250 });
    }
    expect(decideOverlap('buffer_all', true, policy, 3)).toEqual({ action: 'skip', reason: 'buffer-full' });
    expect(decideOverlap('buffer_all', true, policy, 7)).toEqual({ action: 'skip', reason: 'buffer-full' });
  });

  it('cancel_other waits for the running one it cancels', () => {
    expect(decideOverlap('cancel_other', true, policy)).toEqual({ action: 'defer', reason: 'overlap-cancel', delayMs: 250 });
  });

  it('queue, buffer_all and cancel_other skip when the job cannot be moved', () => {
    for (const overlap of ['queue', 'buffer_all', 'cancel_other'] as const) {
      expect(decideOverlap(overlap, true, { ...policy, canDefer: false })).toEqual({ action: 'skip', reason: 'overlap' });
    }
  });
});

describe('bufferPlace (--overlap buffer_all)', () => {
  const job = { generation: 4, last_due_at: 2_000 };
  const at = (generation: number, trigger: 'schedule' | 'manual', due: number) =>
    [bufferMember({ generation, trigger, occurrenceId: `cron:j:${trigger}:${due}` }), due] as const;
  it('counts the live occurrences due before it, leaving out and removing the ones that can no longer run', () => {
    const me = at(4, 'schedule', 5_000);
    const entries = [
      at(4, 'schedule', 1_000),
      at(3, 'schedule', 2_500),
      at(4, 'manual', 1_500),
      at(4, 'schedule', 3_000),
      me,
      at(4, 'schedule', 6_000),
    ];
    entries.sort((a, b) => a[1] - b[1]);
    expect(bufferPlace(entries, me[0], job)).toEqual({
      place: 2, // the manual run and the occurrence due at 3 s
      stale: [at(4, 'schedule', 1_000)[0], at(3, 'schedule', 2_500)[0]], // handled already; an older generation
    });
    expect(bufferPlace([me], me[0], job)).toEqual({ place: 0, stale: [] });
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
