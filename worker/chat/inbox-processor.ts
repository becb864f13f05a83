/**
 * Session input — a user message or slash command — as a turn.
 *
 * Order and priority (docs/DESIGN.md §3; docs/RELIABILITY.md, "Session input runs in order, and a bad
 * input is set aside"): messages of one session run in arrival order (a message that is not the oldest
 * pending one waits); a busy session defers the message; user messages outrank goal continuations and
 * ticks. A try that throws is made again a bounded number of times, then the input is set aside, so it
 * never holds up the ones after it (`input-failure.ts`).
 * Slash commands are applied at once (they are state changes, not turns).
 * A message interrupted by a drain with `restart_drain_timeout` 0 is handed
 * back (resumable) and the user is told.
 */
import { DelayedError, type Job } from 'bullmq';
import { clearPendingInput, inputOccurrenceId, pendingInput, type InboxJobData } from '../../scheduler/session/inbox.ts';
import { isHermesError } from '../../scheduler/errors/hermes-error.ts';
import { deferJob } from '../../scheduler/store/defer-job.ts';
import { isSilentReply } from '../../scheduler/economy/silent-reply.ts';
import { deliverToRoute } from '../runtime/delivery.ts';
import { runSessionAgent, runSessionTurn } from './session-turn.ts';
import { runSlashCommand } from './slash-commands.ts';
import { retryOrSetAside, setAsideFailedJob } from './input-failure.ts';
import { stepMessages } from '../context/transcript-messages.ts';
import type { WorkerDeps } from '../worker-deps.ts';
import { encodeTurnAbort } from '../../scheduler/session/turn-abort.ts';

export type InboxResult = { status: 'replied' | 'command' | 'ignored' | 'failed' | 'duplicate' | 'set-aside'; eventId?: string };

/** Extra slash commands (e.g. `/goal`) and goal hooks, registered by the worker process. */
export interface InboxHooks {
  extraCommands?: (deps: WorkerDeps, data: InboxJobData) => Record<string, (args: string) => Promise<string>>;
  /** Called after a user turn committed (goal continuation scheduling). */
  afterUserTurn?: (deps: WorkerDeps, data: InboxJobData, reply: string) => Promise<void>;
  /** Goal continuations are handled by this processor when set. */
  goalContinuation?: (
    job: Job<InboxJobData>,
    token: string | undefined,
    signal: AbortSignal | undefined,
    deps: WorkerDeps,
  ) => Promise<InboxResult>;
}

/**
 * Process one inbox job.
 * @throws DelayedError when deferred (an older message of the session is pending, the session is busy,
 *   or a try that threw is to be made again)
 */
export async function processInbox(
  job: Job<InboxJobData>,
  token: string | undefined,
  signal: AbortSignal | undefined,
  deps: WorkerDeps,
  hooks: InboxHooks = {},
): Promise<InboxResult> {
  const data = job.data;
  if (data.type === 'goal-continuation') {
    if (!hooks.goalContinuation) throw new Error('goal continuations are not enabled in this worker');
    return await hooks.goalContinuation(job, token, signal, deps);
  }
  try {
    return await processInput(job, token, signal, deps, hooks);
  } catch (err) {
    if (err instanceof DelayedError) throw err;
    // Another worker has the job now (this one's lock lapsed): it decides what becomes of the input.
    if (token !== undefined && (await job.extendLock(token, deps.config.worker.lock_duration_ms)) === 0) throw err;
    return await retryOrSetAside(job, token, deps, err); // a try that threw (input-failure.ts)
  }
}

