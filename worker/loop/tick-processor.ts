/**
 * A loop or heartbeat tick: its plan in the occurrence pipeline
 * (`occurrence/pipeline.ts`), which holds the job until due, hands it back on
 * a drain, runs the rounds of gate and claim, tracks the turn, commits once and
 * delivers after the commit. What is the tick's own:
 *
 *   - `gate`: one read of the record, the goal and the pending input — made
 *     when a held tick is fetched (`readAhead`), else at the due time — and
 *     `decideGate` (`tick-gate.ts`: coalescing, user input first, goal first);
 *     an occurrence applied already finishes what a dead worker left undone;
 *   - `claim`: the claim script (`TickClaim.claimTick`; the rule is told in
 *     `claim-tick-8.lua`) and `decideClaim` over its answer (session lock,
 *     in-flight order, a changed record: `again`) — for a held tick, made
 *     `worker.claim_lead_ms` before the due time (`claim-ahead.ts`) and taken here;
 *   - `runTurn`: the turn against the claimed transcript (an agent turn's; a
 *     command turn runs on its new input alone) plus the wakeup text, its
 *     `--watch` check first and `--until` judged on its reply;
 *   - `commit`: transcript, event stream, the schedule's new state
 *     (`applyTick`) and the release of the in-flight mark and of the session's
 *     turn lock in one atomic step (`SessionStore.commitTurn`);
 *   - `deliver` the reply (or a failed tick's notice) to the route, and
 *     `applyOutcome`: a finished or paused schedule loses its job scheduler, a
 *     failed fixed loop backs off, a self-paced loop gets its next tick.
 * The tick costs three round trips on the product's connection: the gate read
 * (before the due time for a held tick), the claim script, the commit script
 * (`test/tick-round-trips.test.ts`).
 *
 * Failure policy: a turn that fails (model error, command error, timeout)
 * still completes the tick — it is recorded as failed, counts against the
 * budget, is told to the route, and the next occurrence is the retry; a loop
 * is never left "wakeup running". After `loops.max_consecutive_failures`
 * failed ticks in a row the loop pauses with a notice (`applyTick`).
 */
import { encodeTurnAbort } from '../../scheduler/session/turn-abort.ts';
import type { LoopOverlap } from '../../scheduler/loop/loop-overlap.ts';
import type { Job } from 'bullmq';
import {
  applyTick,
  loopTargets,
  tickFailureNotice,
  type FailurePolicy,
  type LoopRecord,
  type TickOutcome,
  type UntilVerdict,
} from '../../scheduler/loop/loop-state.ts';
import { failureRule } from '../../scheduler/schedule-policy/schedule-policy.ts';
import { NO_SPEND, sumSpend, type ModelSpend, type TurnBudgetOverrun } from '../../scheduler/model-spend.ts';
import { isSilentReply } from '../../scheduler/economy/silent-reply.ts';
import { notifyDeliversReply, notifyKeepsQuiet, notifySendsNotices } from '../../scheduler/economy/notify.ts';
import { fitSessionContext, type FittedContext } from '../context/session-context.ts';
import { keepWatchBase, runWatch, type WatchBase } from '../occurrence/watch-check.ts';
import type { InflightMark, TickJobData } from '../../scheduler/loop/loop-store.ts';
import { encodeLoopRecord } from '../../scheduler/loop/loop-record-codec.ts';
import { buildWakeupInput } from '../../scheduler/loop/wakeup-input.ts';
import { pendingInput } from '../../scheduler/session/inbox.ts';
import { TurnError } from '../../scheduler/errors/turn-error.ts';
import { CONFLICT } from '../../scheduler/store/optimistic-retry.ts';
import { deliverToTargets, type TargetDelivery } from '../runtime/target-delivery.ts';
import { formatDeliveryTarget, targetOfRoute } from '../../scheduler/delivery/delivery-target.ts';
import type { HeldLock } from '../runtime/session-lock.ts';
import { decideClaim, decideGate, yieldToEarlierTick } from './tick-gate.ts';
import type { TrackedTurn } from '../runtime/turn-tracker.ts';
import { contextSurfaces, holdsToolOutput, stepMessages, turnMessages } from '../context/transcript-messages.ts';
import { sessionEventSink } from '../turn-runners/turn-events.ts';
import type { ChatMessage } from '../turn-runners/turn-runner.ts';
import type { TranscriptMessage } from '../../scheduler/session/session-store.ts';
import { judgeUntil } from './until-judge.ts';
import type { WorkerDeps } from '../worker-deps.ts';
import { runOccurrence } from '../occurrence/pipeline.ts';
import { emptyTurnJournal, openTurnJournal } from '../occurrence/turn-journal.ts';
import { takeAhead, type ClaimedAhead } from './claim-ahead.ts';
import { claimTick, earlierTickWaiting, gateFacts, tickOf, type Tick, type TickGateRead } from './tick-occurrence.ts';
import type { GateRead as StoredGateRead } from '../../scheduler/loop/tick-claim.ts';
import type { ClaimAnswer, CommitAnswer, GateAnswer, Occurrence, OccurrencePlan } from '../occurrence/plan.ts';

