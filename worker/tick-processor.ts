/**
 * A loop or heartbeat tick, end to end — the story of one occurrence, one
 * function per step (`processScheduleTick` reads as this list):
 *
 *   1. wait for the exact due time: the job arrives `worker.prefetch_lead_ms`
 *      early (prefetch lead, `scheduler/loop/prefetch-lead.ts`; docs/BENCHMARKS.md);
 *   2. `gate`: fire, defer (not dropped) or skip, over one read of the record,
 *      the goal and the pending input, then the claim script. The policies —
 *      drain, coalescing, user input first, goal first, session lock, in-flight
 *      order — are pure decisions in `tick-gate.ts` (`decideGate`,
 *      `decideClaim`); docs/RELIABILITY.md, "Ticks fire on the record as it is
 *      at claim time". The claim (`LoopStore.claimTick`, one Lua script) takes
 *      the session's turn lock, holds only if the record, the goal and the
 *      pending input are as read and no other occurrence is in flight, marks
 *      this one in flight, adds `tick.started` and reads the transcript; a
 *      change in between sends the tick back over a fresh read, so a tick never
 *      fires on a stale record, never reuses a tick number and never overtakes
 *      input or a goal that arrived before its claim;
 *   3. `runTurn`: the turn against that transcript plus the wakeup text; how a
 *      turn that threw ends (drain hand-back, lock loss, failed tick) is
 *      `decideTurnEnding` (`tick-gate.ts`);
 *   4. `commit`: once per occurrence, transcript, event stream, the schedule's
 *      new state and the release of the in-flight mark and of the session's
 *      turn lock in one atomic step (`SessionStore.commitTurn`);
 *   5. `deliver` the reply (or a failed tick's notice) to the route, and
 *      `applyOutcome`: a finished or paused schedule loses its job scheduler, a
 *      self-paced loop gets its next tick.
 * The tick costs three round trips on the product's connection: the gate read,
 * the claim script, the commit script (`test/tick-round-trips.test.ts`).
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
import {
  decideFire, applyTick, shouldDeliverReply, isSilentReply, tickFailureNotice, type FailurePolicy, type LoopRecord, type TickOutcome, type UntilVerdict,
} from '../scheduler/loop/loop-state.ts';
import { NO_SPEND, sumSpend, type ModelSpend } from '../scheduler/model-spend.ts';
import { fitSessionContext, type FittedContext } from './context/session-context.ts';
import { runWatch, watchSection } from './watch-check.ts';
import type { InflightMark, TickJobData } from '../scheduler/loop/loop-store.ts';
import { encodeLoopRecord } from '../scheduler/loop/loop-record-codec.ts';
import { buildWakeupInput } from '../scheduler/loop/wakeup-input.ts';
import { pendingInput } from '../scheduler/session/inbox.ts';
import { goalHoldsSession } from '../scheduler/goal/goal-state.ts';
import { TurnError } from '../scheduler/errors/turn-error.ts';
import { deferJob } from '../scheduler/store/defer-job.ts';
import { CONFLICT, retryOnConflict } from '../scheduler/store/optimistic-retry.ts';
import { sleepUntil } from './sleep-until.ts';
import { deliverToRoute } from './delivery.ts';
import type { HeldLock } from './session-lock.ts';
import { decideClaim, decideGate, decideTurnEnding, DRAIN_HAND_BACK, type TickDefer } from './tick-gate.ts';
import type { TrackedTurn } from './turn-tracker.ts';
import { contextSurfaces, stepMessages, turnMessages } from './transcript-messages.ts';
import { sessionEventSink } from './turn-events.ts';
import type { ChatMessage } from './turn-runners/turn-runner.ts';
import type { TranscriptMessage } from '../scheduler/session/session-store.ts';
import { judgeUntil } from './until-judge.ts';
import type { WorkerDeps } from './worker-deps.ts';

/** What a tick job returns (kept in BullMQ for inspection). */
export type TickResult =
  | { status: 'skipped'; reason: string }
  | { status: 'committed'; occurrenceId: string; eventId: string; outcome: TickOutcome['kind']; failed: boolean }
  | { status: 'duplicate'; occurrenceId: string };

/** The occurrence a tick job stands for. */
interface Tick {
  sessionId: string;
  kind: TickJobData['kind'];
  loopId: string;
  /** Epoch ms the occurrence is due. */
  dueAt: number;
  occurrenceId: string;
  log: WorkerDeps['log'];
}

