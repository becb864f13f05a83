/**
 * Goal continuation turns and the goal's hooks into session input (docs/DESIGN.md §6).
 *
 * A continuation turn runs only while its goal is active, unparked and still
 * the session's goal; it waits behind queued user input and a busy session.
 * After the turn the judge decides; the goal's new state is committed with
 * the turn in one step (`SessionStore.commitTurn` with the goal record), and
 * `continue` queues the next turn. After a real user turn, an active goal
 * gets its next continuation queued behind it (a parked goal is woken).
 */
import { NO_SPEND, sumSpend } from '../../scheduler/model-spend.ts';
import type { Job } from 'bullmq';
import type { InboxJobData } from '../../scheduler/session/inbox.ts';
import { pendingInput } from '../../scheduler/session/inbox.ts';
import { applyGoalTurn, buildGoalInput, type GoalOutcome, type GoalRecord } from '../../scheduler/goal/goal-state.ts';
import { parseGoalArgs, GOAL_HELP } from '../../scheduler/goal/goal-command.ts';
import { deferJob } from '../../scheduler/store/defer-job.ts';
import { CONFLICT, retryOnConflict } from '../../scheduler/store/optimistic-retry.ts';
import { isSilentReply } from '../../scheduler/economy/silent-reply.ts';
import { deliverToRoute } from '../runtime/delivery.ts';
import { runSessionAgent, runSessionTurn } from './session-turn.ts';
import { judgeGoal } from './goal-judge.ts';
import { stepMessages } from '../context/transcript-messages.ts';
import type { InboxHooks, InboxResult } from './inbox-processor.ts';
import type { WorkerDeps } from '../worker-deps.ts';

/** Process one goal continuation job. @throws DelayedError when deferred */
export async function processGoalContinuation(
  job: Job<InboxJobData>,
  token: string | undefined,
  signal: AbortSignal | undefined,
  deps: WorkerDeps,
): Promise<InboxResult> {
  const { sessionId, goalId, goalTurn } = job.data;
  const turnId = `goal:${sessionId}:${goalId}:${goalTurn}`;
  const log = deps.log.child({ sessionId, goalId, goalTurn });
  const goal = await deps.goals.get(sessionId);
  if (!goal || goal.goalId !== goalId || goal.status !== 'active' || goal.parked || goal.turnsUsed + 1 !== goalTurn) {
    log.debug('goal continuation skipped: the goal moved on');
    return { status: 'duplicate' };
  }
  if ((await pendingInput(deps.redis, deps.keys, sessionId)).length > 0) return await deferJob(job, token, deps.config.worker.defer_ms);
  return await runSessionTurn(deps, job, token, signal, sessionId, async (turnSignal, turn) => {
    const startedAt = Date.now();
    const input = buildGoalInput(goal, goalTurn);
    const ran = await runSessionAgent(deps, turn, turnSignal, {
      sessionId,
      input,
      surface: goal.origin.surface,
      events: { kind: 'goal', tick: goalTurn, occurrenceId: turnId },
      model: goal.model ?? undefined,
      kind: 'goal',
      origin: goal.origin,
    });
    if (ran === 'drained') {
      deps.metrics?.turnFinished('goal', 'aborted', (Date.now() - startedAt) / 1000);
      return await deferJob(job, token, deps.config.worker.defer_ms);
    }
    const { reply, steps, failure, replaceTranscript } = ran;
    if (failure) log.warn({ err: failure.message }, 'goal turn failed');
    // Past `agent.max_tokens_per_turn` the goal pauses after this turn: its reply is kept, no judge spends more.
    const overBudget = ran.overBudget ?? (failure?.kind === 'budget' ? failure.overrun : undefined);
    const quiet = !failure && isSilentReply(reply);
    const judged = failure
      ? { verdict: undefined, reason: failure.message, spend: NO_SPEND }
      : overBudget
        ? { verdict: undefined, reason: '', spend: NO_SPEND }
        : await judgeGoal(deps, goal, reply, turnSignal);
    const spend = sumSpend(ran.spend, judged.spend);
    return await retryOnConflict<InboxResult>(
      async () => {
        const fresh = await deps.goals.get(sessionId);
        if (!fresh || fresh.goalId !== goalId) return { status: 'duplicate' };
        const { goal: next, outcome } = applyGoalTurn(fresh, {
          turnId,
          now: Date.now(),
          verdict: judged.verdict,
          reason: judged.reason,
          maxConsecutiveFailures: deps.config.goals.max_consecutive_failures,
          spend,
          overTurnBudget: overBudget,
        });
        const stored: GoalRecord = { ...next, version: fresh.version + 1 };
        const res = await deps.sessions.commitTurn(sessionId, {
          occurrenceId: turnId,
          messages: failure
            ? []
            : [
                { role: 'user', content: input, at: startedAt, source: 'goal', surface: goal.origin.surface },
                ...stepMessages(steps, Date.now(), 'goal', goal.origin.surface),
                { role: 'assistant', content: reply, at: Date.now(), source: 'goal', surface: goal.origin.surface },
              ],
          event: failure
            ? { type: 'error', data: { text: `Goal turn ${goalTurn} failed: ${failure.message}`, occurrenceId: turnId } }
            : {
                type: 'reply',
                data: {
                  source: 'goal',
                  kind: 'goal',
                  tick: goalTurn,
                  text: reply,
                  occurrenceId: turnId,
                  startedAt,
                  finishedAt: Date.now(),
                  worker: deps.workerId,
                  pid: process.pid,
                  outcome: outcome.kind,
                  verdict: judged.verdict ?? (overBudget ? 'not-judged' : 'judge-failed'),
                  ...(spend.calls > 0 ? { spend } : {}),
                  ...(quiet ? { silent: true } : {}),
                },
              },
          record: { key: deps.keys.goal(sessionId), expectedVersion: fresh.version, json: JSON.stringify(stored) },
          replaceTranscript,
        });
        if (res.status === 'conflict') return CONFLICT;
        if (res.status === 'duplicate') return { status: 'duplicate' };
        deps.metrics?.turnFinished('goal', failure ? 'failed' : 'ok', (Date.now() - startedAt) / 1000);
        // A quiet reply (`[SILENT]`) stays in the transcript and the stream; the route gets nothing.
        if (!failure && !quiet) await deliverToRoute(deps, { sessionId, origin: stored.origin, text: reply, occurrenceId: turnId });
        await afterGoalTurn(deps, stored, outcome, turnId);
        return { status: failure ? 'failed' : 'replied', eventId: res.eventId };
      },
      () => new Error(`could not commit goal turn ${turnId}: the goal kept changing`),
    );
  });
}