/** What a tick job returns (kept in BullMQ for inspection). */
export type TickResult =
  | { status: 'skipped'; reason: string }
  | { status: 'committed'; occurrenceId: string; eventId: string; outcome: TickOutcome['kind']; failed: boolean }
  | { status: 'duplicate'; occurrenceId: string };

/** What the gate read: the record, the goal and the pending input (`readGate`). */
type GateRead = TickGateRead;

/** A claimed occurrence: the record it fires on, its in-flight mark and the transcript (an agent turn's). */
interface Claimed {
  loop: LoopRecord;
  mark: InflightMark;
  transcript: TranscriptMessage[];
  /** Entries of its occurrence's journal, as the claim found them (0: the journal is not read). */
  journalEntries: number;
}

/** A turn that ran to its end (failed or not), ready to be committed. */
interface TurnRun {
  tickNumber: number;
  input: string;
  reply: string;
  /** Tool calls and results of the turn, kept in the transcript between input and reply. */
  steps: ChatMessage[];
  failure: TurnError | undefined;
  failed: boolean;
  until: UntilVerdict | undefined;
  startedAt: number;
  finishedAt: number;
  /** What the tick's model calls cost: compaction, turn, judge. */
  spend: ModelSpend;
  /** The watch's output had not changed: no turn ran. */
  unchanged: boolean;
  /** Digest of the watch's output this tick (undefined: no watch ran; null: the check failed). */
  watchDigest: string | null | undefined;
  /** What the watch saw, kept after the commit as what its next change is told against (`keepWatchBase`). */
  watchBase?: WatchBase;
  /** The compacted transcript the commit writes back. */
  replace: FittedContext['replace'];
  /** A self-paced loop's agent asked for this delay to the next tick (`schedules` action `next`), seconds; clamped at the commit. */
  nextTickSeconds?: number;
  /** The turn passed `agent.max_tokens_per_turn`: its reply is kept and delivered, then the schedule pauses. */
  overBudget?: TurnBudgetOverrun;
  /** Cancelled for a newer tick (`--overlap cancel_other`): recorded failed, counted as no failure. */
  cancelled?: boolean;
}

/** What a turn had done so far (kept for a turn that throws). */
type TurnProgress = Pick<TurnRun, 'tickNumber' | 'input' | 'spend' | 'watchDigest' | 'watchBase' | 'replace' | 'startedAt'>;

/** What the commit did. */
interface Committed {
  eventId: string;
  /** The record as committed; null when the schedule was gone or replaced. */
  loop: LoopRecord | null;
  outcome: TickOutcome;
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
  return await runOccurrence(new TickPlan(deps, job), deps, job, token, signal);
}

/**
 * `--overlap cancel_other` for a tick waiting for a turn slot of its worker (`JobProcessor.waitingForSlot`):
 * the loop's running tick is cancelled now — the slot it waits for may be that tick's own. Only a tick of the
 * loop as it is now, due by now.
 */
