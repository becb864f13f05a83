/**
 * How an occurrence's turn that threw ends — one decision for loop ticks and cron runs, carried
 * out by the pipeline's run step (`run-turn.ts`).
 */

/** How a turn that threw ends. */
export type TurnEnding = 'hand-back' | 'abandon' | 'retry' | 'failed';

/**
 * Decide how a turn that threw ends, in this order:
 *  - drain hand-back (`DRAIN_HAND_BACK`, `defer-decision.ts`): a turn aborted by the drain deadline is not
 *    committed; its job goes back to the queue for another worker; the same for a turn fenced off
 *    because its lock could not be renewed (`runtime/lock-fence.ts`: the lock may still be this
 *    worker's, and then the job resumes from its journal; if it lapsed, the hand-back fails and the
 *    worker that took the job over has it);
 *  - lock loss: the job's BullMQ lock was lost, so another worker has the job now; commit nothing
 *    here (docs/RELIABILITY.md, "A dead worker's work restarts within seconds");
 *  - a failure that never reached the model (`retryable`, a network error) while the job has BullMQ
 *    attempts left is retried with backoff (cron runs; a tick's retry is its next occurrence);
 *  - any other error (model, command, timeout, `/stop`) is a failed turn: committed, counted in the
 *    failure streak, told to the route.
 * @param retry - the error and the job's attempts (`attempt` 1-based); absent: never retried
 */
export function decideTurnEnding(
  turn: { abortedByDrain: boolean; lockLost: boolean; fenced?: boolean },
  retry?: { retryable: boolean; attempt: number; attempts: number },
): TurnEnding {
  if (turn.abortedByDrain || turn.fenced) return 'hand-back';
  if (turn.lockLost) return 'abandon';
  if (retry && retry.retryable && retry.attempt < retry.attempts) return 'retry';
  return 'failed';
}