async function afterGoalTurn(deps: WorkerDeps, goal: GoalRecord, outcome: GoalOutcome, turnId: string): Promise<void> {
  if (outcome.kind === 'continue') {
    await deps.goals.enqueueContinuation(goal);
    return;
  }
  const text =
    outcome.kind === 'achieved'
      ? `Goal achieved: ${goal.text}`
      : outcome.kind === 'paused'
        ? `Goal paused: ${outcome.reason}.`
        : `Goal parked (${outcome.reason}); it wakes on your next message or /goal resume.`;
  await deps.sessions.appendEvent(goal.sessionId, 'notice', { text, kind: 'goal', status: goal.status });
  await deliverToRoute(deps, { sessionId: goal.sessionId, origin: goal.origin, text, occurrenceId: `${turnId}:notice` });
}

/** The goal's hooks into the inbox processor: `/goal`, continuations, and the turn after user input. */
export const goalHooks: InboxHooks = {
  extraCommands: (deps, data) => ({
    goal: async (args: string) => {
      const c = parseGoalArgs(args, { maxPromptChars: deps.config.agent.max_prompt_chars });
      switch (c.action) {
        case 'set':
          return await deps.goals.set(data.sessionId, c.text, data.origin, Date.now(), c.economy);
        case 'status':
          return await deps.goals.status(data.sessionId);
        case 'pause':
          return await deps.goals.pause(data.sessionId);
        case 'resume':
          return await deps.goals.resume(data.sessionId);
        case 'clear':
          return await deps.goals.clear(data.sessionId);
        default:
          return GOAL_HELP;
      }
    },
  }),
  goalContinuation: processGoalContinuation,
  async afterUserTurn(deps, data) {
    const goal = await deps.goals.get(data.sessionId);
    if (!goal || goal.status !== 'active') return;
    if (goal.parked) {
      const woken = await deps.goals.put({ ...goal, parked: false, statusReason: null, updatedAt: Date.now() }, goal.version);
      if (woken) await deps.goals.enqueueContinuation(woken);
      return;
    }
    await deps.goals.enqueueContinuation(goal);
  },
};