/** A claimed occurrence: the record it fires on, its in-flight mark and the transcript, with the session's turn lock. */
interface Claimed {
  loop: LoopRecord;
  mark: InflightMark;
  transcript: TranscriptMessage[];
  lock: HeldLock;
}

/** What the gate says: fire (claimed), defer (put back for later) or skip (this occurrence never fires). */
type Gate = ({ action: 'fire' } & Claimed) | TickDefer | { action: 'skip'; reason: string };

/** A turn that ran to its end (failed or not), ready to be committed. */
interface TurnRun {
  tickNumber: number;
  input: string;
  reply: string;
  /** Tool calls and results of the turn, kept in the transcript between input and reply. */
  steps: ChatMessage[];
  failure: TurnError | undefined;
  until: UntilVerdict | undefined;
  startedAt: number;
  finishedAt: number;
  /** What the tick's model calls cost: compaction, turn, judge. */
  spend: ModelSpend;
  /** The watch's output had not changed: no turn ran. */
  unchanged: boolean;
  /** Digest of the watch's output this tick (undefined: no watch ran). */
  watchDigest: string | undefined;
  /** The compacted transcript the commit writes back. */
  replace: FittedContext['replace'];
  /** A self-paced loop's agent asked for this delay to the next tick (`schedules` action `next`), seconds; clamped at the commit. */
  nextTickSeconds?: number;
}

/**
 * Process one tick job of a loop or heartbeat.
 * @throws DelayedError when the tick was deferred (drain, busy session, pending input, an active goal, an earlier tick in flight)
 */
export async function processScheduleTick(
  job: Job<TickJobData>,
  token: string | undefined,
  signal: AbortSignal | undefined,
  deps: WorkerDeps,
): Promise<TickResult> {
  const { sessionId, kind, loopId } = job.data;
  const { dueAt, occurrenceId } = deps.loops.occurrenceOf(job);
  const tick: Tick = { sessionId, kind, loopId, dueAt, occurrenceId, log: deps.log.child({ sessionId, kind, loopId, occurrenceId }) };

  // Prefetch lead (`scheduler/loop/prefetch-lead.ts`): the job came early; the turn starts at the due time, never before.
  await sleepUntil(dueAt, signal);
  // Drain, coalescing, user input first, goal first, session lock, in-flight order: `tick-gate.ts`
  // (docs/RELIABILITY.md, "Ticks fire on the record as it is at claim time").
  const gated = await gate(deps, job, tick);
  if (gated.action === 'skip') {
    tick.log.debug({ reason: gated.reason }, 'tick skipped');
    return { status: 'skipped', reason: gated.reason };
  }
  if (gated.action === 'defer') return await defer(deps, job, token, tick, gated);
  const { lock } = gated;
  try {
    return await deps.turns.run(job.id!, 'deadline', async (turnSignal, turn) => {
      turn.sessionId = sessionId; // a `/stop` in this session aborts the turn
      turn.occurrenceId = tick.occurrenceId; // and so does Ctrl+C in `hermes chat` aimed at this tick
      // Drain hand-back and lock loss: `decideTurnEnding` (docs/RELIABILITY.md, "A dead worker's work restarts within seconds").
      const ran = await runTurn(deps, tick, gated, turnSignal, turn);
      if (ran === 'hand-back') return await defer(deps, job, token, tick, DRAIN_HAND_BACK);
      // Once per occurrence; a pause that arrived during the turn wins (docs/RELIABILITY.md, as above).
      const committed = await commit(deps, gated.loop, {
        ...tick, ...ran, runner: gated.loop.runner.kind, lockHolder: lock.holder,
      });
      if (committed.status === 'duplicate') {
        await deps.loops.clearInflight(sessionId, kind, occurrenceId);
        return { status: 'duplicate', occurrenceId };
      }
      // The commit freed the session lock (the finally's release is a no-op). One round trip: deliver, apply the outcome.
      lock.releasedElsewhere();
      await Promise.all([deliver(deps, tick, committed, ran), applyOutcome(deps, committed.loop, committed.outcome)]);
      tick.log.info({ tick: ran.tickNumber, outcome: committed.outcome.kind, ms: ran.finishedAt - ran.startedAt }, `${kind} tick committed`);
      return { status: 'committed', occurrenceId, eventId: committed.eventId, outcome: committed.outcome.kind, failed: Boolean(ran.failure) };
    }, signal);
  } finally {
    await lock.release();
  }
}

