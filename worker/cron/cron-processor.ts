/**
 * A cron occurrence (a `cron-tick` job of the `ticks` queue): its plan in the
 * occurrence pipeline (`occurrence/pipeline.ts`), which hands it back on a
 * drain, waits while it is early (nothing early), runs the rounds of gate and
 * claim, tracks the turn, decides how a turn that threw ends, commits once and
 * delivers after the commit. What is the cron run's own:
 *
 *   - which occurrence (`occurrenceOf`): due time from the scheduler job id
 *     (`repeat:cron:<id>:<millis>`) or the job data (one-shot, manual run, backfill);
 *     a backfilled occurrence is deferred while the one before it in its request is
 *     still to run, or holds the job's turn lock (oldest first, never overlapping);
 *   - `gate`: the job's record and the misfire decision (pure,
 *     `decideOccurrence` in scheduler/cron/misfire.ts): wait until due, drop
 *     (removed, paused, completed, edited, coalesced), run (on time, late, or
 *     as the single catch-up) or skip (beyond the grace window with
 *     `--misfire skip`); then overlap (`decideOverlap`, `cron-gate.ts`): one
 *     run per job across the fleet through the turn lock of the job's session
 *     `cron:<id>`; when busy, `skip` records a skipped run, `queue` defers,
 *     `buffer_all` waits its place in the job's buffer (bounded), `cancel_other`
 *     cancels the running run and waits for it to stop, `allow` runs anyway.
 *     docs/CRON.md, "Overlap";
 *   - `claim` the occurrence (`claim-cron-occurrence-5.lua`: still scheduled in
 *     this generation, nobody else holds it) — the point after which a pause or
 *     remove no longer stops it; a skipped occurrence is claimed too, then
 *     recorded without a turn;
 *   - `runTurn`: a fresh turn with only the job's prompt (agent, on its `--model`), or its
 *     `--script` (command turn, `cron.script_timeout_seconds`). A job with `--watch` runs its
 *     check first: an output with the digest of the last successful run ends the run `ok`
 *     and `unchanged`, with no model call (or script) and nothing delivered; otherwise the
 *     output goes into the prompt (docs/CRON.md, "Economy"). The run records what its model
 *     calls cost (`spend`, also of a failed turn). How a turn that threw ends:
 *     `decideTurnEnding` (`occurrence/turn-ending.ts`); a failed one is an `error` run, and a
 *     handed-back one is claimed again by the next worker as its next attempt;
 *   - `commit` run record + job state (the spend added to its totals, the watch's digest, a pause
 *     at a token budget: `applyRun`) + local delivery once per occurrence (Lua);
 *     `applyOutcome` (a job that left `scheduled` loses its job scheduler) and
 *     `deliver` to the other targets, recording their outcomes.
 * Exactly once (`occurrence/commit.ts`): a retried or duplicated job finds the claim or the
 * commit marker, and only finishes deliveries left pending.
 */
import type { Job } from 'bullmq';
import type { TurnError } from '../../scheduler/errors/turn-error.ts';
import { periodAt } from '../../scheduler/cron/cron-engine.ts';
import {
  applyRun,
  cronAfterOccurrenceId,
  cronOccurrenceId,
  cronSessionId,
  cronToolSurfaces,
  deliveryText,
  onRequest,
  runDeliversReply,
  withReply,
  type CronDelivery,
  type CronJob,
  type CronRun,
  type OccurrenceTrigger,
} from '../../scheduler/cron/cron-job.ts';
import { cronTickData, type CronStore, type CronTickData, type OccurrenceRef } from '../../scheduler/cron/cron-store.ts';
import { withNotice } from '../../scheduler/cron/cron-notice.ts';
import { catchUpsAfter, decideOccurrence, graceSettings, graceWindowMs, type OccurrenceDecision } from '../../scheduler/cron/misfire.ts';
import { takeCronAhead } from './cron-claim-ahead.ts';
import { schedulerJobMillis } from '../../scheduler/store/queues.ts';
import { holdWritesThisTurn } from '../../scheduler/store/redis/connection-factory.ts';
import { MAX_IN_PROCESS_WAIT_MS } from '../occurrence/due-time.ts';
import { lazyChild } from '../../scheduler/logger.ts';
import { skippedByLead } from '../../scheduler/cron/repeat-strategy.ts';
import type { WorkerDeps } from '../worker-deps.ts';
import { CONFLICT } from '../../scheduler/store/optimistic-retry.ts';
import { decideOverlap } from './cron-gate.ts';
import { bufferMember } from '../../scheduler/cron/overlap-buffer.ts';
import { encodeTurnAbort } from '../../scheduler/session/turn-abort.ts';
import type { TrackedTurn } from '../runtime/turn-tracker.ts';
import { deliverPending, resolveTargets } from './cron-delivery.ts';
import { sessionEventSink } from '../turn-runners/turn-events.ts';
import type { TurnSurfaces } from '../tools/tool.ts';
import { NO_SPEND, type ModelSpend, type TurnBudgetOverrun } from '../../scheduler/model-spend.ts';
import { keepWatchBase, runWatch, type WatchBase } from '../occurrence/watch-check.ts';
import { runOccurrence } from '../occurrence/pipeline.ts';
import { afterAllKey, parentOutputSection, type ParentRunContext } from '../../scheduler/cron/cron-after.ts';
import { handOff, handoffTargets } from './cron-handoff.ts';
import { emptyTurnJournal, openTurnJournal } from '../occurrence/turn-journal.ts';
import type { ClaimAnswer, CommitAnswer, GateAnswer, Occurrence, OccurrencePlan, RanTurn } from '../occurrence/plan.ts';