export async function cancelOverlappedTick(job: Job<TickJobData>, deps: WorkerDeps): Promise<void> {
  const plan = new TickPlan(deps, job);
  await plan.cancelBeforeSlot();
}

/** A tick's steps in the occurrence pipeline (`occurrence/plan.ts`); one plan per job. */
class TickPlan implements OccurrencePlan<GateRead, Claimed, TurnRun, Committed, TickResult> {
  readonly occurrence: Occurrence;
  private readonly tick: Tick;
  /** The session's turn lock, adopted once from the claim script that took it. */
  private lock: HeldLock | undefined;
  /** What the turn had done when it threw: its input, watch, compaction and spend so far. */
  private progress: TurnProgress | undefined;
  /** The claim made ahead of the due time (`claim-ahead.ts`), until the claim step takes it. */
  private claimedAhead: ClaimedAhead | undefined;

  constructor(
    private readonly deps: WorkerDeps,
    private readonly job: Job<TickJobData>,
  ) {
    this.tick = tickOf(deps, job);
    const { sessionId, kind, loopId, dueAt, occurrenceId, log } = this.tick;
    this.occurrence = {
      kind,
      label: `${kind} tick`,
      occurrenceId,
      ids: { scheduleId: loopId, sessionId },
      dueAt,
      holder: job.id!,
      log,
      // Prefetch lead (`scheduler/loop/prefetch-lead.ts`): the job came early; the turn starts at the due time, never before.
      holdUntil: dueAt,
      canDefer: true,
      countsDeferrals: true,
      measuresLateness: true,
      stoppableAs: { sessionId, occurrenceId },
    };
  }

  /**
   * Decide over one read (`decideGate`). An occurrence applied already (a retry after the commit)
   * finishes what the dead worker left undone and is skipped.
   */
  async gate(): Promise<GateAnswer<GateRead, TickResult>> {
    const ahead = await takeAhead(this.job);
    if (ahead?.claimed) {
      // Claimed ahead of the due time (`claim-ahead.ts`): the claim stands, the turn starts now.
      this.claimedAhead = ahead.claimed;
      return { action: 'claim', gated: ahead.claimed.read };
    }
    const policy = { deferMs: this.deps.config.worker.defer_ms };
    const fireUnlessEarlierWaits = async (read: GateRead): Promise<GateAnswer<GateRead, TickResult>> =>
      (await earlierTickWaiting(this.deps, this.job, this.tick, read.loop)) ? yieldToEarlierTick(policy) : { action: 'claim', gated: read };
    if (ahead) {
      // Read before the due time (`readAhead`): good for a `fire` only, which the claim re-checks.
      const read = await readGate(this.deps, this.tick, ahead.read).catch(() => undefined);
      if (read && decideGate(read, policy).action === 'fire') return await fireUnlessEarlierWaits(read);
    }
    const read = await readGate(this.deps, this.tick);
    const decided = decideGate(read, policy);
    if (decided.action === 'fire') return await fireUnlessEarlierWaits(read);
    if (decided.action === 'defer') return decided;
    this.tick.log.debug({ reason: decided.reason }, 'tick skipped');
    return { action: 'done', result: { status: 'skipped', reason: decided.reason } };
  }

