/**
 * A loop or heartbeat tick, end to end — the story of one occurrence:
 *
 *   1. wait for the exact due time (the job arrives `prefetch_lead_ms` early);
 *   2. gate (`gate`): load the schedule's current record; a paused, finished,
 *      removed or replaced schedule never fires, and an occurrence already
 *      covered by a later-started tick is coalesced (`decideFire`); real user
 *      input first, then goal continuations: while the session has queued user
 *      input or an active unparked goal, the tick is deferred (not dropped);
 *   3.+4. in one Lua script (`LoopStore.claimTick`), so a tick costs one round
 *      trip here however many are due together:
 *   3. take the session's turn lock (busy → deferred, never run in parallel);
 *   4. claim: the fire decision, the
 *      coalescing rule and the tick number were taken over one version of the
 *      record (and one read of the goal and the pending input); the claim
 *      holds only if all are still as read and no other occurrence is in
 *      flight, and marks this one in flight. A change in between (an earlier
 *      tick committed, a goal was set, a message arrived) sends the tick back
 *      to step 2 over a fresh read, so a tick never fires on a stale record,
 *      never runs with a tick number another tick already used, and never
 *      overtakes input or a goal that arrived before its claim;
 *      a claimed tick's `tick.started` event is added and the transcript read
 *      in the same step;
 *   5. run the turn against that transcript plus the wakeup text;
 *   6. commit once per occurrence: transcript, event stream, the schedule's
 *      new state and the release of the in-flight mark and of the session's
 *      turn lock in one atomic step (`SessionStore.commitTurn`);
 *   7. apply the outcome: a finished or paused schedule loses its job
 *      scheduler; a self-paced loop gets its next tick; replies with a
 *      messaging route are queued for the gateway.
 *
 * Failure policy: a turn that fails (model error, command error, timeout)
 * still completes the tick — it is recorded as failed, counts against the
 * budget, is told to the route, and the next occurrence is the retry; a loop
 * is never left "wakeup running". After `loops.max_consecutive_failures`
 * failed ticks in a row the loop pauses with a notice (`applyTick`). A turn aborted by a drain is put back for another worker
 * and, not being committed, runs once there; a tick a draining worker receives
 * before its turn started is put back at once.
 */
import type { Job } from 'bullmq';
import { decideFire, applyTick, tickFailureNotice, type LoopRecord, type TickOutcome, type UntilVerdict } from '../scheduler/loop-state.ts';
import type { InflightMark, TickJobData } from '../scheduler/loop-store.ts';
import { buildWakeupInput } from '../scheduler/wakeup-input.ts';
import { pendingInput } from '../scheduler/inbox.ts';
import { goalHoldsSession } from '../scheduler/goal-state.ts';
import { TurnError } from '../scheduler/errors/turn-error.ts';
import { deferJob } from '../scheduler/defer-job.ts';
import { sleepUntil } from './sleep-until.ts';
import { deliverToRoute } from './delivery.ts';
import type { HeldLock } from './session-lock.ts';
import { stepMessages, turnMessages } from './transcript-messages.ts';
import { sessionEventSink } from './turn-events.ts';
import type { ChatMessage } from './turn-runners/turn-runner.ts';
import type { TranscriptMessage } from '../scheduler/session-store.ts';
import { judgeUntil } from './until-judge.ts';
import type { WorkerDeps } from './worker-deps.ts';

/** What a tick job returns (kept in BullMQ for inspection). */
export type TickResult =
  | { status: 'skipped'; reason: string }
  | { status: 'committed'; occurrenceId: string; eventId: string; outcome: TickOutcome['kind']; failed: boolean }
  | { status: 'duplicate'; occurrenceId: string };

/** Gate and claim rounds before a tick whose record keeps changing is deferred. */
const MAX_CLAIM_ROUNDS = 5;

/** What the gate says about an occurrence, over one read of the record. */
type GateResult =
  | { action: 'fire'; loop: LoopRecord; goalVersion: number | null; pendingCount: number }
  | { action: 'skip'; reason: string }
  | { action: 'defer'; reason: string; delayMs: number; metricReason: string };

