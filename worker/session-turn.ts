/**
 * A chat-class turn of one session: user messages and goal continuations
 * (drain class `chat`, `agent.restart_drain_timeout`). Both run the agent
 * under the session's fleet-wide turn lock (one turn per session, SPEC §3),
 * as a tracked turn that `/stop` in the session can abort, and both sort a
 * failed agent call the same way; what they commit differs and stays in
 * their processors (`inbox-processor.ts`, `goal-processor.ts`).
 */
import type { Job } from 'bullmq';
import { deferJob } from '../scheduler/defer-job.ts';
import { TurnError } from '../scheduler/errors/turn-error.ts';
import type { TrackedTurn } from './turn-tracker.ts';
import type { WorkerDeps } from './worker-deps.ts';

/**
 * Run `body` under `sessionId`'s turn lock as a tracked `chat` turn of `job`.
 * A busy session (another job holds the lock) defers the job by `worker.defer_ms`.
 * The lock is released when `body` ends, whatever its outcome.
 * @throws DelayedError when deferred; whatever `body` throws
 */
export async function runSessionTurn<R>(
  deps: WorkerDeps,
  job: Job,
  token: string | undefined,
  signal: AbortSignal | undefined,
  sessionId: string,
  body: (turnSignal: AbortSignal, turn: TrackedTurn) => Promise<R>,
): Promise<R> {
  const held = await deps.lock.acquire(sessionId, job.id!);
  if (!held) return await deferJob(job, token, deps.config.worker.defer_ms);
  try {
    return await deps.turns.run(job.id!, 'chat', async (turnSignal, turn) => {
      turn.sessionId = sessionId; // a `/stop` in this session aborts the turn
      return await body(turnSignal, turn);
    }, signal);
  } finally {
    await held.release();
  }
}

/**
 * What a failed agent call of a session turn means.
 * - `drained`: the drain aborted it; the caller hands the job back (it was never completed).
 * - a `TurnError`: the turn failed (the model's, a tool's or the runner's error, as typed; anything
 *   else as a `model` error) and is committed as failed.
 * @throws `err` itself when the job's lock was lost: another worker has the job now, so nothing is committed here
 */
export function sessionTurnFailure(err: unknown, turn: TrackedTurn, sessionId: string): TurnError | 'drained' {
  if (turn.abortedByDrain) return 'drained';
  if (turn.lockLost) throw err;
  return err instanceof TurnError ? err : new TurnError((err as Error).message, { kind: 'model', sessionId, cause: err });
}