/** What happened to a tick (the job's return value, for logs and tests). */
export interface CronTickResult {
  outcome: 'ran' | 'skipped' | 'dropped' | 'duplicate';
  occurrenceId: string;
  reason?: string;
  status?: CronRun['status'];
}

/** The occurrence a cron tick job stands for. */
interface CronTick {
  jobId: string;
  generation: number;
  trigger: OccurrenceTrigger;
  /** Epoch ms the occurrence is due. */
  dueAt: number;
  /** In a backfill or a catch-up after an outage: the occurrence before it, which runs first. */
  follows: OccurrenceRef | undefined;
  /** A missed occurrence queued by `--misfire all` (`catchUpsAfter`). */
  queuedCatchUp: boolean;
  /** A run after another job's run (`--after`): that run, its output bounded. */
  parent?: ParentRunContext;
  /** A run after all its parents' runs (`--after-all`): those runs, by parent job id, their outputs bounded. */
  parents?: ParentRunContext[];
  occurrenceId: string;
  /** Holder of the claim and of the overlap lock: the BullMQ job id. */
  holder: string;
  /** Epoch ms a worker took the job. */
  pickedAt: number;
  log: WorkerDeps['log'];
}

/** What the gate decided: run the occurrence, or claim it to record it skipped (misfire, overlap). */
type CronGated = (
  | { mode: 'run'; record: CronJob; decision: Extract<OccurrenceDecision, { action: 'run' }> }
  | { mode: 'misfire-skip'; record: CronJob; decision: Extract<OccurrenceDecision, { action: 'skip' }> }
  | { mode: 'overlap-skip'; record: CronJob; reason: 'overlap' | 'buffer-full' }
) & {
  /** Its member of the job's overlap buffer (`--overlap buffer_all`), left at the claim. */
  buffered?: string;
  /** Claimed ahead of its due time (`cron-claim-ahead.ts`), as this attempt: not claimed again. */
  claimedAhead?: { attempt: number; journalEntries: number };
};

/** A claimed occurrence. */
interface CronClaimed {
  record: CronJob;
  /** The misfire decision to run it (absent: recorded as skipped, with no turn). */
  decision?: Extract<OccurrenceDecision, { action: 'run' }>;
  /** Epoch ms of its claim. */
  startedAt: number;
  /** How many times the occurrence was started, this one included (the claim counts them). */
  attempt: number;
  /** Entries of its turn journal when it was claimed (0: the turn opens an empty one, without a read). */
  journalEntries?: number;
}

/** What a run leaves for the commit besides its record (`applyRun`'s options). */
interface RunEffects {
  /** The watch the run checked and its output's digest (`null`: the check failed). */
  watch?: { spec: string; digest: string | null };
  /** What the watch saw, kept after the commit as what its next change is told against (`keepWatchBase`). */
  watchBase?: WatchBase;
  /** The turn passed `agent.max_tokens_per_turn` (its answer kept, or TurnError `budget`): the job pauses. */
  overTurnBudget?: TurnBudgetOverrun;
}

/** A run to commit: its record and what the commit applies besides. */
interface CronRan extends RanTurn {
  run: CronRun;
  effects: RunEffects;
}

/** What the commit did: the job before and after, and the run as committed (the local delivery done). */
interface CronCommitted {
  before: CronJob;
  after: CronJob;
  run: CronRun;
}

/** What the job's turn gave (`jobTurn`). */
interface JobTurn {
  reply: string;
  spend: ModelSpend;
  /** The watch's output had not changed: nothing ran. */
  unchanged: boolean;
  watch?: { spec: string; digest: string | null };
  watchBase?: WatchBase;
  /** The turn passed `agent.max_tokens_per_turn`; `reply` is its kept answer. */
  overBudget?: TurnBudgetOverrun;
}

/**
 * Process a `cron-tick` job (called by the `ticks` worker for `job.data.type === 'cron-tick'`).
 *
 * @param token - the worker's lock token of `job` (needed to put an early job back as delayed)
 * @param signal - the job's abort signal, if any; aborts the turn
 * @returns what happened; resolves after the run is committed and delivered
 * @throws DelayedError after moving a job back to delayed (it came too early, found its job busy with
 *   `--overlap queue`, or was handed back by a drain); TurnError for a network failure that BullMQ retries
 */
export async function processCronTick(
  job: Job<CronTickData>,
  token: string | undefined,
  signal: AbortSignal | undefined,
  deps: WorkerDeps,
): Promise<CronTickResult> {
  // Stored without its retry options: a failure that never reached the model is retried by them (`applyRetryPolicy`).
  deps.cron.applyRetryPolicy(withCronTickData(job));
  return await runOccurrence(new CronPlan(deps, job, token, signal), deps, job, token, signal);
}

/** `job` with the whole data of a cron tick (`cronTickData`: a job scheduler's jobs store the generation alone). */
export function withCronTickData(job: Job<CronTickData>): Job<CronTickData> {
  job.data = cronTickData(job);
  return job;
}

/**
 * `--overlap cancel_other` for an occurrence waiting for a turn slot of its worker (`JobProcessor.waitingForSlot`):
 * the run it replaces is cancelled now, not once a slot is free — the slot may be that run's own.
 */
export async function cancelReplacedRun(job: Job<CronTickData>, deps: WorkerDeps): Promise<void> {
  await new CronPlan(deps, withCronTickData(job), undefined, undefined).cancelReplacedRun();
}