/**
 * Step 2 of a tick: fire, defer or skip. Each round reads what the decision
 * needs (one round trip), decides (`decideGate`), then claims in one script
 * and decides over its answer (`decideClaim`); `again` starts a round over a
 * fresh read. An occurrence applied already (a retry after the commit)
 * finishes what the dead worker left undone and is skipped.
 *
 * The session's turn lock, taken by the claim script whatever it answers but
 * `busy`, goes with a `fire`; on any other answer it is released here.
 */
async function gate(deps: WorkerDeps, job: Job<TickJobData>, tick: Tick): Promise<Gate> {
  // Drain (docs/RELIABILITY.md, "A cron run cut by a drain is handed back"; as for `/v1` runs): a paused worker
  // still gets the job of a fetch in flight when it paused; a tick not started yet goes back to the queue at once
  // for another worker, instead of starting a turn the drain deadline would cut.
  if (deps.turns.draining) return DRAIN_HAND_BACK;
  const { sessionId } = tick;
  const policy = { deferMs: deps.config.worker.defer_ms };
  let held: HeldLock | null = null;
  try {
    for (let round = 0; ; round++) {
      const read = await readGate(deps, tick);
      const decided = decideGate(read, policy);
      if (decided.action !== 'fire') return decided;
      const mark: InflightMark = {
        occurrenceId: tick.occurrenceId, jobId: job.id!, startedAt: Date.now(), tick: read.loop!.ticksUsed + 1, workerId: deps.workerId,
      };
      const claim = await claimTick(deps, job, tick, read, mark);
      if (claim.status !== 'busy') held ??= deps.lock.adopt(sessionId, job.id!);
      const claimed = decideClaim(
        claim.status === 'inflight' ? { status: 'inflight', earlierAlive: await earlierTickInFlight(deps, job, claim.mark) } : claim,
        round, policy,
      );
      if (claimed.action === 'defer') return claimed;
      if (claimed.action === 'fire' && claim.status === 'ok') {
        const lock = held!;
        held = null; // the caller releases it now
        return { action: 'fire', loop: read.loop!, mark, transcript: claim.transcript, lock };
      }
      // `again`: the record, the goal or the input changed (or a stale mark was cleared); decide over a fresh read.
      // (`decideClaim` defers after `MAX_CLAIM_ROUNDS` rounds.)
    }
  } finally {
    await held?.release();
  }
}

/**
 * The facts of the gate: the record, the goal and the pending input in one round trip (the
 * pending input is looked at closer only when there is some and the tick could fire). An
 * occurrence applied already is finished here: its in-flight mark cleared, a self-paced loop's
 * next tick armed.
 */
async function readGate(deps: WorkerDeps, tick: Tick) {
  const { sessionId, kind } = tick;
  // One read with every tick that wakes in the same turn of the event loop (an aligned burst).
  const { loop, pendingCount, goal } = await deps.loops.readGate(sessionId, kind);
  const fire = decideFire(loop, { loopId: tick.loopId, dueAt: tick.dueAt, occurrenceId: tick.occurrenceId });
  if (!fire.fire && fire.reason === 'already-applied') {
    await deps.loops.clearInflight(sessionId, kind, tick.occurrenceId);
    if (loop?.mode === 'self-paced' && loop.status === 'active') await armSelfPaced(deps, loop);
  }
  const inputPending = fire.fire && pendingCount > 0 && (await pendingInput(deps.redis, deps.keys, sessionId)).length > 0;
  return { loop, goal, pendingCount, fire, inputPending, goalHoldsSession: goalHoldsSession(goal) };
}

/** The claim script (`LoopStore.claimTick`): the session lock, the claim, the mark, `tick.started` and the transcript. */
async function claimTick(deps: WorkerDeps, job: Job<TickJobData>, tick: Tick, read: Awaited<ReturnType<typeof readGate>>, mark: InflightMark) {
  const { lock_duration_ms: lockMs, max_stalled_count: stalls } = deps.config.worker;
  return await deps.loops.claimTick(tick.sessionId, tick.kind, {
    expectedVersion: read.loop!.version, goalVersion: read.goal?.version ?? null, pendingCount: read.pendingCount,
    mark, ttlMs: lockMs * (stalls + 2) + 60_000,
    lock: { holder: job.id!, ttlMs: deps.lock.ttlMs },
    started: {
      kind: tick.kind, tick: mark.tick, occurrenceId: tick.occurrenceId, dueAt: tick.dueAt, startedAt: mark.startedAt,
      latenessMs: mark.startedAt - tick.dueAt, worker: deps.workerId, pid: process.pid,
    },
    // A command turn runs on its new input alone (its stdin): a long transcript is not read for it.
    readTranscript: read.loop!.runner.kind !== 'command',
  });
}

