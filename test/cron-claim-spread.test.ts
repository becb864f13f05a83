/**
 * The claims of one due time are spread ahead of it (`spreadClaimAt`, `worker/cron/cron-claim-ahead.ts`):
 * batches of 64, each 64 × 0.25 ms earlier than the one after it, so a top-of-the-hour burst's claims are
 * made before its instant; one occurrence alone is claimed `worker.claim_lead_ms` ahead, and each due time
 * counts its own.
 */
import { describe, it, expect } from 'vitest';
import { spreadClaimAt } from '../worker/cron/cron-claim-ahead.ts';

describe('cron claims ahead: spread over a burst', () => {
  it('the first 64 of a due time at the lead, then 16 ms earlier a batch; another due time starts over', () => {
    const due = Date.now() + 3_600_000;
    const times = Array.from({ length: 10_000 }, () => spreadClaimAt(due, 300));
    expect(times.slice(0, 64).every((t) => t === due - 300)).toBe(true);
    expect(times[64]).toBe(due - 316);
    expect(times[127]).toBe(due - 316);
    expect(times[128]).toBe(due - 332);
    // 10,000 at one instant: the earliest batch about 2.5 s before the lead, never later than the lead.
    expect(Math.min(...times)).toBe(due - 300 - Math.floor(9_999 / 64) * 16);
    expect(Math.max(...times)).toBe(due - 300);
    // Another instant (a second later) counts from its own first occurrence.
    expect(spreadClaimAt(due + 1000, 300)).toBe(due + 700);
    expect(spreadClaimAt(due + 1000, 0)).toBe(due + 1000);
  });
});