/**
 * Epoch ms the occurrence a cron tick job stands for is due: its own `dueAt` (one-shot, manual run, backfill,
 * catch-up, passed first), else its job scheduler's time plus the prefetch lead (`repeat-strategy.ts`), else its creation.
 */
export function cronTickDueAt(job: Job<CronTickData>): number {
  const data = cronTickData(job);
  if (data.dueAt !== undefined) return data.dueAt;
  const millis = schedulerJobMillis(job.id);
  return millis === undefined ? job.timestamp : millis + (data.leadMs ?? 0);
}

/** Whether a job due at `dueAt` is held in this process until then (came by the prefetch lead), not put back. */
export function heldUntilDue(dueAt: number): boolean {
  return dueAt - Date.now() <= MAX_IN_PROCESS_WAIT_MS;
}

/** The occurrence a job stands for. */
function occurrenceOf(deps: WorkerDeps, job: Job<CronTickData>): CronTick {
  const { jobId, generation, manual, backfill, after, afterAll } = job.data;
  const trigger: OccurrenceTrigger = after || afterAll ? 'after' : manual ? 'manual' : backfill ? 'backfill' : 'schedule';
  const dueAt = cronTickDueAt(job);
  // A run after a parent's run is one per child and parent run, whenever it is queued (cron-handoff.ts); a run
  // after all its parents' runs, one per child and set of parent runs.
  const occurrenceId = afterAll
    ? cronAfterOccurrenceId(jobId, afterAllKey(afterAll))
    : after
      ? cronAfterOccurrenceId(jobId, after.occurrenceId)
      : cronOccurrenceId(jobId, dueAt, trigger as Exclude<OccurrenceTrigger, 'after'>);
  return {
    ...(after ? { parent: after } : {}),
    ...(afterAll ? { parents: afterAll } : {}),
    jobId,
    generation,
    trigger,
    dueAt,
    follows: job.data.follows,
    queuedCatchUp: job.data.catchUp === true,
    occurrenceId,
    holder: job.id ?? occurrenceId,
    pickedAt: Date.now(),
    log: lazyChild(deps.log, { cronJobId: jobId, occurrenceId }),
  };
}

/** A cron occurrence's steps in the occurrence pipeline (`occurrence/plan.ts`); one plan per job. */
class CronPlan implements OccurrencePlan<CronGated, CronClaimed, CronRan, CronCommitted, CronTickResult> {
  readonly occurrence: Occurrence;
  private readonly tick: CronTick;
  private readonly store: CronStore;
  /** When this copy first found the job's turn lock taken by a holder with no claim (`lockTakenBeforeClaim`). */
  private unclaimedLockSince: number | undefined;

  constructor(
    private readonly deps: WorkerDeps,
    private readonly job: Job<CronTickData>,
    private readonly token: string | undefined,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.store = deps.cron;
    const tick = (this.tick = occurrenceOf(deps, job));
    this.occurrence = {
      kind: 'cron',
      label: 'cron run',
      occurrenceId: tick.occurrenceId,
      ids: { scheduleId: tick.jobId },
      dueAt: tick.dueAt,
      // Prefetch lead (`cron.prefetch_lead_ms`, `repeat-strategy.ts`): the job came early; the turn starts at the due
      // time. One that came far earlier (promoted by hand) is left to the gate, which puts it back (`decideEarly`).
      ...(heldUntilDue(tick.dueAt) ? { holdUntil: tick.dueAt } : {}),
      holder: tick.holder,
      log: tick.log,
      canDefer: token !== undefined,
      countsDeferrals: false,
      measuresLateness: tick.trigger === 'schedule',
      attempts: { attempt: job.attemptsMade + 1, of: job.opts.attempts ?? 1 },
      // `--overlap cancel_other` of a later occurrence cancels this run's turn wherever it runs (`cancelRunning`).
      stoppableAs: { sessionId: cronSessionId(tick.jobId), occurrenceId: tick.occurrenceId },
    };
  }