  /** The claim script and `decideClaim` over its answer; the script takes the session's turn lock unless `busy`. */
  async claim(read: GateRead, round: number): Promise<ClaimAnswer<Claimed, TurnRun, TickResult>> {
    const { deps, tick } = this;
    const ahead = this.claimedAhead;
    this.claimedAhead = undefined;
    if (ahead) {
      this.lock ??= ahead.lock;
      // Its turn starts now (the ticket woke at the due time): that is its start, lateness included.
      const startedAt = Date.now();
      const mark = { ...ahead.mark, startedAt };
      return {
        action: 'fire',
        claimed: { loop: ahead.read.loop!, mark, transcript: ahead.transcript, journalEntries: ahead.journalEntries },
        startedAt,
        lock: this.lock,
      };
    }
    const mark: InflightMark = {
      occurrenceId: tick.occurrenceId,
      jobId: tick.jobId,
      startedAt: Date.now(),
      tick: read.loop!.ticksUsed + 1,
      workerId: deps.workerId,
    };
    const claim = await claimTick(deps, tick, read, mark);
    if (claim.status === 'busy' && read.loop?.overlap) {
      const overlapped = await this.overlap(read.loop.overlap);
      if (overlapped) return overlapped;
    }
    if (claim.status !== 'busy') this.lock ??= deps.lock.adopt(tick.sessionId, tick.jobId);
    const lock = this.lock;
    const claimed = decideClaim(
      claim.status === 'inflight' ? { status: 'inflight', earlierAlive: await earlierTickInFlight(deps, this.job, claim.mark) } : claim,
      round,
      { deferMs: deps.config.worker.defer_ms },
    );
    if (claimed.action === 'fire' && claim.status === 'ok') {
      return {
        action: 'fire',
        claimed: { loop: read.loop!, mark, transcript: claim.transcript, journalEntries: claim.journalEntries },
        startedAt: mark.startedAt,
        lock,
      };
    }
    return claimed.action === 'defer' ? { ...claimed, lock } : { action: 'again', lock };
  }

  /** `cancelOverlappedTick`. */
  async cancelBeforeSlot(): Promise<void> {
    const { deps, tick } = this;
    if (tick.dueAt > Date.now()) return;
    const loop = await deps.loops.get(tick.sessionId, tick.kind);
    if (loop?.overlap !== 'cancel_other' || loop.loopId !== tick.loopId || loop.status !== 'active') return;
    await this.overlap('cancel_other');
  }

  /**
   * `--overlap` (`scheduler/loop/loop-overlap.ts`) when the session is busy: only when what holds its turn lock
   * is this loop's own running tick (its in-flight mark names the lock's holder) — a chat turn or another
   * schedule is waited for as always. `skip` ends this occurrence skipped; `cancel_other` sends the running
   * tick the cancel (on the channel every worker listens to, as `/stop`; again at each look while it runs)
   * and waits, like `queue`, for it to stop.
   */
  private async overlap(policy: LoopOverlap): Promise<ClaimAnswer<Claimed, TurnRun, TickResult> | undefined> {
    const { deps, tick } = this;
    const [running, holder] = await Promise.all([deps.loops.getInflight(tick.sessionId, tick.kind), deps.lock.holder(tick.sessionId)]);
    if (!running || running.occurrenceId === tick.occurrenceId || running.jobId !== holder) return undefined;
    if (policy === 'skip') {
      tick.log.info({ running: running.occurrenceId }, `${tick.kind} tick skipped: the previous one still runs (--overlap skip)`);
      return { action: 'done', result: { status: 'skipped', reason: 'overlap' } };
    }
    await deps.redis.publish(
      deps.keys.turnAbortChannel,
      encodeTurnAbort({ sessionId: tick.sessionId, occurrenceId: running.occurrenceId, by: 'overlap' }),
    );
    tick.log.info({ cancelled: running.occurrenceId }, `${tick.kind} tick cancels the running one (--overlap cancel_other)`);
    return undefined;
  }