/**
 * Process one tick job of a loop or heartbeat.
 * @throws DelayedError when the tick was deferred (busy session, pending input, drain)
 */
export async function processScheduleTick(
  job: Job<TickJobData>,
  token: string | undefined,
  signal: AbortSignal | undefined,
  deps: WorkerDeps,
): Promise<TickResult> {
  const { sessionId, kind, loopId } = job.data;
  const { dueAt, occurrenceId } = deps.loops.occurrenceOf(job);
  const log = deps.log.child({ sessionId, kind, loopId, occurrenceId });

  await sleepUntil(dueAt, signal);
  if (deps.turns.draining) {
    // Drain policy (as for `/v1` runs): a paused worker still gets the job of a fetch in flight when
    // it paused; a tick not started yet goes back to the queue at once for another worker, instead
    // of starting a turn the drain deadline would cut.
    deps.metrics?.ticksDeferred.inc({ reason: 'drain' });
    return await deferJob(job, token, 0);
  }
  let held: HeldLock | null = null;
  try {
    let claimed: { loop: LoopRecord; mark: InflightMark; transcript: TranscriptMessage[] } | undefined;
    for (let round = 0; round < MAX_CLAIM_ROUNDS && !claimed; round++) {
      const gated = await gate(deps, job, { dueAt, occurrenceId });
      if (gated.action === 'skip') {
        log.debug({ reason: gated.reason }, 'tick skipped');
        return { status: 'skipped', reason: gated.reason };
      }
      if (gated.action === 'defer') {
        log.debug({ reason: gated.reason }, 'tick deferred');
        deps.metrics?.ticksDeferred.inc({ reason: gated.metricReason });
        return await deferJob(job, token, gated.delayMs);
      }
      const { lock_duration_ms: lockMs, max_stalled_count: stalls } = deps.config.worker;
      const mark: InflightMark = {
        occurrenceId, jobId: job.id!, startedAt: Date.now(), tick: gated.loop.ticksUsed + 1, workerId: deps.workerId,
      };
      // Steps 3 and 4 in one script: the session lock, the claim, the mark, `tick.started` and the transcript.
      const claim = await deps.loops.claimTick(sessionId, kind, {
        expectedVersion: gated.loop.version, goalVersion: gated.goalVersion, pendingCount: gated.pendingCount,
        mark, ttlMs: lockMs * (stalls + 2) + 60_000,
        lock: { holder: job.id!, ttlMs: deps.lock.ttlMs },
        started: {
          kind, tick: mark.tick, occurrenceId, dueAt, startedAt: mark.startedAt, latenessMs: mark.startedAt - dueAt,
          worker: deps.workerId, pid: process.pid,
        },
      });
      if (claim.status === 'busy') {
        log.debug('session busy; tick deferred');
        deps.metrics?.ticksDeferred.inc({ reason: 'session-busy' });
        return await deferJob(job, token, deps.config.worker.defer_ms);
      }
      held ??= deps.lock.adopt(sessionId, job.id!);
      if (claim.status === 'ok') claimed = { loop: gated.loop, mark, transcript: claim.transcript };
      else if (claim.status === 'inflight' && (await earlierTickInFlight(deps, job, claim.mark))) {
        log.debug({ inflight: claim.mark.occurrenceId }, 'an earlier tick of this schedule is still in flight; deferred');
        deps.metrics?.ticksDeferred.inc({ reason: 'earlier-tick-in-flight' });
        return await deferJob(job, token, deps.config.worker.defer_ms);
      }
      // `changed` (or a stale mark just cleared): decide again over a fresh read.
    }
    if (!claimed) {
      log.debug('the schedule kept changing while the tick was claimed; deferred');
      deps.metrics?.ticksDeferred.inc({ reason: 'schedule-changing' });
      return await deferJob(job, token, deps.config.worker.defer_ms);
    }
    const { loop, mark, transcript } = claimed;
    const lock = held!;
    return await deps.turns.run(job.id!, 'scheduled', async (turnSignal, turn) => {
      turn.sessionId = sessionId; // a `/stop` in this session aborts the turn
      const { startedAt, tick: tickNumber } = mark;
      const latenessMs = startedAt - dueAt;
      log.debug({ tick: tickNumber, latenessMs }, `${kind} tick started`);
      deps.metrics?.tickLateness.observe({ kind }, Math.max(0, latenessMs) / 1000);
      const input = buildWakeupInput(loop, tickNumber);
      let reply = '';
      let steps: ChatMessage[] = [];
      let failure: TurnError | undefined;
      try {
        ({ reply, steps } = await deps.runners.forSpec(loop.runner).run({
          sessionId,
          messages: turnMessages(transcript, input),
          signal: turnSignal,
          env: { HERMES_TICK: String(tickNumber), HERMES_SCHEDULE_KIND: kind },
          surface: loop.origin.surface,
          onEvent: sessionEventSink(deps, sessionId, { kind, tick: tickNumber, occurrenceId }),
        }));
      } catch (err) {
        if (turn.abortedByDrain) {
          log.warn('tick aborted by drain; handed back for another worker');
          deps.metrics?.turnFinished(kind, 'aborted', (Date.now() - startedAt) / 1000);
          deps.metrics?.ticksDeferred.inc({ reason: 'drain' });
          return await deferJob(job, token, 0);
        }
        if (turn.lockLost) throw err; // another worker has the job now: commit nothing here
        failure = turn.stoppedByUser
          ? new TurnError('Stopped by /stop.', { kind: 'aborted', sessionId, cause: err })
          : err instanceof TurnError ? err : new TurnError((err as Error).message, { kind: 'model', sessionId, cause: err });
        log.warn({ err: failure.message, failureKind: failure.kind }, `${kind} tick failed`);
      }
      const until = !failure && loop.until ? await judgeUntil(deps, loop, reply, turnSignal) : undefined;
      const finishedAt = Date.now();
      deps.metrics?.turnFinished(kind, failure ? 'failed' : 'ok', (finishedAt - startedAt) / 1000);
      const committed = await commitTick(deps, loop, {
        sessionId, kind, loopId, occurrenceId, dueAt, startedAt, finishedAt, tickNumber, input, reply, steps, failure, until,
        runner: loop.runner.kind, lockHolder: lock.holder,
      });
      if (committed.status === 'duplicate') {
        await deps.loops.clearInflight(sessionId, kind, occurrenceId);
        return { status: 'duplicate', occurrenceId };
      }
      // The commit freed the session lock (the finally's release is a no-op). One round trip: deliver, apply the outcome.
      lock.releasedElsewhere();
      await Promise.all([
        !failure && committed.loop ? deliverToRoute(deps, { sessionId, origin: committed.loop.origin, text: reply, occurrenceId }) : undefined,
        // A failed tick is told to its route; one that paused the loop is told by the pause notice.
        failure && committed.loop && committed.outcome.kind === 'continue'
          ? deliverToRoute(deps, {
            sessionId, origin: committed.loop.origin, occurrenceId: `${occurrenceId}:failed`,
            text: tickFailureNotice(committed.loop, tickNumber, failure.message, deps.config.loops.max_consecutive_failures),
          })
          : undefined,
        applyOutcome(deps, committed.loop, committed.outcome),
      ]);
      log.info({ tick: tickNumber, outcome: committed.outcome.kind, ms: finishedAt - startedAt }, `${kind} tick committed`);
      return { status: 'committed', occurrenceId, eventId: committed.eventId, outcome: committed.outcome.kind, failed: Boolean(failure) };
    }, signal);
  } finally {
    await held?.release();
  }
}

