/**
 * Abort requests on the session's abort channel (scheduler/session/turn-abort.ts) and
 * which running turns they reach (worker/runtime/turn-tracker.ts): `/stop` reaches
 * every turn of the session; Ctrl+C in `hermes chat` only the tick it was
 * aimed at, never a turn that started since.
 */
import { describe, expect, it } from 'vitest';
import { decodeTurnAbort, encodeTurnAbort } from '../scheduler/session/turn-abort.ts';
import { TurnTracker, type TrackedTurn } from '../worker/runtime/turn-tracker.ts';

/** Start a turn that runs until aborted; resolves with the turn once it is registered. */
function hold(tracker: TurnTracker, id: string, fields: Partial<TrackedTurn>): Promise<TrackedTurn> {
  return new Promise((registered) => {
    void tracker.run(id, 'deadline', (signal, turn) => {
      Object.assign(turn, fields);
      registered(turn);
      return new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    });
  });
}

describe('turn abort requests', () => {
  it('round-trip through the channel form; anything else is not a request', () => {
    for (const r of [
      { sessionId: 'a:b{c}', by: 'stop' as const },
      { sessionId: 's', occurrenceId: 'o1', by: 'interrupt' as const },
    ]) {
      expect(decodeTurnAbort(encodeTurnAbort(r))).toEqual(r);
    }
    expect(decodeTurnAbort('plain-session-id')).toBeUndefined();
    expect(decodeTurnAbort('{"sessionId":"s","by":"kill"}')).toBeUndefined();
    expect(decodeTurnAbort('{"sessionId":"","by":"stop"}')).toBeUndefined();
  });

  it('/stop aborts every turn of the session; an interrupt only the turn of its occurrence', async () => {
    const tracker = new TurnTracker();
    const tick = await hold(tracker, 'j1', { sessionId: 's', occurrenceId: 'o1' });
    const message = await hold(tracker, 'j2', { sessionId: 's' });
    const other = await hold(tracker, 'j3', { sessionId: 't', occurrenceId: 'o1' });

    // Aimed at a tick that has ended already: nothing else is hit.
    expect(tracker.abortTurns({ sessionId: 's', occurrenceId: 'o0', by: 'interrupt' })).toBe(0);
    expect(tracker.abortTurns({ sessionId: 's', occurrenceId: 'o1', by: 'interrupt' })).toBe(1);
    expect(tick.controller.signal.aborted).toBe(true);
    expect(tick.stoppedBy).toBe('interrupt');
    expect(message.controller.signal.aborted).toBe(false);

    expect(tracker.abortTurns({ sessionId: 's', by: 'stop' })).toBe(1);
    expect(message.stoppedBy).toBe('stop');
    expect(other.controller.signal.aborted).toBe(false);
    expect(tracker.abortTurns({ sessionId: 't', by: 'stop' })).toBe(1);
  });

  it('reaches a tick claimed ahead of its due time before its turn starts: the turn starts stopped', async () => {
    const tracker = new TurnTracker();
    tracker.claimedAhead('j1', 's', 'o1');
    tracker.claimedAhead('j2', 's', 'o2');
    expect(tracker.abortTurns({ sessionId: 's', occurrenceId: 'o1', by: 'interrupt' })).toBe(1);
    const seen = await Promise.all(
      ['j1', 'j2'].map((id) => tracker.run(id, 'deadline', async (signal, turn) => ({ aborted: signal.aborted, by: turn.stoppedBy }))),
    );
    expect(seen).toEqual([
      { aborted: true, by: 'interrupt' },
      { aborted: false, by: undefined },
    ]);
    // Forgotten once started (or dropped): a later /stop finds nothing of it.
    tracker.claimedAhead('j3', 't', 'o3');
    tracker.forgetClaimedAhead('j3');
    expect(tracker.abortTurns({ sessionId: 't', by: 'stop' })).toBe(0);
  });
});