  /** The turn against the claimed transcript plus the wakeup text; `--watch` first, `--until` judged on its reply. */
  async runTurn(claimed: Claimed, signal: AbortSignal, _turn: TrackedTurn): Promise<TurnRun> {
    const {
      deps,
      tick: { sessionId, kind, occurrenceId, dueAt, log },
    } = this;
    const {
      loop,
      transcript,
      mark: { startedAt, tick: tickNumber },
    } = claimed;
    log.debug({ tick: tickNumber, latenessMs: startedAt - dueAt }, `${kind} tick started`);
    const p: TurnProgress = {
      tickNumber,
      input: buildWakeupInput(loop, tickNumber),
      spend: NO_SPEND,
      watchDigest: undefined,
      replace: undefined,
      startedAt,
    };
    this.progress = p;
    // Stopped before it started (a `/stop` or Ctrl+C after its claim made ahead, `claim-ahead.ts`): nothing runs.
    if (signal.aborted) throw new TurnError('The turn was stopped before it started.', { kind: 'aborted', sessionId });
    const events = { kind, tick: tickNumber, occurrenceId };
    const model = loop.model ?? undefined;
    const surface = contextSurfaces(loop.origin.surface, transcript);
    // What the turn is, for tools acting for it: a tick of this loop, from its origin (a self-paced one may pace itself).
    const turnOf = { kind, origin: loop.origin, ...(loop.mode === 'self-paced' ? { selfPaced: true } : {}) };
    // `--watch` (`worker/occurrence/watch-check.ts`): an unchanged check ends the tick here, with no model call.
    if (loop.watch) {
      const watched = await runWatch(
        deps,
        { spec: loop.watch, owner: loop.loopId, lastDigest: loop.watchDigest, baseKey: deps.keys.scheduleWatchBase(sessionId, kind) },
        { sessionId, surface: loop.origin.surface, signal },
      );
      p.watchDigest = watched.digest;
      p.watchBase = watched.base;
      if (!watched.changed) {
        log.debug({ tick: tickNumber }, `${kind} tick unchanged (watch)`);
        return { ...p, reply: '', steps: [], failure: undefined, failed: false, until: undefined, finishedAt: Date.now(), unchanged: true };
      }
      p.input += watched.section;
    }
    let context = transcript;
    // The turn answers to every surface whose text is in its context (provenance, `contextSurfaces`).
    // The turn resumes from its occurrence's journal, if an earlier run of it left one (an agent turn's summary
    // included; a command turn is one step, `command-runner.ts`).
    const journal =
      claimed.journalEntries === 0
        ? emptyTurnJournal(deps, sessionId, occurrenceId)
        : await openTurnJournal(deps, sessionId, occurrenceId, log);
    if (loop.runner.kind === 'agent') {
      // The context budget before the turn (`context/session-context.ts`; docs/CONTEXT.md).
      const fitted = await fitSessionContext(deps, {
        sessionId,
        transcript,
        input: p.input,
        model,
        surface,
        signal,
        kind,
        events,
        turn: { ...turnOf },
        journal,
      });
      p.replace = fitted.replace;
      context = fitted.transcript;
      p.spend = sumSpend(p.spend, fitted.spend);
    }
    const out = await deps.runners.forSpec(loop.runner).run({
      sessionId,
      messages: turnMessages(context, p.input),
      // A `--watch` check's output in the input, or a summary standing for tool results (`holdsToolOutput`).
      toolOutput: Boolean(loop.watch) || holdsToolOutput(context),
      signal,
      env: { HERMES_TICK: String(tickNumber), HERMES_SCHEDULE_KIND: kind },
      surface,
      onEvent: sessionEventSink(deps, sessionId, events),
      model,
      ...turnOf,
      journal,
    });
    let spend = sumSpend(p.spend, out.spend ?? NO_SPEND);
    let until: UntilVerdict | undefined;
    // Past `agent.max_tokens_per_turn` the schedule pauses after this tick: no judge spends more.
    if (loop.until && !out.overBudget) {
      const judged = await judgeUntil(deps, loop, out.reply, signal, surface);
      until = judged.verdict;
      spend = sumSpend(spend, judged.spend);
    }
    return {
      ...p,
      reply: out.reply,
      steps: out.steps,
      failure: undefined,
      failed: false,
      until,
      finishedAt: Date.now(),
      spend,
      unchanged: false,
      nextTickSeconds: out.nextTickSeconds,
      ...(out.overBudget ? { overBudget: out.overBudget } : {}),
    };
  }