  /** Read the job's record and decide (`decideOccurrence`), then take the overlap lock unless `--overlap allow`. */
  async gate(waited: boolean): Promise<GateAnswer<CronGated, CronTickResult>> {
    const { deps, store, tick } = this;
    // Claimed ahead of the due time: the record read at the due time decides (`CronClaimedAhead.recordAtDue`, the rule
    // in `cron-claim-ahead.ts`); one not to run now is unclaimed and gated below as without a lead.
    const ahead = await takeCronAhead(this.job);
    if (ahead) {
      const record = await ahead.recordAtDue();
      const decision = this.decide(record, Date.now());
      if (record && decision.action === 'run' && !decision.catchUp)
        return {
          action: 'claim',
          gated: { mode: 'run', record, decision, claimedAhead: { attempt: ahead.attempt, journalEntries: ahead.journalEntries } },
          lock: ahead.lock,
        };
      deps.turns.forgetClaimedAhead(tick.holder);
      await store.unclaim(tick.jobId, tick.occurrenceId);
      await ahead.lock?.release();
    }
    if (waited && this.signal?.aborted) return this.dropped('aborted');
    // The occurrences of one instant wake together (one timer, `sleepUntil`): their reads leave in one write.
    holdWritesThisTurn(deps.redis);
    const record = await store.get(tick.jobId);
    const now = Date.now();
    const grace = this.grace;
    let decision = this.decide(record, now);
    if (decision.action === 'wait') return decision;
    if (decision.action === 'drop' || !record) {
      // A retry of an occurrence that was committed: only finish deliveries it may have left pending.
      if (decision.action === 'drop' && record && (await store.getRun(record.id, tick.occurrenceId))) {
        return { action: 'done', result: await this.finishDuplicate(record) };
      }
      const reason = decision.action === 'drop' ? decision.reason : 'removed';
      tick.log.info({ reason }, 'cron occurrence dropped');
      return this.dropped(reason);
    }
    // `--misfire all`: the overdue occurrence of an outage queues the others it missed (misfire.ts).
    if (record.misfire === 'all' && tick.trigger === 'schedule' && !tick.queuedCatchUp && isMissed(decision)) {
      const found = catchUpsAfter({
        schedule: record.schedule,
        tz: record.tz,
        dueAt: tick.dueAt,
        now,
        windowMs: catchUpWindowMs(record, deps),
        max: deps.config.cron.max_backfill_occurrences,
      });
      // They follow this occurrence, run or recorded skipped, so none takes the job's lock from it.
      if (found.queue.length > 0)
        await store.enqueueCatchUps(record, { occurrenceId: tick.occurrenceId, queueJobId: tick.holder }, found.queue);
      if (found.queue.length > 0)
        tick.log.info(
          { queued: found.queue.length, runsFirst: found.runsFirst },
          'cron occurrences missed in an outage queued (--misfire all)',
        );
      if (!found.runsFirst && decision.action === 'run') {
        decision = {
          action: 'skip',
          reason: 'misfire',
          latenessMs: decision.latenessMs,
          graceMs: graceWindowMs(periodAt(record.schedule, record.tz, tick.dueAt), grace),
        };
      }
    }
    await this.makeGoodSkippedByLead(record);
    // A backfill or a catch-up runs oldest first: an occurrence waits while the one before it is still to run.
    if (tick.follows !== undefined && this.token !== undefined && (await store.isAhead(record.id, tick.follows))) {
      return { action: 'defer', reason: 'backfill-order', delayMs: deps.config.worker.defer_ms };
    }
    // Overlap (docs/CRON.md, "Overlap"): the turn lock of the job's session `cron:<id>`; with
    // `--overlap buffer_all`, first the occurrence's place in the job's buffer (`overlap-buffer.ts`;
    // a backfilled occurrence, or a catch-up queued by `--misfire all`, keeps its own order instead).
    const buffered =
      record.overlap === 'buffer_all' && tick.trigger !== 'backfill' && !tick.queuedCatchUp
        ? bufferMember({ generation: tick.generation, trigger: tick.trigger, occurrenceId: tick.occurrenceId })
        : undefined;
    const place = buffered === undefined ? 0 : await store.joinBuffer(record, buffered, tick.dueAt);
    const lock = record.overlap === 'allow' || place > 0 ? null : await deps.lock.acquire(cronSessionId(record.id), tick.holder);
    // Backfilled occurrences, and catch-ups, never overlap one another, whatever the policy: the next waits for the lock.
    // A catch-up waits for it whoever holds it: the next occurrence after the outage runs on its time, and the
    // catch-ups still run after it (docs/CRON.md, "Catch-up window"; the window bounds the wait, `decideOccurrence`).
    if (!lock && record.overlap !== 'allow' && tick.follows !== undefined && this.token !== undefined) {
      if (tick.queuedCatchUp) return { action: 'defer', reason: 'backfill-order', delayMs: deps.config.worker.defer_ms };
      const holder = await deps.lock.holder(cronSessionId(record.id));
      if (holder === tick.follows.queueJobId || (tick.trigger === 'backfill' && store.isBackfillHolder(record.id, holder))) {
        return { action: 'defer', reason: 'backfill-order', delayMs: deps.config.worker.defer_ms };
      }
    }
    const overlap = decideOverlap(
      record.overlap,
      record.overlap !== 'allow' && !lock,
      { deferMs: deps.config.worker.defer_ms, canDefer: this.token !== undefined, maxBuffered: deps.config.cron.max_buffered_occurrences },
      place,
    );
    if (overlap.action === 'defer') {
      if (overlap.reason === 'overlap-cancel') await this.cancelRunning(record.id);
      return overlap;
    }
    if (overlap.action === 'skip') {
      if (overlap.reason === 'overlap' && (await this.lockTakenBeforeClaim(record.id))) {
        return { action: 'wait', untilMs: Date.now() + deps.config.worker.defer_ms };
      }
      return { action: 'claim', gated: { mode: 'overlap-skip', record, reason: overlap.reason, buffered } };
    }
    const gated: CronGated =
      decision.action === 'skip' ? { mode: 'misfire-skip', record, decision, buffered } : { mode: 'run', record, decision, buffered };
    return { action: 'claim', gated, lock };
  }

