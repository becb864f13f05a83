/**
 * A chat-class turn of one session: user messages and goal continuations
 * (drain class `chat`, `agent.restart_drain_timeout`). Both run the agent
 * under the session's fleet-wide turn lock (one turn per session, docs/DESIGN.md §3),
 * as a tracked turn that `/stop` in the session can abort, and both call the
 * agent over the transcript and sort a failed call the same way; what they
 * commit differs and stays in their processors (`inbox-processor.ts`,
 * `goal-processor.ts`).
 */
import { NO_SPEND, sumSpend, type ModelSpend, type TurnBudgetOverrun } from '../../scheduler/model-spend.ts';
import { fitSessionContext, type FittedContext } from '../context/session-context.ts';
import type { Job } from 'bullmq';
import { deferJob } from '../../scheduler/store/defer-job.ts';
import { TurnError } from '../../scheduler/errors/turn-error.ts';
import type { Origin } from '../../scheduler/session/origin.ts';
import { contextSurfaces, holdsToolOutput, turnMessages } from '../context/transcript-messages.ts';
import { sessionEventSink } from '../turn-runners/turn-events.ts';
import type { ChatMessage } from '../turn-runners/turn-runner.ts';
import type { TurnKind } from '../tools/tool.ts';
import type { TrackedTurn } from '../runtime/turn-tracker.ts';
import type { WorkerDeps } from '../worker-deps.ts';
import { ATTR, SPAN, tracing } from '../../scheduler/telemetry/tracing.ts';

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
    return await deps.turns.run(
      job.id!,
      'chat',
      async (turnSignal, turn) => {
        turn.sessionId = sessionId; // a `/stop` in this session aborts the turn
        return await tracing().span(SPAN.turn, { [ATTR.sessionId]: sessionId }, () => body(turnSignal, turn));
      },
      signal,
    );
  } finally {
    await held.release();
  }
}

/** What an agent call of a session turn gave: its reply and tool steps, or the failure to commit; its spend either way. */
export type SessionAgentResult = (
  | {
      reply: string;
      steps: ChatMessage[];
      failure?: undefined;
      /** The reply's call passed `agent.max_tokens_per_turn`: the reply is kept, the schedule pauses after it. */
      overBudget?: TurnBudgetOverrun;
    }
  | { reply: ''; steps: []; failure: TurnError; overBudget?: undefined }
) & {
  spend: ModelSpend;
  /** The compacted transcript for the commit's `replaceTranscript` (`context/session-context.ts`). */
  replaceTranscript: FittedContext['replace'];
};

/**
 * Run the agent over the session's transcript with `input` as the new user message, after fitting
 * the transcript into the model's context budget (`fitSessionContext`).
 * - A failed call is returned as `failure` (the model's, a tool's or the runner's error, as typed;
 *   anything else as a `model` error), to be committed as a failed turn.
 * - `'drained'`: the drain aborted it; the caller hands the job back (it was never completed).
 * @param events - what the turn's tool events carry besides the call (`occurrenceId`, …)
 * @throws the call's error itself when the job's lock was lost: another worker has the job now, so nothing is committed here
 */
export async function runSessionAgent(
  deps: WorkerDeps,
  turn: TrackedTurn,
  turnSignal: AbortSignal,
  request: {
    sessionId: string;
    input: string;
    surface: Origin['surface'];
    events: Record<string, unknown>;
    model?: string;
    /** `message` (default) or `goal`. */
    kind?: Extract<TurnKind, 'message' | 'goal'>;
    /** The message's or goal's origin (tools acting for the turn use it: the `schedules` tool). */
    origin?: Origin;
  },
): Promise<SessionAgentResult | 'drained'> {
  const { sessionId, model, input, surface, origin } = request;
  const kind = request.kind ?? 'message';
  const transcript = await deps.sessions.transcript(sessionId);
  let spend: ModelSpend = NO_SPEND;
  let replaceTranscript: FittedContext['replace'];
  try {
    // The turn answers to every surface whose text is in its context (provenance, `contextSurfaces`).
    const surfaces = contextSurfaces(surface, transcript);
    const fitted = await fitSessionContext(deps, {
      sessionId,
      transcript,
      input,
      model,
      surface: surfaces,
      signal: turnSignal,
      kind,
      events: request.events,
      turn: { kind, ...(origin ? { origin } : {}) },
    });
    spend = fitted.spend;
    replaceTranscript = fitted.replace;
    const out = await deps.runners.agent.run({
      sessionId,
      messages: turnMessages(fitted.transcript, input),
      // A summary standing for tool results counts as their text (`holdsToolOutput`); `tool` messages the runner sees itself.
      toolOutput: holdsToolOutput(fitted.transcript),
      signal: turnSignal,
      surface: surfaces,
      onEvent: sessionEventSink(deps, sessionId, request.events),
      model,
      kind,
      origin,
    });
    return {
      reply: out.reply,
      steps: out.steps,
      spend: sumSpend(spend, out.spend ?? NO_SPEND),
      replaceTranscript,
      ...(out.overBudget ? { overBudget: out.overBudget } : {}),
    };
  } catch (err) {
    if (turn.abortedByDrain) return 'drained';
    if (turn.lockLost) throw err;
    const failure = err instanceof TurnError ? err : new TurnError((err as Error).message, { kind: 'model', sessionId, cause: err });
    return { reply: '', steps: [], failure, spend: sumSpend(spend, (err as { spend?: ModelSpend }).spend ?? NO_SPEND), replaceTranscript };
  }
}