/** Put the tick back for later (counted by reason in `hermes_ticks_deferred_total`). @throws DelayedError always */
async function defer(deps: WorkerDeps, job: Job<TickJobData>, token: string | undefined, tick: Tick, d: TickDefer): Promise<never> {
  tick.log.debug({ reason: d.reason, delayMs: d.delayMs }, 'tick deferred');
  deps.metrics?.ticksDeferred.inc({ reason: d.reason });
  return await deferJob(job, token, d.delayMs);
}

/**
 * Step 3 of a tick: run the turn against the claimed transcript plus the wakeup text, and judge
 * `--until` on its reply.
 * @returns the turn to commit (failed or not), or `hand-back` when a drain cut it (`decideTurnEnding`)
 * @throws the turn's error when the job's lock was lost (another worker has the job now: nothing is committed here)
 */
async function runTurn(deps: WorkerDeps, tick: Tick, claimed: Claimed, signal: AbortSignal, turn: TrackedTurn): Promise<TurnRun | 'hand-back'> {
  const { sessionId, kind, occurrenceId, dueAt, log } = tick;
  const { loop, transcript, mark: { startedAt, tick: tickNumber } } = claimed;
  const latenessMs = startedAt - dueAt;
  log.debug({ tick: tickNumber, latenessMs }, `${kind} tick started`);
  deps.metrics?.tickLateness.observe({ kind }, Math.max(0, latenessMs) / 1000);
  let input = buildWakeupInput(loop, tickNumber);
  const events = { kind, tick: tickNumber, occurrenceId };
  const model = loop.model ?? undefined;
  let reply = '';
  let steps: ChatMessage[] = [];
  let failure: TurnError | undefined;
  let spend: ModelSpend = NO_SPEND;
  let replace: FittedContext['replace'];
  let watchDigest: string | undefined;
  let nextTickSeconds: number | undefined;
  const surface = contextSurfaces(loop.origin.surface, transcript);
  // What the turn is, for tools acting for it: a tick of this loop, from its origin (a self-paced one may pace itself).
  const turnOf = { kind, origin: loop.origin, ...(loop.mode === 'self-paced' ? { selfPaced: true } : {}) };
  try {
    // `--watch` (`watch-check.ts`): an unchanged check ends the tick here, with no model call.
    if (loop.watch) {
      const watched = await runWatch(deps, loop.watch, { sessionId, surface: loop.origin.surface, signal });
      watchDigest = watched.digest;
      if (loop.watchDigest && watched.digest === loop.watchDigest) {
        log.debug({ tick: tickNumber }, `${kind} tick unchanged (watch)`);
        return {
          tickNumber, input, reply: '', steps: [], failure: undefined, until: undefined, startedAt, finishedAt: Date.now(),
          spend: NO_SPEND, unchanged: true, watchDigest, replace: undefined,
        };
      }
      input += watchSection(loop.watch, watched, !loop.watchDigest);
    }
    let context = transcript;
    // The turn answers to every surface whose text is in its context (provenance, `contextSurfaces`).
    if (loop.runner.kind === 'agent') {
      // The context budget before the turn (`context/session-context.ts`; docs/CONTEXT.md).
      const fitted = await fitSessionContext(deps, { sessionId, transcript, input, model, surface, signal, kind, events, turn: { ...turnOf } });
      ({ replace } = fitted);
      context = fitted.transcript;
      spend = sumSpend(spend, fitted.spend);
    }
    const out = await deps.runners.forSpec(loop.runner).run({
      sessionId,
      messages: turnMessages(context, input),
      signal,
      env: { HERMES_TICK: String(tickNumber), HERMES_SCHEDULE_KIND: kind },
      surface,
      onEvent: sessionEventSink(deps, sessionId, events),
      model,
      ...turnOf,
    });
    ({ reply, steps, nextTickSeconds } = out);
    spend = sumSpend(spend, out.spend ?? NO_SPEND);
  } catch (err) {
    const ending = decideTurnEnding(turn);
    if (ending === 'hand-back') {
      log.warn('tick aborted by drain; handed back for another worker');
      deps.metrics?.turnFinished(kind, 'aborted', (Date.now() - startedAt) / 1000);
      return 'hand-back';
    }
    if (ending === 'abandon') throw err;
    spend = sumSpend(spend, (err as { spend?: ModelSpend }).spend ?? NO_SPEND);
    failure = turn.stoppedBy
      ? new TurnError(turn.stoppedBy === 'stop' ? 'Stopped by /stop.' : 'Interrupted from the chat (Ctrl+C); the loop is paused.', { kind: 'aborted', sessionId, cause: err })
      : err instanceof TurnError ? err : new TurnError((err as Error).message, { kind: 'model', sessionId, cause: err });
    log.warn({ err: failure.message, failureKind: failure.kind }, `${kind} tick failed`);
  }
  let until: UntilVerdict | undefined;
  if (!failure && loop.until) {
    const judged = await judgeUntil(deps, loop, reply, signal, surface);
    until = judged.verdict;
    spend = sumSpend(spend, judged.spend);
  }
  const finishedAt = Date.now();
  deps.metrics?.turnFinished(kind, failure ? 'failed' : 'ok', (finishedAt - startedAt) / 1000);
  return { tickNumber, input, reply, steps, failure, until, startedAt, finishedAt, spend, unchanged: false, watchDigest, replace, nextTickSeconds };
}