  /** A failed tick: committed with its input and no reply, what it spent counted. */
  failedTurn(_claimed: Claimed, f: { error: TurnError; spend: ModelSpend; turn: TrackedTurn }): TurnRun {
    const p = this.progress!;
    return {
      ...p,
      ...(f.turn.stoppedBy === 'overlap' ? { cancelled: true } : {}),
      reply: '',
      steps: [],
      failure: f.error,
      failed: true,
      until: undefined,
      finishedAt: Date.now(),
      spend: sumSpend(p.spend, f.spend),
      unchanged: false,
    };
  }

  /**
   * One commit attempt, with the schedule's new state computed from its latest version (a pause
   * that arrived during the turn wins); the first over the record read at the claim. Releases the
   * in-flight mark and the session's turn lock in the same step.
   */
  async commit(claimed: Claimed, t: TurnRun, attempt: number): Promise<CommitAnswer<Committed, TickResult>> {
    const { deps, tick } = this;
    const { sessionId, kind, loopId, occurrenceId } = tick;
    const readAtStart = claimed.loop;
    const fresh = attempt === 0 ? readAtStart : await deps.loops.get(sessionId, kind);
    if (fresh && fresh.loopId === loopId && fresh.lastOccurrenceId === occurrenceId) return await this.duplicate();
    const { messages, event } = commitPayload(deps, tick, readAtStart, t);
    const inflightKey = deps.keys.scheduleInflight(sessionId, kind);
    const turnLock = { key: deps.keys.turnLock(sessionId), holder: tick.jobId };
    const replaceTranscript = t.replace;
    // The turn's journal goes with the commit (docs/RELIABILITY.md, "A turn resumes from its journal").
    const journalKey = deps.journals.key(sessionId, occurrenceId);
    if (!fresh || fresh.loopId !== loopId) {
      const res = await deps.sessions.commitTurn(sessionId, {
        occurrenceId,
        messages,
        event,
        inflightKey,
        turnLock,
        replaceTranscript,
        journalKey,
      });
      if (res.status === 'conflict') return CONFLICT;
      if (res.status === 'duplicate') return await this.duplicate();
      return { action: 'committed', committed: { eventId: res.eventId, loop: null, outcome: { kind: 'continue' } }, lockReleased: true };
    }
    const { loop: next, outcome } = applyTick(fresh, {
      loopId,
      dueAt: tick.dueAt,
      occurrenceId,
      startedAt: t.startedAt,
      finishedAt: t.finishedAt,
      reply: t.reply,
      until: t.until,
      failure: t.failure?.message,
      ...(t.cancelled || t.failure?.kind === 'in-doubt' ? { noOutcome: true } : {}),
      maxConsecutiveFailures: deps.config.loops.max_consecutive_failures,
      spend: t.spend,
      unchanged: t.unchanged,
      watchDigest: t.watchDigest,
      overTurnBudget: t.overBudget ?? (t.failure?.kind === 'budget' ? t.failure.overrun : undefined),
      failurePolicy: failurePolicy(deps),
      pacing: {
        floorSeconds: deps.config.loops.self_paced_floor_seconds,
        ceilingSeconds: deps.config.loops.self_paced_ceiling_seconds,
        // The agent's own pacing (`schedules` action `next`), clamped in `applyTick`.
        ...(t.nextTickSeconds !== undefined ? { requestedSeconds: t.nextTickSeconds } : {}),
      },
    });
    const stored = { ...next, version: fresh.version + 1 };
    const res = await deps.sessions.commitTurn(sessionId, {
      occurrenceId,
      messages,
      event: { ...event, data: { ...event.data, outcome: outcome.kind, reason: 'reason' in outcome ? outcome.reason : undefined } },
      record: { key: deps.keys.schedule(sessionId, kind), expectedVersion: fresh.version, json: encodeLoopRecord(stored) },
      inflightKey,
      turnLock,
      replaceTranscript,
      journalKey,
    });
    if (res.status === 'conflict') return CONFLICT;
    if (res.status === 'duplicate') return await this.duplicate();
    // The digest is kept (`applyTick`): so is what the watch saw, for its next change.
    if (t.watchBase && !t.failure && stored.status !== 'finished')
      await keepWatchBase(deps, deps.keys.scheduleWatchBase(sessionId, kind), t.watchBase);
    return { action: 'committed', committed: { eventId: res.eventId, loop: stored, outcome }, lockReleased: true };
  }