  /**
   * A job scheduler's job fetched later than its prefetch lead allows (a worker outage) made its next job past an
   * occurrence due within the lead of the fetch (past several, when BullMQ asked for it late): each gets a job of
   * its own (`skippedByLead`). Only at
   * the job's first fetch, when BullMQ made the next job: a job put back and fetched again later (a deferral, a
   * drain's hand-back) has a later `processedOn` that made no job, and would add a twin of the next one.
   */
  private async makeGoodSkippedByLead(record: CronJob): Promise<void> {
    const { job, tick } = this;
    const leadMs = job.data.leadMs ?? 0;
    if (leadMs === 0 || job.data.dueAt !== undefined || tick.trigger !== 'schedule' || !job.processedOn) return;
    if (job.attemptsStarted > 1) return;
    if (record.schedule.kind !== 'cron' && record.schedule.kind !== 'interval') return;
    // BullMQ made the next job between the fetch and now.
    const missed = skippedByLead(record.schedule, record.tz, leadMs, tick.dueAt, { from: job.processedOn, to: Date.now() });
    for (const { dueAt, sure } of missed) {
      // Unsure: the scheduler may have made this one (by now even taken it, and moved past it); its own traces tell.
      // The first it made is its next job: the ones after it were not left out.
      if (!sure && (await this.store.schedulerMadeOccurrence(record.id, cronOccurrenceId(record.id, dueAt, 'schedule'), dueAt, leadMs)))
        return;
      await this.store.addPassedOccurrence(record, dueAt);
      tick.log.info({ dueAt }, 'cron occurrence within the prefetch lead of a late pick-up queued on its own');
    }
  }

  private get grace() {
    return graceSettings(this.deps.config.cron);
  }

  /** Whether the occurrence runs, as the job's record says now (`decideOccurrence`). */
  private decide(record: CronJob | null, now: number): OccurrenceDecision {
    const { deps, tick } = this;
    return decideOccurrence({
      job: record,
      dueAt: tick.dueAt,
      generation: tick.generation,
      trigger: tick.trigger,
      periodMs: record ? periodAt(record.schedule, record.tz, tick.dueAt) : undefined,
      now,
      grace: this.grace,
      catchUpWindowMs: record ? catchUpWindowMs(record, deps) : undefined,
      queuedCatchUp: tick.queuedCatchUp,
    });
  }

  /**
   * Before a turn slot (`cancelReplacedRun`): cancel the running run when the gate would — the job's
   * policy is `cancel_other` and this occurrence is to run (backfills and catch-ups keep their order
   * and never cancel one another).
   */
  async cancelReplacedRun(): Promise<void> {
    const { tick } = this;
    if (tick.trigger === 'backfill' || tick.queuedCatchUp || tick.follows !== undefined) return;
    const record = await this.store.get(tick.jobId);
    if (record?.overlap !== 'cancel_other' || this.decide(record, Date.now()).action !== 'run') return;
    await this.cancelRunning(record.id);
  }

  /**
   * `--overlap cancel_other` (Temporal's CANCEL_OTHER): cancel the job's running run wherever it runs.
   * The lock's holder names the BullMQ job, its claim the occurrence; the request goes on the channel
   * every worker listens to for `/stop` (`listenForTurnAborts`), and names that occurrence only, so a
   * run that started since is never hit. The running turn is aborted (its commands' process groups
   * signalled, its journal deleted by its commit) and recorded as `cancelled`; this occurrence looks
   * again after `worker.defer_ms` and runs once the lock is free. Sent again at each look while the
   * lock is held, so a request lost on the way (a worker reconnecting) is made good.
   */
  private async cancelRunning(jobId: string): Promise<void> {
    const { deps, tick } = this;
    const holder = await deps.lock.holder(cronSessionId(jobId));
    if (holder === null || holder === tick.holder) return;
    const occurrenceId = await this.store.claimedBy(jobId, holder);
    if (occurrenceId === undefined) return; // not claimed yet: looked at again after the deferral
    await deps.redis.publish(deps.keys.turnAbortChannel, encodeTurnAbort({ sessionId: cronSessionId(jobId), occurrenceId, by: 'overlap' }));
    tick.log.info({ cancelled: occurrenceId }, 'cron occurrence cancels the running one (--overlap cancel_other)');
  }

  /**
   * Whether the job's turn lock is taken by a holder that has claimed no occurrence yet: a twin of this
   * occurrence (a second BullMQ job for it) between its lock and its claim, about to run it. An overlap skip
   * is for a run that is going; claimed as skipped here, this occurrence would never run (the twin's claim
   * then fails). So this copy looks again shortly, and leaves the occurrence to the twin once it has
   * claimed it. A holder that claims nothing within a lock time-to-live is no twin: the skip goes ahead.
   * A lock free again is looked at again too (the gate then takes it).
   */
  private async lockTakenBeforeClaim(jobId: string): Promise<boolean> {
    const holder = await this.deps.lock.holder(cronSessionId(jobId));
    if (holder === null) return true;
    if (await this.store.hasClaimBy(jobId, holder)) return false;
    this.unclaimedLockSince ??= Date.now();
    return Date.now() - this.unclaimedLockSince < this.deps.lock.ttlMs;
  }