/**
 * Step 2 of a tick: read what the fire decision needs (one round trip) and
 * decide fire, skip or defer. An occurrence that was applied already (a retry
 * after the commit) finishes what the dead worker left undone and is skipped.
 */
async function gate(deps: WorkerDeps, job: Job<TickJobData>, tick: { dueAt: number; occurrenceId: string }): Promise<GateResult> {
  const { sessionId, kind, loopId } = job.data;
  const [loop, pendingCount, goal] = await Promise.all([
    deps.loops.get(sessionId, kind),
    deps.redis.zcard(deps.keys.pendingInput(sessionId)),
    deps.goals.get(sessionId),
  ]);
  const decision = decideFire(loop, { loopId, dueAt: tick.dueAt, occurrenceId: tick.occurrenceId });
  if (!decision.fire) {
    if (decision.reason === 'already-applied') {
      await deps.loops.clearInflight(sessionId, kind, tick.occurrenceId);
      if (loop?.mode === 'self-paced' && loop.status === 'active') await armSelfPaced(deps, loop);
    }
    return { action: 'skip', reason: decision.reason };
  }
  if (pendingCount > 0 && (await pendingInput(deps.redis, deps.keys, sessionId)).length > 0) {
    return { action: 'defer', reason: 'user input pending', delayMs: deps.config.worker.defer_ms, metricReason: 'input-pending' };
  }
  if (goalHoldsSession(goal)) {
    return { action: 'defer', reason: 'an active goal owns the session', delayMs: Math.max(1000, deps.config.worker.defer_ms), metricReason: 'goal-active' };
  }
  return { action: 'fire', loop: loop!, goalVersion: goal?.version ?? null, pendingCount };
}

