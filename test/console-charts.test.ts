/**
 * The console's charts (gateway/console/console-data.ts, `chartsFrom`): a tick's lateness is the one
 * its committed event records — taken when its turn started — not the `tick.started` event's, which
 * is written at the claim and, for a tick claimed ahead of its due time (worker/loop/claim-ahead.ts), says 0.
 */
import { describe, expect, it } from 'vitest';
import { chartsFrom } from '../gateway/console/console-data.ts';
import type { SessionEvent } from '../scheduler/session/session-store.ts';

const NOW = Date.UTC(2026, 11, 5, 12);
const ev = (at: number, type: string, data: Record<string, unknown>): SessionEvent => ({ id: `${at}-0`, type, data });

describe('console charts', () => {
  it("take a tick's lateness from the event that committed it, and count every turn that ended", () => {
    const due = NOW - 60_000;
    const { lateness, hours } = chartsFrom(
      [
        ev(due - 300, 'tick.started', { kind: 'loop', dueAt: due, startedAt: due, latenessMs: 0 }),
        ev(due + 3_000, 'reply', { source: 'tick', kind: 'loop', dueAt: due, startedAt: due + 12, latenessMs: 12 }),
        ev(due + 5_000, 'tick.failed', { source: 'heartbeat', kind: 'heartbeat', dueAt: due, startedAt: due + 40, latenessMs: 40 }),
        ev(due + 6_000, 'reply', { source: 'message', text: 'hi' }), // a chat turn: no lateness
        ev(NOW - 25 * 3_600_000, 'reply', { source: 'tick', kind: 'loop', startedAt: 0, latenessMs: 999 }), // outside the window
      ],
      [],
      NOW,
    );
    expect(lateness).toEqual([
      { at: due + 12, latenessMs: 12, kind: 'loop' },
      { at: due + 40, latenessMs: 40, kind: 'heartbeat' },
    ]);
    expect(hours.reduce((n, h) => n + h.turns, 0)).toBe(3);
    expect(hours.reduce((n, h) => n + h.failures, 0)).toBe(1);
  });
});