  commitExhausted(): Error {
    return new Error(`could not commit tick ${this.tick.occurrenceId}: the schedule kept changing`);
  }

  /**
   * The reply goes to the schedule's targets (`loopTargets`: `--deliver`, else its route); a failed tick
   * is told to them as a notice, unless it paused the loop (the pause notice of `applyOutcome` tells
   * that). Nothing to deliver when the schedule is gone.
   */
  async deliver(_claimed: Claimed, ran: TurnRun, { loop, outcome }: Committed): Promise<void> {
    const {
      deps,
      tick: { occurrenceId },
    } = this;
    if (!loop || ran.unchanged) return;
    if (!ran.failure) {
      // `--notify` (`notifyDeliversReply`): a reply held back stays in the transcript and the stream only.
      if (notifyDeliversReply(loop.notify, { quiet: isSilentReply(ran.reply), final: outcome.kind === 'finished' })) {
        await deliverToTargets(deps, loopTargets(loop), delivery(loop, 'reply', ran.reply, occurrenceId, ran.tickNumber));
      }
    } else if (outcome.kind === 'continue' && !ran.cancelled && notifySendsNotices(loop.notify)) {
      const notice = tickFailureNotice(
        loop,
        ran.tickNumber,
        ran.failure.message,
        deps.config.loops.max_consecutive_failures,
        failurePolicy(deps),
      );
      await deliverToTargets(deps, loopTargets(loop), delivery(loop, 'failure', notice, `${occurrenceId}:failed`, ran.tickNumber));
    }
  }

  /** Stop the scheduler of a finished/paused schedule and tell the user, back a failed fixed loop off, chain a self-paced one. */
  async applyOutcome(_claimed: Claimed, { loop, outcome }: Committed): Promise<void> {
    const { deps } = this;
    if (!loop) return;
    if (outcome.kind === 'continue') {
      if (loop.mode === 'self-paced' && loop.status === 'active') await armSelfPaced(deps, loop);
      // A failed tick of a fixed loop backs off: its job scheduler starts again at the next try (`nextDueAt`).
      else if (loop.status === 'active' && loop.nextDueAt !== null) await deps.loops.arm(loop, loop.nextDueAt);
      return;
    }
    await deps.loops.removeScheduler(loop.sessionId, loop.kind);
    if (outcome.kind === 'finished' && loop.watch) await deps.loops.forgetWatch(loop.sessionId, loop.kind);
    const verb = outcome.kind === 'finished' ? 'finished' : 'paused';
    const text = `${loop.kind === 'loop' ? 'Loop' : 'Heartbeat'} ${verb}: ${outcome.reason}.`;
    await deps.sessions.appendEvent(loop.sessionId, 'notice', { text, kind: loop.kind, status: loop.status });
    if (notifySendsNotices(loop.notify))
      await deliverToTargets(deps, loopTargets(loop), delivery(loop, 'notice', text, `${loop.lastOccurrenceId}:notice`));
  }

  result(_claimed: Claimed, ran: TurnRun, committed: Committed): TickResult {
    const { kind, occurrenceId, log } = this.tick;
    log.info({ tick: ran.tickNumber, outcome: committed.outcome.kind, ms: ran.finishedAt - ran.startedAt }, `${kind} tick committed`);
    return { status: 'committed', occurrenceId, eventId: committed.eventId, outcome: committed.outcome.kind, failed: ran.failed };
  }

  /** Committed before (a retried job): only its in-flight mark is left to clear. */
  private async duplicate(): Promise<{ action: 'done'; result: TickResult }> {
    const { sessionId, kind, occurrenceId } = this.tick;
    await this.deps.loops.clearInflight(sessionId, kind, occurrenceId);
    return { action: 'done', result: { status: 'duplicate', occurrenceId } };
  }
}