interface TickCommitInput {
  sessionId: string;
  kind: TickJobData['kind'];
  loopId: string;
  occurrenceId: string;
  dueAt: number;
  startedAt: number;
  finishedAt: number;
  tickNumber: number;
  input: string;
  reply: string;
  /** Tool calls and results of the turn, kept in the transcript between input and reply. */
  steps: ChatMessage[];
  failure: TurnError | undefined;
  until: UntilVerdict | undefined;
  /** `agent` or `command`: shown to clients. */
  runner: 'agent' | 'command';
  /** The session turn lock's holder (the job id); the commit releases the lock in the same step. */
  lockHolder: string;
}

/**
 * Commit the tick with the schedule's new state computed from its latest
 * version (a pause that arrived during the turn wins). Retried on a concurrent write.
 */
async function commitTick(
  deps: WorkerDeps,
  readAtStart: LoopRecord,
  t: TickCommitInput,
): Promise<
  | { status: 'committed'; eventId: string; loop: LoopRecord | null; outcome: TickOutcome }
  | { status: 'duplicate' }
> {
  const source = t.kind === 'heartbeat' ? 'heartbeat' : 'tick';
  const messages = [
    { role: 'user' as const, content: t.input, at: t.startedAt, source },
    ...(t.failure ? [] : [...stepMessages(t.steps, t.finishedAt, source), { role: 'assistant' as const, content: t.reply, at: t.finishedAt, source }]),
  ];
  const event = {
    type: t.failure ? 'tick.failed' : 'reply',
    data: {
      source, kind: t.kind, runner: t.runner, tick: t.tickNumber, occurrenceId: t.occurrenceId,
      text: t.failure ? '' : t.reply, error: t.failure?.message, dueAt: t.dueAt, startedAt: t.startedAt,
      finishedAt: t.finishedAt, latenessMs: t.startedAt - t.dueAt, worker: deps.workerId, pid: process.pid,
    },
  };
  for (let attempt = 0; attempt < 10; attempt++) {
    // First try over the record read at the start; re-read only after a conflict.
    const fresh = attempt === 0 ? readAtStart : await deps.loops.get(t.sessionId, t.kind);
    const inflightKey = deps.keys.scheduleInflight(t.sessionId, t.kind);
    const turnLock = { key: deps.keys.turnLock(t.sessionId), holder: t.lockHolder };
    if (fresh && fresh.loopId === t.loopId && fresh.lastOccurrenceId === t.occurrenceId) return { status: 'duplicate' };
    if (!fresh || fresh.loopId !== t.loopId) {
      const res = await deps.sessions.commitTurn(t.sessionId, { occurrenceId: t.occurrenceId, messages, event, inflightKey, turnLock });
      if (res.status === 'conflict') continue;
      return res.status === 'duplicate' ? { status: 'duplicate' } : { status: 'committed', eventId: res.eventId, loop: null, outcome: { kind: 'continue' } };
    }
    const { loop: next, outcome } = applyTick(fresh, {
      loopId: t.loopId, dueAt: t.dueAt, occurrenceId: t.occurrenceId, startedAt: t.startedAt, finishedAt: t.finishedAt,
      reply: t.reply, until: t.until, failure: t.failure?.message, maxConsecutiveFailures: deps.config.loops.max_consecutive_failures,
      pacing: { floorSeconds: deps.config.loops.self_paced_floor_seconds, ceilingSeconds: deps.config.loops.self_paced_ceiling_seconds },
    });
    const stored = { ...next, version: fresh.version + 1 };
    const res = await deps.sessions.commitTurn(t.sessionId, {
      occurrenceId: t.occurrenceId,
      messages,
      event: { ...event, data: { ...event.data, outcome: outcome.kind, reason: 'reason' in outcome ? outcome.reason : undefined } },
      record: { key: deps.keys.schedule(t.sessionId, t.kind), expectedVersion: fresh.version, json: JSON.stringify(stored) },
      inflightKey,
      turnLock,
    });
    if (res.status === 'conflict') continue;
    if (res.status === 'duplicate') return { status: 'duplicate' };
    return { status: 'committed', eventId: res.eventId, loop: stored, outcome };
  }
  throw new Error(`could not commit tick ${t.occurrenceId}: the schedule kept changing`);
}

