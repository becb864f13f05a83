/**
 * Step 4 of an occurrence: run its turn (`runOccurrence`, `pipeline.ts`), inside the tracked turn
 * the pipeline opened (the drain waits for it and aborts it at the deadline; `/stop` finds it when
 * the occurrence is stoppable). Lateness, the turn metrics and how a turn that threw ends are
 * carried out here for every kind of occurrence.
 */
import { TurnError } from '../../scheduler/errors/turn-error.ts';
import { NO_SPEND, type ModelSpend } from '../../scheduler/model-spend.ts';
import type { TrackedTurn } from '../runtime/turn-tracker.ts';
import type { WorkerDeps } from '../worker-deps.ts';
import type { OccurrencePlan, RanTurn } from './plan.ts';
import { decideTurnEnding } from './turn-ending.ts';

/**
 * What a stopped turn is recorded as (`TrackedTurn.stoppedBy`: `/stop`, Ctrl+C in `hermes chat`, or a
 * newer occurrence of a cron job with `--overlap cancel_other`).
 */
const STOPPED: Record<NonNullable<TrackedTurn['stoppedBy']>, string> = {
  stop: 'Stopped by /stop.',
  interrupt: 'Interrupted from the chat (Ctrl+C); the loop is paused.',
  overlap: 'Cancelled: a newer occurrence replaced it (--overlap cancel_other).',
};

/**
 * Run the claimed occurrence's turn.
 * @param startedAt - epoch ms the occurrence was claimed: its lateness is `startedAt - dueAt`
 * @returns the turn to commit (failed or not), or `hand-back` when the drain cut it (not committed)
 * @throws the turn's error when the job's lock was lost (another worker has the job now: nothing is
 *   committed here); a retryable TurnError while the job has BullMQ attempts left
 */
export async function runTurn<Gated, Claimed, Ran extends RanTurn, Committed, Result>(
  plan: OccurrencePlan<Gated, Claimed, Ran, Committed, Result>,
  deps: WorkerDeps,
  claimed: Claimed,
  startedAt: number,
  signal: AbortSignal,
  turn: TrackedTurn,
): Promise<Ran | 'hand-back'> {
  const o = plan.occurrence;
  if (o.stoppableAs) Object.assign(turn, o.stoppableAs);
  // Lateness: the start of the turn (its claim) minus the due time; a manual run has none.
  if (o.measuresLateness) deps.metrics?.tickLateness.observe({ kind: o.kind }, Math.max(0, startedAt - o.dueAt) / 1000);
  let ran: Ran;
  try {
    ran = await plan.runTurn(claimed, signal, turn);
  } catch (err) {
    const error =
      err instanceof TurnError
        ? err
        : new TurnError((err as Error).message, { kind: 'model', sessionId: o.stoppableAs?.sessionId, cause: err });
    const ending = decideTurnEnding(
      turn,
      o.attempts && { retryable: error.retryable, attempt: o.attempts.attempt, attempts: o.attempts.of },
    );
    if (ending === 'hand-back') {
      o.log.warn(
        { attempt: o.attempts?.attempt },
        turn.fenced
          ? `${o.label} fenced off: its job lock could not be renewed in time; handed back`
          : `${o.label} aborted by drain; handed back for another worker`,
      );
      deps.metrics?.turnFinished(o.kind, 'aborted', (Date.now() - startedAt) / 1000);
      return 'hand-back';
    }
    if (ending === 'abandon') throw err; // another worker has the job now
    if (ending === 'retry') {
      o.log.warn({ attempt: o.attempts?.attempt, error: error.message }, `${o.label} could not reach the model; retrying with backoff`);
      throw error;
    }
    const failure = turn.stoppedBy
      ? new TurnError(STOPPED[turn.stoppedBy], { kind: 'aborted', sessionId: o.stoppableAs?.sessionId, cause: err })
      : error;
    o.log.warn({ err: failure.message, failureKind: failure.kind }, `${o.label} failed`);
    // What the model calls made before the failure cost (the agent runner attaches it).
    ran = plan.failedTurn(claimed, { error: failure, spend: (err as { spend?: ModelSpend }).spend ?? NO_SPEND, turn });
  }
  // An unchanged occurrence (`--watch`) ran no turn: it is no turn in the metrics either.
  if (!ran.unchanged) deps.metrics?.turnFinished(o.kind, ran.failed ? 'failed' : 'ok', (ran.finishedAt - startedAt) / 1000);
  return ran;
}