  /**
   * Claim the occurrence (exactly once, docs/CRON.md): after this a pause or remove no longer stops it.
   * A skipped occurrence is claimed first too, so a run of the same occurrence elsewhere wins.
   */
  async claim(gated: CronGated): Promise<ClaimAnswer<CronClaimed, CronRan, CronTickResult>> {
    const { store, tick } = this;
    const { record } = gated;
    const startedAt = Date.now();
    if (gated.claimedAhead && gated.mode === 'run')
      return {
        action: 'fire',
        claimed: {
          record,
          decision: gated.decision,
          startedAt,
          attempt: gated.claimedAhead.attempt,
          journalEntries: gated.claimedAhead.journalEntries,
        },
        startedAt,
      };
    const claim = await store.claim({
      jobId: record.id,
      occurrenceId: tick.occurrenceId,
      holder: tick.holder,
      generation: tick.generation,
      manual: onRequest(tick.trigger),
      after: tick.trigger === 'after',
      dueAt: tick.dueAt,
      skip: gated.mode !== 'run',
    });
    // Claimed (or found done, or taken by another): it waits in the overlap buffer no more.
    if (gated.buffered !== undefined) await store.leaveBuffer(record.id, gated.buffered);
    if (gated.mode === 'overlap-skip') {
      // An occurrence done already is left to the run that did it (its deliveries may be under way there).
      if (claim.status !== 'ok') {
        return {
          action: 'done',
          result: { outcome: claim.status === 'done' ? 'duplicate' : 'dropped', occurrenceId: tick.occurrenceId, reason: claim.status },
        };
      }
      if (gated.reason === 'buffer-full') {
        tick.log.warn(
          { maxBuffered: this.deps.config.cron.max_buffered_occurrences },
          'cron occurrence skipped: the previous run is still going and the overlap buffer is full (--overlap buffer_all)',
        );
      } else tick.log.info('cron occurrence skipped: the previous run is still going (--overlap skip)');
      return {
        action: 'record',
        claimed: { record, startedAt, attempt: claim.attempt },
        ran: this.skipped(record, gated.reason, startedAt - tick.dueAt, claim.attempt),
      };
    }
    if (claim.status !== 'ok') {
      if (claim.status === 'done') return { action: 'done', result: await this.finishDuplicate(record) };
      tick.log.info({ reason: claim.status }, 'cron occurrence not claimed');
      return this.dropped(claim.status);
    }
    if (gated.mode === 'misfire-skip') {
      const { latenessMs, graceMs } = gated.decision;
      tick.log.info({ latenessMs, graceMs }, 'cron occurrence missed its grace window; skipped (--misfire skip)');
      return {
        action: 'record',
        claimed: { record, startedAt, attempt: claim.attempt },
        ran: this.skipped(record, 'misfire', latenessMs, claim.attempt),
      };
    }
    return {
      action: 'fire',
      claimed: { record, decision: gated.decision, startedAt, attempt: claim.attempt, journalEntries: claim.journalEntries },
      startedAt,
    };
  }

  /** The job's turn, recorded as an `ok` run with its reply and deliveries (none when `unchanged`). */
  async runTurn(claimed: CronClaimed, signal: AbortSignal): Promise<CronRan> {
    const run = this.startRun(claimed);
    this.tick.log.info({ trigger: run.trigger, latenessMs: run.lateness_ms, late: run.late, attempt: claimed.attempt }, 'cron run started');
    const ended = await jobTurn(claimed.record, this.tick, signal, this.deps, claimed.journalEntries);
    run.spend = ended.spend;
    if (ended.unchanged) run.unchanged = true;
    else Object.assign(run, withReply(run, ended.reply)); // the record keeps a capped copy; targets get it whole
    return this.finishRun(claimed, run, {
      watch: ended.watch,
      watchBase: ended.watchBase,
      ...(ended.overBudget ? { overTurnBudget: ended.overBudget } : {}),
    });
  }

  /**
   * A failed turn, recorded as an `error` run with what it spent; a turn stopped at a token budget pauses the job.
   * A turn cancelled for a newer occurrence (`--overlap cancel_other`) is a `cancelled` run: no failure.
   */
  failedTurn(claimed: CronClaimed, f: { error: TurnError; spend: ModelSpend; turn: TrackedTurn }): CronRan {
    const run = this.startRun(claimed);
    run.spend = f.spend;
    run.status = f.turn.stoppedBy === 'overlap' ? 'cancelled' : 'error';
    if (run.status === 'cancelled') run.reason = 'overlap';
    run.error = f.error.message;
    return this.finishRun(claimed, run, f.error.kind === 'budget' && f.error.overrun ? { overTurnBudget: f.error.overrun } : {});
  }

  /**
   * One commit attempt (`applyRun`) with the version check: the first over the record the claim was decided on
   * (a write since fails the check), each further one over the record read again.
   */
  async commit(claimed: CronClaimed, { run, effects }: CronRan, attempt: number): Promise<CommitAnswer<CronCommitted, CronTickResult>> {
    const { deps, store, tick } = this;
    holdWritesThisTurn(deps.redis); // the commits of turns that end together leave in one write
    const current = attempt === 0 ? claimed.record : await store.get(tick.jobId);
    if (!current) return this.dropped('removed');
    // The spend joins the job's totals, the watch's digest is kept, a token budget pauses: in this one commit.
    const { watchBase, ...applied } = effects;
    const next = applyRun(current, run, tick.pickedAt, Date.now(), {
      maxConsecutiveFailures: deps.config.cron.max_consecutive_failures,
      ...applied,
    });
    // A failed run (or, with --notify always, a skipped one) is told to the targets as a short notice;
    // so is a pause at a token budget, after the reply of the run that reached it.
    const told = withNotice(run, next, current.state === 'scheduled' && next.state === 'paused', resolveTargets(current));
    const local = told.deliveries.some((d) => d.target === 'local' && d.status === 'pending');
    // The jobs this run starts (`--after`) are decided here and recorded with it: one atomic step (cron-handoff.ts).
    // The commits whose reads were answered together read and write together: each step's commands leave in one write.
    holdWritesThisTurn(deps.redis);
    const handoff = await handoffTargets(deps, current, told);
    holdWritesThisTurn(deps.redis);
    const res = await store.commitRun({
      run: handoff.length > 0 ? { ...told, handoff } : told,
      job: next,
      expectedVersion: current.version,
      localEvent: local
        ? {
            text: deliveryText(told),
            source: 'cron',
            job_id: current.id,
            name: current.name,
            runner: current.script !== null ? 'script' : 'agent',
            occurrence_id: run.occurrence_id,
            trigger: run.trigger,
            due_at: run.due_at,
            status: run.status,
          }
        : null,
    });
    if (res.status === 'conflict') return CONFLICT;
    if (res.status === 'gone') return this.dropped('removed');
    if (res.status === 'duplicate') return { action: 'done', result: await this.finishDuplicate(current) };
    // The digest is kept (`applyRun`): so is what the watch saw, for its next change.
    if (watchBase && next.watch_digest === watchBase.digest) await keepWatchBase(deps, deps.keys.cronWatchBase(current.id), watchBase);
    return { action: 'committed', committed: { before: current, after: next, run: res.run }, lockReleased: false };
  }