/**
 * The facts of the gate: the record, the goal and the pending input in one round trip (the
 * pending input is looked at closer only when there is some and the tick could fire). An
 * occurrence applied already is finished here: its in-flight mark cleared, a self-paced loop's
 * next tick armed.
 */
async function readGate(deps: WorkerDeps, tick: Tick, ahead?: Promise<StoredGateRead>): Promise<TickGateRead> {
  const { sessionId, kind } = tick;
  // One read with every tick that wakes in the same turn of the event loop (an aligned burst).
  const stored = await (ahead ?? deps.loops.readGate(sessionId, kind));
  const read = gateFacts(tick, stored);
  const { loop, fire } = read;
  if (!fire.fire && fire.reason === 'already-applied') {
    await deps.loops.clearInflight(sessionId, kind, tick.occurrenceId);
    if (loop?.mode === 'self-paced' && loop.status === 'active') await armSelfPaced(deps, loop);
  }
  if (fire.fire && stored.pendingCount > 0) read.inputPending = (await pendingInput(deps.redis, deps.keys, sessionId)).length > 0;
  return read;
}

/** What the commit writes besides the record: the turn's messages and its event (an unchanged tick adds no message). */
function commitPayload(deps: WorkerDeps, tick: Tick, readAtStart: LoopRecord, t: TurnRun) {
  const source = tick.kind === 'heartbeat' ? 'heartbeat' : 'tick';
  // An unchanged tick adds nothing to the transcript: the next turn's context does not grow with it.
  const surface = readAtStart.origin.surface; // provenance (`contextSurfaces`)
  const messages = t.unchanged
    ? []
    : [
        { role: 'user' as const, content: t.input, at: t.startedAt, source, surface },
        ...(t.failure
          ? []
          : [
              ...stepMessages(t.steps, t.finishedAt, source, surface),
              { role: 'assistant' as const, content: t.reply, at: t.finishedAt, source, surface },
            ]),
      ];
  const event = {
    type: t.unchanged ? 'tick.unchanged' : t.failure ? 'tick.failed' : 'reply',
    data: {
      source,
      kind: tick.kind,
      runner: readAtStart.runner.kind,
      tick: t.tickNumber,
      occurrenceId: tick.occurrenceId,
      text: t.failure ? '' : t.reply,
      error: t.failure?.message,
      ...(t.cancelled ? { cancelled: true } : {}),
      dueAt: tick.dueAt,
      startedAt: t.startedAt,
      finishedAt: t.finishedAt,
      latenessMs: t.startedAt - tick.dueAt,
      worker: deps.workerId,
      pid: process.pid,
      ...(t.spend.calls > 0 ? { spend: t.spend } : {}),
      // Kept, not sent: a quiet reply, unless `--notify always` sends it.
      ...(!t.failure && !t.unchanged && notifyKeepsQuiet(readAtStart.notify, t.reply) ? { silent: true } : {}),
    },
  };
  return { messages, event };
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
  const { maxConsecutive: _count, ...policy } = failureRule(deps.config.loops);
  return policy;
}

/** Queue the self-paced loop's one next tick, due at `loop.nextDueAt` (idempotent: the job id is derived from it). */
async function armSelfPaced(deps: WorkerDeps, loop: LoopRecord): Promise<void> {
  if (loop.nextDueAt !== null) await deps.loops.arm(loop, loop.nextDueAt);
}

/** A reply or notice of `loop` for its targets (runtime/target-delivery.ts). */
function delivery(loop: LoopRecord, event: TargetDelivery['event'], text: string, occurrenceId: string, tick?: number): TargetDelivery {
  const route = loop.origin.route && targetOfRoute(loop.origin.route);
  return {
    sessionId: loop.sessionId,
    kind: loop.kind,
    loopId: loop.loopId,
    event,
    text,
    occurrenceId,
    ...(tick !== undefined ? { tick } : {}),
    ...(route ? { routeTarget: formatDeliveryTarget(route) } : {}),
  };
}