/**
 * Step 5 of a tick: the reply goes to the schedule's route; a failed tick is told to the route
 * as a notice, unless it paused the loop (the pause notice of `applyOutcome` tells that).
 * Nothing to deliver when the schedule is gone.
 */
async function deliver(deps: WorkerDeps, tick: Tick, committed: { loop: LoopRecord | null; outcome: TickOutcome }, ran: TurnRun): Promise<void> {
  const { loop, outcome } = committed;
  if (!loop) return;
  const { sessionId, occurrenceId } = tick;
  if (ran.unchanged) return;
  if (!ran.failure) {
    // Quiet ticks (`--notify`, `shouldDeliverReply`): a `[SILENT]` reply stays in the transcript and the stream only.
    if (shouldDeliverReply(loop.notify, ran.reply, outcome.kind === 'finished')) {
      await deliverToRoute(deps, { sessionId, origin: loop.origin, text: ran.reply, occurrenceId });
    }
  } else if (outcome.kind === 'continue') {
    await deliverToRoute(deps, {
      sessionId, origin: loop.origin, occurrenceId: `${occurrenceId}:failed`,
      text: tickFailureNotice(loop, ran.tickNumber, ran.failure.message, deps.config.loops.max_consecutive_failures, failurePolicy(deps)),
    });
  }
}

/** What the commit writes: the occurrence, the turn, and who ran it. */
type TickCommitInput = Omit<Tick, 'log'> & TurnRun & {
  /** `agent` or `command`: shown to clients. */
  runner: 'agent' | 'command';
  /** The session turn lock's holder (the job id); the commit releases the lock in the same step. */
  lockHolder: string;
};

/** What `commit` did. */
type CommitResult =
  | { status: 'committed'; eventId: string; loop: LoopRecord | null; outcome: TickOutcome }
  | { status: 'duplicate' };

/**
 * Step 4 of a tick: commit it with the schedule's new state computed from its latest
 * version (a pause that arrived during the turn wins). Retried on a concurrent write
 * (`retryOnConflict`).
 */