/** After the commit: stop the scheduler of a finished/paused schedule, chain a self-paced one, tell the user. */
async function applyOutcome(deps: WorkerDeps, loop: LoopRecord | null, outcome: TickOutcome): Promise<void> {
  if (!loop) return;
  if (outcome.kind === 'continue') {
    if (loop.mode === 'self-paced' && loop.status === 'active') await armSelfPaced(deps, loop);
    return;
  }
  await deps.loops.removeScheduler(loop.sessionId, loop.kind);
  const verb = outcome.kind === 'finished' ? 'finished' : 'paused';
  const text = `${loop.kind === 'loop' ? 'Loop' : 'Heartbeat'} ${verb}: ${outcome.reason}.`;
  await deps.sessions.appendEvent(loop.sessionId, 'notice', { text, kind: loop.kind, status: loop.status });
  await deliverToRoute(deps, { sessionId: loop.sessionId, origin: loop.origin, text, occurrenceId: `${loop.lastOccurrenceId}:notice` });
}

/**
 * True while another occurrence of this schedule has started its turn and not
 * committed — e.g. its worker died and BullMQ will hand it to another worker.
 * A mark whose job is gone, finished or failed for good is stale and cleared.
 */
async function earlierTickInFlight(deps: WorkerDeps, job: Job<TickJobData>, mark: InflightMark): Promise<boolean> {
  const { sessionId, kind } = job.data;
  const other = await deps.queues.forSession(sessionId).ticks.getJob(mark.jobId);
  const state = other ? await other.getState() : 'unknown';
  const alive = state === 'active' || state === 'waiting' || state === 'delayed' || state === 'prioritized';
  if (alive && !(await deps.sessions.isCommitted(sessionId, mark.occurrenceId))) return true;
  await deps.loops.clearInflight(sessionId, kind, mark.occurrenceId);
  return false;
}

/** Queue the self-paced loop's one next tick, due at `loop.nextDueAt` (idempotent: the job id is derived from it). */
async function armSelfPaced(deps: WorkerDeps, loop: LoopRecord): Promise<void> {
  if (loop.nextDueAt !== null) await deps.loops.arm(loop, loop.nextDueAt);
}