  commitExhausted(): Error {
    return new Error(`cron job ${this.tick.jobId} kept changing while its run was being recorded`);
  }

  /** Send the run's pending deliveries (the local one was written by the commit) and record their outcomes. */
  async deliver(_claimed: CronClaimed, _ran: CronRan, { run, after }: CronCommitted): Promise<void> {
    await this.deliverRun(run, after);
  }

  /**
   * A job that left `scheduled` (paused after failures, completed by `--repeat`) loses its job scheduler; the jobs
   * the run hands off to (`--after`) get their runs queued.
   */
  async applyOutcome(_claimed: CronClaimed, { before, after, run }: CronCommitted): Promise<void> {
    if (after.state !== 'scheduled' && before.state === 'scheduled') await this.store.disarm(after);
    await handOff(this.deps, after, run);
  }

  result(claimed: CronClaimed, { run }: CronRan): CronTickResult {
    if (run.status !== 'skipped') {
      this.tick.log.info(
        {
          status: run.status,
          durationMs: run.finished_at! - claimed.startedAt,
          silent: run.silent,
          unchanged: run.unchanged,
          inputTokens: run.spend?.inputTokens,
          outputTokens: run.spend?.outputTokens,
        },
        'cron run finished',
      );
    }
    return {
      outcome: run.status === 'skipped' ? 'skipped' : 'ran',
      occurrenceId: run.occurrence_id,
      status: run.status,
      ...(run.reason ? { reason: run.reason } : {}),
    };
  }

  /**
   * The occurrence was committed before (a retried job): finish deliveries it may have left pending, and queue its
   * hand-off again (each child's run is queued once by its id: cron-handoff.ts).
   */
  private async finishDuplicate(job: CronJob): Promise<CronTickResult> {
    const run = await this.store.getRun(job.id, this.tick.occurrenceId);
    if (run) await Promise.all([this.deliverRun(run, job), handOff(this.deps, job, run)]);
    return { outcome: 'duplicate', occurrenceId: this.tick.occurrenceId };
  }

  /** Send a committed run's pending deliveries and record their outcomes. */
  private async deliverRun(run: CronRun, job: CronJob): Promise<void> {
    if (run.deliveries.some((d) => d.status === 'pending')) await this.store.updateRun(await deliverPending(run, job, this.deps));
  }

  /** The occurrence ends here, not run. */
  private dropped(reason: string): { action: 'done'; result: CronTickResult } {
    return { action: 'done', result: { outcome: 'dropped', occurrenceId: this.tick.occurrenceId, reason } };
  }

  /** The run record of the claimed occurrence as it starts (`ok` until the turn says otherwise). */
  private startRun(claimed: CronClaimed): CronRun {
    const { record, startedAt, attempt } = claimed;
    const decision = claimed.decision!; // a turn runs only for a `fire` claim, which has it
    const { dueAt, trigger } = this.tick;
    const run = baseRun(record, this.tick, {
      trigger: trigger !== 'schedule' ? trigger : decision.catchUp ? 'catch-up' : 'schedule',
      status: 'ok',
      reason: null,
      latenessMs: startedAt - dueAt,
      workerId: this.deps.workerId,
      attempts: attempt,
    });
    run.started_at = startedAt;
    run.late = decision.late;
    const { parent, parents } = this.tick;
    if (parent) run.parent = { job_id: parent.jobId, occurrence_id: parent.occurrenceId, status: parent.status };
    if (parents) run.parents = parents.map((p) => ({ job_id: p.jobId, occurrence_id: p.occurrenceId, status: p.status }));
    return run;
  }

  /** The run as it ends: finished now, with its deliveries (an `ok` run that ran a turn goes to every target). */
  private finishRun(claimed: CronClaimed, run: CronRun, effects: RunEffects): CronRan {
    run.finished_at = Date.now();
    // `--notify` (`runDeliversReply`): a quiet reply held back is marked `silent` on every target; a reply
    // `--notify done` holds back (not the job's last run) has no deliveries.
    const delivers = runDeliversReply(claimed.record, run);
    run.deliveries =
      run.status === 'ok' && !run.unchanged && (delivers || run.silent)
        ? resolveTargets(claimed.record).map((target): CronDelivery => ({ target, status: delivers ? 'pending' : 'silent' }))
        : [];
    return { run, effects, failed: run.status !== 'ok', unchanged: Boolean(run.unchanged), finishedAt: run.finished_at };
  }

  /** A skipped occurrence's record (misfire or overlap) and the claim it stands on. */
  private skipped(record: CronJob, reason: 'misfire' | 'overlap' | 'buffer-full', latenessMs: number, attempt: number): CronRan {
    const run = baseRun(record, this.tick, {
      trigger: this.tick.trigger,
      status: 'skipped',
      reason,
      latenessMs,
      workerId: this.deps.workerId,
      attempts: attempt,
    });
    return { run, effects: {}, failed: false, unchanged: false, finishedAt: Date.now() };
  }
}