async function commit(deps: WorkerDeps, readAtStart: LoopRecord, t: TickCommitInput): Promise<CommitResult> {
  const source = t.kind === 'heartbeat' ? 'heartbeat' : 'tick';
  // An unchanged tick adds nothing to the transcript: the next turn's context does not grow with it.
  const surface = readAtStart.origin.surface; // provenance (`contextSurfaces`)
  const messages = t.unchanged ? [] : [
    { role: 'user' as const, content: t.input, at: t.startedAt, source, surface },
    ...(t.failure ? [] : [...stepMessages(t.steps, t.finishedAt, source, surface), { role: 'assistant' as const, content: t.reply, at: t.finishedAt, source, surface }]),
  ];
  const event = {
    type: t.unchanged ? 'tick.unchanged' : t.failure ? 'tick.failed' : 'reply',
    data: {
      source, kind: t.kind, runner: t.runner, tick: t.tickNumber, occurrenceId: t.occurrenceId,
      text: t.failure ? '' : t.reply, error: t.failure?.message, dueAt: t.dueAt, startedAt: t.startedAt,
      finishedAt: t.finishedAt, latenessMs: t.startedAt - t.dueAt, worker: deps.workerId, pid: process.pid,
      ...(t.spend.calls > 0 ? { spend: t.spend } : {}),
      ...(!t.failure && !t.unchanged && isSilentReply(t.reply) ? { silent: true } : {}),
    },
  };
  const replaceTranscript = t.replace;
  let attempt = 0;
  return await retryOnConflict<CommitResult>(async () => {
    // First try over the record read at the start; re-read only after a conflict.
    const fresh = attempt++ === 0 ? readAtStart : await deps.loops.get(t.sessionId, t.kind);
    const inflightKey = deps.keys.scheduleInflight(t.sessionId, t.kind);
    const turnLock = { key: deps.keys.turnLock(t.sessionId), holder: t.lockHolder };
    if (fresh && fresh.loopId === t.loopId && fresh.lastOccurrenceId === t.occurrenceId) return { status: 'duplicate' };
    if (!fresh || fresh.loopId !== t.loopId) {
      const res = await deps.sessions.commitTurn(t.sessionId, { occurrenceId: t.occurrenceId, messages, event, inflightKey, turnLock, replaceTranscript });
      if (res.status === 'conflict') return CONFLICT;
      return res.status === 'duplicate' ? { status: 'duplicate' } : { status: 'committed', eventId: res.eventId, loop: null, outcome: { kind: 'continue' } };
    }
    const { loop: next, outcome } = applyTick(fresh, {
      loopId: t.loopId, dueAt: t.dueAt, occurrenceId: t.occurrenceId, startedAt: t.startedAt, finishedAt: t.finishedAt,
      reply: t.reply, until: t.until, failure: t.failure?.message, maxConsecutiveFailures: deps.config.loops.max_consecutive_failures,
      spend: t.spend, unchanged: t.unchanged, watchDigest: t.watchDigest, overTurnBudget: t.failure?.kind === 'budget',
      failurePolicy: failurePolicy(deps),
      pacing: {
        floorSeconds: deps.config.loops.self_paced_floor_seconds, ceilingSeconds: deps.config.loops.self_paced_ceiling_seconds,
        // The agent's own pacing (`schedules` action `next`), clamped in `applyTick`.
        ...(t.nextTickSeconds !== undefined ? { requestedSeconds: t.nextTickSeconds } : {}),
      },
    });
    const stored = { ...next, version: fresh.version + 1 };
    const res = await deps.sessions.commitTurn(t.sessionId, {
      occurrenceId: t.occurrenceId,
      messages,
      event: { ...event, data: { ...event.data, outcome: outcome.kind, reason: 'reason' in outcome ? outcome.reason : undefined } },
      record: { key: deps.keys.schedule(t.sessionId, t.kind), expectedVersion: fresh.version, json: encodeLoopRecord(stored) },
      inflightKey,
      turnLock,
      replaceTranscript,
    });
    if (res.status === 'conflict') return CONFLICT;
    if (res.status === 'duplicate') return { status: 'duplicate' };
    return { status: 'committed', eventId: res.eventId, loop: stored, outcome };
  }, () => new Error(`could not commit tick ${t.occurrenceId}: the schedule kept changing`));
}

/** Step 5 of a tick, after the commit: stop the scheduler of a finished/paused schedule, chain a self-paced one, tell the user. */
async function applyOutcome(deps: WorkerDeps, loop: LoopRecord | null, outcome: TickOutcome): Promise<void> {
  if (!loop) return;
  if (outcome.kind === 'continue') {
    if (loop.mode === 'self-paced' && loop.status === 'active') await armSelfPaced(deps, loop);
    // A failed tick of a fixed loop backs off: its job scheduler starts again at the next try (`nextDueAt`).
    else if (loop.status === 'active' && loop.nextDueAt !== null) await deps.loops.arm(loop, loop.nextDueAt);
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

/** The back-off and pause rule of failed ticks (`loops.failure_*`). */
function failurePolicy(deps: WorkerDeps): FailurePolicy {
  const l = deps.config.loops;
  return { backoffSeconds: l.failure_backoff_seconds, backoffMaxSeconds: l.failure_backoff_max_seconds, pauseAfterSeconds: l.failure_pause_after_seconds };
}

/** Queue the self-paced loop's one next tick, due at `loop.nextDueAt` (idempotent: the job id is derived from it). */
async function armSelfPaced(deps: WorkerDeps, loop: LoopRecord): Promise<void> {
  if (loop.nextDueAt !== null) await deps.loops.arm(loop, loop.nextDueAt);
}