/** One try of a user message or slash command. @throws DelayedError when deferred; whatever its handling throws */
async function processInput(
  job: Job<InboxJobData>,
  token: string | undefined,
  signal: AbortSignal | undefined,
  deps: WorkerDeps,
  hooks: InboxHooks,
): Promise<InboxResult> {
  const data = job.data;
  const { sessionId } = data;
  const occurrenceId = inputOccurrenceId(sessionId, data.messageId);
  const log = deps.log.child({ sessionId, jobId: job.id });
  for (;;) {
    const pending = await pendingInput(deps.redis, deps.keys, sessionId);
    if (pending.length === 0 || pending[0] === occurrenceId || !pending.includes(occurrenceId)) break;
    // An older input goes first, unless its job failed for good: that one is set aside (input-failure.ts).
    if (!(await setAsideFailedJob(deps, sessionId, pending[0]!))) return await deferJob(job, token, deps.config.worker.defer_ms);
  }
  if (await deps.sessions.isCommitted(sessionId, occurrenceId)) {
    await clearPendingInput(deps.redis, deps.keys, sessionId, occurrenceId);
    return { status: 'duplicate' };
  }

  // Slash commands: state changes, answered at once.
  let commandReply: string | undefined;
  try {
    const outcome = await runSlashCommand(data.text, {
      sessionId,
      origin: data.origin,
      schedules: deps.schedules,
      config: deps.config,
      extra: hooks.extraCommands?.(deps, data),
      abortRunningTurn: () => deps.redis.publish(deps.keys.turnAbortChannel, encodeTurnAbort({ sessionId, by: 'stop' })),
    });
    if (outcome.kind === 'ignored') {
      // Addressed to another bot: not run, not a turn, not answered.
      log.debug({ reason: outcome.reason }, 'command for another bot ignored');
      await clearPendingInput(deps.redis, deps.keys, sessionId, occurrenceId);
      return { status: 'ignored' };
    }
    if (outcome.kind === 'reply') commandReply = outcome.text;
  } catch (err) {
    if (!isHermesError(err)) throw err;
    commandReply = err.message; // bad input or store refusal: a clear message, nothing changed
    if (err.code === 'STORE_UNAVAILABLE') log.warn({ err: err.message }, 'command not applied: store refused the write');
  }
  if (commandReply !== undefined) {
    const res = await deps.sessions.commitTurn(sessionId, {
      occurrenceId,
      messages: [],
      event: { type: 'notice', data: { text: commandReply, command: data.text.split(/\s/)[0], occurrenceId } },
    });
    await deliverToRoute(deps, { sessionId, origin: data.origin, text: commandReply, occurrenceId });
    await clearPendingInput(deps.redis, deps.keys, sessionId, occurrenceId);
    return { status: 'command', eventId: res.status === 'committed' ? res.eventId : undefined };
  }

  return await runSessionTurn(deps, job, token, signal, sessionId, async (turnSignal, turn) => {
    const startedAt = Date.now();
    const ran = await runSessionAgent(deps, turn, turnSignal, {
      sessionId,
      input: data.text,
      surface: data.origin.surface,
      origin: data.origin,
      events: { occurrenceId },
    });
    if (ran === 'drained') {
      await deps.sessions.appendEvent(sessionId, 'notice', {
        text: 'Your message was interrupted by a restart; it will be answered when a worker is back.',
        occurrenceId,
      });
      return await deferJob(job, token, deps.config.worker.defer_ms);
    }
    const { reply, steps, failure, spend, replaceTranscript } = ran;
    if (failure) log.warn({ err: failure.message, failureKind: failure.kind }, 'user turn failed');
    const finishedAt = Date.now();
    // A quiet reply (`[SILENT]`) stays in the transcript and the stream; the route gets nothing.
    const quiet = !failure && isSilentReply(reply);
    deps.metrics?.turnFinished('message', failure ? 'failed' : 'ok', (finishedAt - startedAt) / 1000);
    const res = await deps.sessions.commitTurn(sessionId, {
      occurrenceId,
      messages: failure
        ? []
        : [
            { role: 'user', content: data.text, at: data.receivedAt, source: 'message', surface: data.origin.surface },
            ...stepMessages(steps, finishedAt, 'message', data.origin.surface),
            { role: 'assistant', content: reply, at: finishedAt, source: 'message', surface: data.origin.surface },
          ],
      event: failure
        ? { type: 'error', data: { text: failure.message, occurrenceId, ...(spend.calls > 0 ? { spend } : {}) } }
        : {
            type: 'reply',
            data: {
              source: 'message',
              text: reply,
              occurrenceId,
              startedAt,
              finishedAt,
              worker: deps.workerId,
              pid: process.pid,
              ...(spend.calls > 0 ? { spend } : {}),
              ...(quiet ? { silent: true } : {}),
            },
          },
      replaceTranscript,
    });
    await clearPendingInput(deps.redis, deps.keys, sessionId, occurrenceId);
    if (res.status === 'duplicate') return { status: 'duplicate' };
    if (!quiet) await deliverToRoute(deps, { sessionId, origin: data.origin, text: failure ? failure.message : reply, occurrenceId });
    if (!failure) await hooks.afterUserTurn?.(deps, data, reply);
    return { status: failure ? 'failed' : 'replied', eventId: res.status === 'committed' ? res.eventId : undefined };
  });
}