/**
 * The job's turn: its `--watch` first, when it has one (an unchanged output ends here); then a fresh
 * turn with only its prompt (on its `--model`), or its script.
 * @throws what the runner threw (a TurnError carries the spend of the calls made)
 */
async function jobTurn(
  job: CronJob,
  tick: Pick<CronTick, 'occurrenceId' | 'dueAt' | 'parent' | 'parents' | 'log'>,
  signal: AbortSignal,
  deps: WorkerDeps,
  /** Entries of the occurrence's journal at its claim (`undefined`: not known, read). */
  journalEntries?: number,
): Promise<JobTurn> {
  const { occurrenceId, dueAt, log } = tick;
  const sessionId = cronSessionId(job.id);
  // A job runs as `cron`; one created or edited from another surface than the CLI (over `/api`)
  // answers to that surface's `tools.allow_from` too, so a job is no way around a surface's rule.
  const surface: TurnSurfaces = cronToolSurfaces(job);
  let prompt = job.prompt;
  let watch: Pick<JobTurn, 'watch' | 'watchBase'> = {};
  if (job.watch) {
    // `--watch` (`worker/occurrence/watch-check.ts`): the same output as at the last successful run ends the run here.
    const watched = await runWatch(
      deps,
      { spec: job.watch, owner: job.id, lastDigest: job.watch_digest, baseKey: deps.keys.cronWatchBase(job.id) },
      { sessionId, surface, signal },
    );
    watch = { watch: { spec: job.watch, digest: watched.digest }, ...(watched.base ? { watchBase: watched.base } : {}) };
    if (!watched.changed) return { reply: '', spend: NO_SPEND, unchanged: true, ...watch };
    prompt += watched.section;
  }
  // `--after`: the parent run's output, marked as that run's and as data (cron-after.ts).
  if (tick.parent) prompt += parentOutputSection(tick.parent);
  for (const p of tick.parents ?? []) prompt += parentOutputSection(p);
  const messages = [{ role: 'user' as const, content: prompt }];
  // The turn resumes from the occurrence's journal, if an earlier run of it (a retry, a takeover) left one.
  // None at the claim (which counts its entries): an empty one, without a read. Else the turns of one instant
  // start together: their reads leave in one write.
  if (journalEntries !== 0) holdWritesThisTurn(deps.redis);
  const journal =
    journalEntries === 0 ? emptyTurnJournal(deps, sessionId, occurrenceId) : await openTurnJournal(deps, sessionId, occurrenceId, log);
  if (job.script !== null) {
    const runner = deps.runners.script(job.script, deps.config.cron.script_timeout_seconds * 1000);
    // A script is a process on this host: it runs within a slot of the `command` pool (`worker.max_command_turns`).
    const slot = await deps.turns.slots.acquire('command', signal);
    try {
      const out = await runner.run({
        sessionId,
        messages,
        signal,
        env: { HERMES_CRON_JOB_ID: job.id, HERMES_CRON_OCCURRENCE_ID: occurrenceId, HERMES_CRON_DUE_AT: new Date(dueAt).toISOString() },
        journal,
      });
      return { reply: out.reply, spend: NO_SPEND, unchanged: false, ...watch };
    } finally {
      slot.release();
    }
  }
  const out = await deps.runners.agent.run({
    sessionId,
    messages,
    // A `--watch` check's output, or a parent run's, is in the prompt.
    toolOutput: Boolean(job.watch) || tick.parent !== undefined || tick.parents !== undefined,
    signal,
    surface,
    onEvent: sessionEventSink(deps, sessionId, { occurrenceId }),
    model: job.model ?? undefined,
    kind: 'cron',
    origin: job.origin,
    journal,
  });
  return {
    reply: out.reply,
    spend: out.spend ?? NO_SPEND,
    unchanged: false,
    ...watch,
    ...(out.overBudget ? { overBudget: out.overBudget } : {}),
  };
}

/** `--misfire all`: the job's catch-up window, ms (its `--catchup-window`, else `cron.catchup_window_seconds`). */
function catchUpWindowMs(job: CronJob, deps: WorkerDeps): number {
  return (job.catchup_window_seconds ?? deps.config.cron.catchup_window_seconds) * 1000;
}

/** Whether the misfire decision found the occurrence beyond its grace window (a catch-up, or a skip). */
function isMissed(decision: OccurrenceDecision): boolean {
  return (decision.action === 'run' && decision.catchUp) || decision.action === 'skip';
}

/** A run record of `tick`'s occurrence, not started yet. */
function baseRun(
  job: CronJob,
  tick: Pick<CronTick, 'occurrenceId' | 'dueAt'>,
  f: {
    trigger: CronRun['trigger'];
    status: CronRun['status'];
    reason: string | null;
    latenessMs: number;
    workerId: string;
    attempts: number;
  },
): CronRun {
  return {
    occurrence_id: tick.occurrenceId,
    job_id: job.id,
    trigger: f.trigger,
    status: f.status,
    reason: f.reason,
    attempts: f.attempts,
    due_at: tick.dueAt,
    started_at: null,
    finished_at: null,
    lateness_ms: Math.max(0, f.latenessMs),
    late: false,
    output: null,
    error: null,
    silent: false,
    spend: NO_SPEND,
    unchanged: false,
    deliveries: [],
    worker_id: f.workerId,
  };
}
