/**
 * Active turns of one process, by drain class (docs/DESIGN.md §9, docs/GLOSSARY.md):
 * - `deadline`: loop, heartbeat and cron ticks and `/v1` runs — may finish
 *   within `agent.cron_drain_timeout`;
 * - `chat`: user messages and goal continuations — `agent.restart_drain_timeout`.
 * Each turn has an AbortController the drain fires at its deadline.
 */
import type { TurnAbortBy, TurnAbortRequest } from '../scheduler/session/turn-abort.ts';

export type DrainClass = 'deadline' | 'chat';

/** One running turn. */
export interface TrackedTurn {
  id: string;
  drainClass: DrainClass;
  controller: AbortController;
  /** Resolves when the turn's processor has finished (committed, deferred or failed). */
  done: Promise<void>;
  /** Set when the drain aborted this turn. */
  abortedByDrain: boolean;
  /**
   * Set when this worker lost the BullMQ lock of the turn's job (its renewal
   * came too late): the job may already run on another worker, so this turn
   * is aborted and must not commit anything.
   */
  lockLost: boolean;
  /** The session the turn belongs to, when the processor names it (so `/stop` can find it). */
  sessionId?: string;
  /** The occurrence a tick's turn runs (so an interrupt aimed at that tick finds only it). */
  occurrenceId?: string;
  /** Set when the user aborted this turn: `/stop`, or Ctrl+C in `hermes chat` (see `abortTurns`). */
  stoppedBy?: TurnAbortBy;
}

/** Registry of this process's running turns, by drain class, with their AbortControllers. */
export class TurnTracker {
  private readonly active = new Map<string, TrackedTurn>();
  /**
   * Set when this process starts draining. A paused BullMQ worker can still
   * receive one job from a blocking fetch that was in flight; processors that
   * hand work back check this and hand such a job back at once.
   */
  draining = false;

  /**
   * Run `fn` as a tracked turn.
   * @param parentSignal - the BullMQ job's own signal, if any; it also aborts the turn
   */
  async run<T>(
    id: string,
    drainClass: DrainClass,
    fn: (signal: AbortSignal, turn: TrackedTurn) => Promise<T>,
    parentSignal?: AbortSignal,
  ): Promise<T> {
    const controller = new AbortController();
    const onParent = () => controller.abort(parentSignal?.reason);
    parentSignal?.addEventListener('abort', onParent, { once: true });
    let finish!: () => void;
    const turn: TrackedTurn = { id, drainClass, controller, done: new Promise<void>((r) => (finish = r)), abortedByDrain: false, lockLost: false };
    this.active.set(id, turn);
    try {
      return await fn(controller.signal, turn);
    } finally {
      parentSignal?.removeEventListener('abort', onParent);
      this.active.delete(id);
      finish();
    }
  }

  /**
   * Abort the turns a user's request names (`scheduler/session/turn-abort.ts`, published on
   * `Keys.turnAbortChannel`): every turn of the session, or only the one of
   * `occurrenceId`. Only turns that set `sessionId` (and `occurrenceId`) are found.
   * @returns how many were aborted
   */
  abortTurns(request: TurnAbortRequest): number {
    let n = 0;
    for (const turn of this.active.values()) {
      if (turn.sessionId !== request.sessionId || turn.controller.signal.aborted) continue;
      if (request.occurrenceId !== undefined && turn.occurrenceId !== request.occurrenceId) continue;
      turn.stoppedBy = request.by;
      turn.controller.abort(new Error('stopped by the user'));
      n++;
    }
    return n;
  }

  /**
   * Abort the turn of job `id` because its BullMQ lock was lost (see `TrackedTurn.lockLost`).
   * @returns whether such a turn was running
   */
  abortLockLost(id: string): boolean {
    const turn = this.active.get(id);
    if (!turn) return false;
    turn.lockLost = true;
    turn.controller.abort(new Error('job lock lost'));
    return true;
  }

  /** Active turns, optionally of one class. */
  list(drainClass?: DrainClass): TrackedTurn[] {
    return [...this.active.values()].filter((t) => drainClass === undefined || t.drainClass === drainClass);
  }

  get size(): number {
    return this.active.size;
  }
}
