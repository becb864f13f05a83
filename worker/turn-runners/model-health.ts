/**
 * What the agent runner knows of each model it calls, kept in the fleet's store
 * (`scheduler/models/model-state-store.ts`): the window its refusals taught, and its circuit
 * breaker. The rules are the pure ones of `scheduler/models/` (`model-window.ts`,
 * `circuit-breaker.ts`); this module reads and writes around them.
 */
import { admit, afterCall, type Admission, type BreakerRecord, type BreakerSettings } from '../../scheduler/models/circuit-breaker.ts';
import type { ModelRef, ModelState, ModelStateStore } from '../../scheduler/models/model-state-store.ts';
import type { LearnedWindow } from '../../scheduler/models/model-window.ts';

/** The models' state, read and changed for the runner. */
export class ModelHealth {
  constructor(
    private readonly store: ModelStateStore,
    private readonly breaker: BreakerSettings,
  ) {}

  /** What is stored of `ref` (its learned window and breaker): one round trip, shared by reads asked for together (`RedisModelState`). */
  async read(ref: ModelRef): Promise<ModelState> {
    return await this.store.read(ref);
  }

  /**
   * Whether a call to `ref` may go at `now` (`admit`); the one call that takes a probe after a
   * cool-down claims it in the store, so only one worker probes.
   * @returns the admission and the state read (its breaker as read before this call)
   */
  async admit(ref: ModelRef, now: number): Promise<{ admission: Admission; state: ModelState }> {
    const state = await this.store.read(ref);
    const first = admit(state.breaker, now, this.breaker);
    if (!first.next) return { admission: first.admission, state };
    const admission = await this.store.updateBreaker(ref, (current) => {
      const again = admit(current, now, this.breaker);
      return { next: again.next, result: again.admission };
    });
    return { admission, state };
  }

  /**
   * Record how a call went: an answer resets the breaker (no write when it was clean as read), a
   * failure for good counts toward opening it.
   * @param read - the breaker as read when the call was admitted
   * @returns whether this outcome opened or closed the breaker, and the record after it
   */
  async afterCall(
    ref: ModelRef,
    read: BreakerRecord | undefined,
    outcome: { ok: true } | { ok: false; error: string },
    now: number,
  ): Promise<{ opened: boolean; closed: boolean; record?: BreakerRecord }> {
    if (outcome.ok && (!read || (read.failures === 0 && read.openUntil === undefined))) return { opened: false, closed: false };
    return await this.store.updateBreaker(ref, (current) => {
      const r = afterCall(current, outcome, now, this.breaker);
      return { next: r.next, result: { opened: r.opened, closed: r.closed, ...(r.next ? { record: r.next } : {}) } };
    });
  }

  /** Learn a window for `ref` (merged with what the fleet learned: `mergeLearned`). @returns what is stored after */
  async learn(ref: ModelRef, proposal: Omit<LearnedWindow, 'version'>): Promise<LearnedWindow> {
    return await this.store.learnWindow(ref, { ...proposal, version: 0 });
  }
}
