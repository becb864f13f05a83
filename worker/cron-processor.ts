/**
 * Runs one cron occurrence: a `cron-tick` job of the `ticks` queue, one
 * function per step (`processCronTick` reads as this list):
 *  1. which occurrence (`occurrenceOf`): due time from the scheduler job id
 *     (`repeat:cron:<id>:<millis>`) or the job data (one-shot, manual run);
 *  2. `gate`: run, defer (not dropped), skip or drop. Drain: a draining worker
 *     hands an unclaimed occurrence back; misfire (pure, `decideOccurrence` in
 *     scheduler/cron/misfire.ts): wait until due (never early; `decideEarly`),
 *     drop (removed, paused, completed, edited, coalesced), run (on time, late,
 *     or as the single catch-up) or skip (beyond the grace window with
 *     `--misfire skip`); overlap (`decideOverlap`): one run per job across the
 *     fleet through the turn lock of the job's session `cron:<id>`; when busy,
 *     `skip` records a skipped run, `queue` defers the tick, `allow` runs anyway.
 *     The pure decisions are in `cron-gate.ts`; docs/CRON.md, "What happens at run time";
 *  3. `claim` the occurrence (Lua: still scheduled in this generation, nobody
 *     else holds it) — the point after which a pause or remove no longer stops it;
 *  4. `runTurn`: a fresh turn with only the job's prompt (agent, on its `--model`), or its
 *     `--script` (command turn, `cron.script_timeout_seconds`). A job with `--watch` runs its
 *     check first: an output with the digest of the last successful run ends the run `ok`
 *     and `unchanged`, with no model call (or script) and nothing delivered; otherwise the
 *     output goes into the prompt (docs/CRON.md, "Economy"). The run records what its model
 *     calls cost (`spend`, also of a failed turn). How a turn that threw ends
 *     is `decideRunEnding`: a turn cut by the drain deadline is not recorded (the
 *     job is handed back, and the next worker to take it claims the occurrence
 *     again as its next attempt; docs/RELIABILITY.md), one whose lock was lost
 *     records nothing, a network failure is retried by BullMQ, any other is an `error` run;
 *  5. `commit` run record + job state (the spend added to its totals, the watch's digest, a pause
 *     at a token budget: `applyRun`) + local delivery once per occurrence (Lua),
 *     `applyOutcome` (a job that left `scheduled` loses its job scheduler), then
 *     `deliver` to the other targets and record their outcomes.
 * A retried or duplicated job finds the claim or the commit marker and neither
 * runs nor delivers the occurrence again.
 */
import type { Job } from 'bullmq';
import { TurnError } from '../scheduler/errors/turn-error.ts';
import { periodAt } from '../scheduler/cron/cron-engine.ts';
import {
  applyRun, cronOccurrenceId, cronSessionId, cronToolSurfaces, deliveryText, withReply,
  type CronDelivery, type CronJob, type CronRun, type OccurrenceTrigger,
} from '../scheduler/cron/cron-job.ts';
import type { CronStore, CronTickData } from '../scheduler/cron/cron-store.ts';
import { cronStoreFor } from '../scheduler/services.ts';
import { withNotice } from '../scheduler/cron/cron-notice.ts';
import { decideOccurrence, type OccurrenceDecision } from '../scheduler/cron/misfire.ts';
import { schedulerJobMillis } from '../scheduler/store/queues.ts';
import type { WorkerDeps } from './worker-deps.ts';
import { deferJob } from '../scheduler/store/defer-job.ts';
import { CONFLICT, retryOnConflict } from '../scheduler/store/optimistic-retry.ts';
import { sleepUntil } from './sleep-until.ts';
import type { HeldLock } from './session-lock.ts';
import { CRON_DRAIN_HAND_BACK, decideEarly, decideOverlap, decideRunEnding, type CronDefer } from './cron-gate.ts';
import { deliverPending, resolveTargets } from './cron-delivery.ts';
import { sessionEventSink } from './turn-events.ts';
import type { TurnSurfaces } from './tools/tool.ts';
import { NO_SPEND, type ModelSpend } from '../scheduler/model-spend.ts';
import { runWatch, watchSection } from './watch-check.ts';

/** What happened to a tick (the job's return value, for logs and tests). */
export interface CronTickResult {
  outcome: 'ran' | 'skipped' | 'dropped' | 'duplicate';
  occurrenceId: string;
  reason?: string;
  status?: CronRun['status'];
}

const stores = new WeakMap<WorkerDeps, CronStore>();

function storeFor(deps: WorkerDeps): CronStore {
  let store = stores.get(deps);
  if (!store) {
    store = cronStoreFor(deps.config, deps);
    stores.set(deps, store);
  }
  return store;
}

/** The occurrence a cron tick job stands for. */
interface CronTick {
  jobId: string;
  generation: number;
  trigger: OccurrenceTrigger;
  /** Epoch ms the occurrence is due. */
  dueAt: number;
  occurrenceId: string;
  /** Holder of the claim and of the overlap lock: the BullMQ job id. */
  holder: string;
  /** Epoch ms a worker took the job. */
  pickedAt: number;
  log: WorkerDeps['log'];
}

/** What a run leaves for the commit besides its record (`applyRun`'s options). */
interface RunEffects {
  /** The watch the run checked and its output's digest. */
  watch?: { spec: string; digest: string };
  /** The turn stopped at `agent.max_tokens_per_turn` (TurnError `budget`): the job pauses. */
  overTurnBudget?: boolean;
}

/** What the job's turn gave (`jobTurn`). */
interface JobTurn {
  reply: string;
  spend: ModelSpend;
  /** The watch's output had not changed: nothing ran. */
  unchanged: boolean;
  watch?: { spec: string; digest: string };
}

/** What the gate says: run (or record a misfire skip) under the overlap lock, defer, skip for overlap, or drop. */
type CronGate =
  | { action: 'fire'; record: CronJob; decision: Extract<OccurrenceDecision, { action: 'run' | 'skip' }>; lock: HeldLock | null }
  | CronDefer
  | { action: 'skip'; reason: 'overlap'; record: CronJob }
  | { action: 'drop'; reason: string; committed: CronJob | null };

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
  const store = storeFor(deps);
  const tick = occurrenceOf(deps, job);
  const { occurrenceId } = tick;
  // Drain, nothing early, misfire, overlap: `gate` (cron-gate.ts; docs/CRON.md, "What happens at run time").
  const gated = await gate(store, deps, job, token, signal, tick);
  if (gated.action === 'defer') return await defer(job, token, tick, gated);
  if (gated.action === 'drop') {
    // A retry of an occurrence that was committed: only finish deliveries it may have left pending.
    if (gated.committed) return await finishDuplicate(store, deps, gated.committed, occurrenceId);
    tick.log.info({ reason: gated.reason }, 'cron occurrence dropped');
    return { outcome: 'dropped', occurrenceId, reason: gated.reason };
  }
  if (gated.action === 'skip') return await recordSkip(store, deps, gated.record, tick);
  const { record, decision, lock } = gated;
  try {
    // Exactly once (docs/CRON.md): the claim, after which a pause or remove no longer stops the occurrence.
    const startedAt = Date.now();
    const claim = await store.claim({
      jobId: record.id, occurrenceId, holder: tick.holder, generation: tick.generation, manual: tick.trigger === 'manual', dueAt: tick.dueAt,
      skip: decision.action === 'skip',
    });
    if (claim.status !== 'ok') {
      if (claim.status === 'done') return await finishDuplicate(store, deps, record, occurrenceId);
      tick.log.info({ reason: claim.status }, 'cron occurrence not claimed');
      return { outcome: 'dropped', occurrenceId, reason: claim.status };
    }
    if (decision.action === 'skip') {
      tick.log.info({ latenessMs: decision.latenessMs, graceMs: decision.graceMs }, 'cron occurrence missed its grace window; skipped (--misfire skip)');
      return await commit(store, deps, record.id, baseRun(record, {
        occurrenceId, dueAt: tick.dueAt, trigger: 'schedule', status: 'skipped', reason: 'misfire', latenessMs: decision.latenessMs, workerId: deps.workerId,
        attempts: claim.attempt,
      }), tick.pickedAt);
    }
    // Drain hand-back, lock loss, network retries: `decideRunEnding` (docs/RELIABILITY.md, docs/CRON.md "Retries").
    const { run, effects } = await runTurn(deps, job, token, signal, tick, { record, decision, startedAt, attempt: claim.attempt });
    const result = await commit(store, deps, record.id, run, tick.pickedAt, effects);
    tick.log.info({
      status: run.status, durationMs: run.finished_at! - startedAt, silent: run.silent, unchanged: run.unchanged,
      inputTokens: run.spend?.inputTokens, outputTokens: run.spend?.outputTokens,
    }, 'cron run finished');
    return result;
  } finally {
    await lock?.release();
  }
}

/** Step 1: the occurrence a job stands for. */
function occurrenceOf(deps: WorkerDeps, job: Job<CronTickData>): CronTick {
  const { jobId, generation, manual } = job.data;
  const trigger: OccurrenceTrigger = manual ? 'manual' : 'schedule';
  const dueAt = job.data.dueAt ?? schedulerJobMillis(job.id) ?? job.timestamp;
  const occurrenceId = cronOccurrenceId(jobId, dueAt, trigger);
  return {
    jobId, generation, trigger, dueAt, occurrenceId, holder: job.id ?? occurrenceId, pickedAt: Date.now(),
    log: deps.log.child({ cronJobId: jobId, occurrenceId }),
  };
}

/**
 * Step 2: run, defer, skip or drop. Reads the job's record and decides (`decideOccurrence`), waiting
 * in this process (in capped steps, the record read again after each) while the occurrence is not
 * yet due; then takes the overlap lock unless `--overlap allow`. The lock, if taken, goes with a `fire`.
 */
async function gate(
  store: CronStore,
  deps: WorkerDeps,
  job: Job<CronTickData>,
  token: string | undefined,
  signal: AbortSignal | undefined,
  tick: CronTick,
): Promise<CronGate> {
  // Drain (docs/RELIABILITY.md, "A cron run cut by a drain is handed back"; as for `/v1` runs and loop ticks):
  // a paused worker still gets the job of a fetch in flight when it paused; an occurrence not claimed yet goes
  // back to the queue at once for another worker (its attempt count untouched), instead of starting a run the
  // drain deadline would cut.
  if (deps.turns.draining && token) return CRON_DRAIN_HAND_BACK;
  const grace = {
    graceMinMs: deps.config.cron.misfire_grace_min_seconds * 1000,
    graceMaxMs: deps.config.cron.misfire_grace_max_seconds * 1000,
  };
  let record: CronJob | null;
  let decision: OccurrenceDecision;
  for (;;) {
    record = await store.get(tick.jobId);
    // Misfire and nothing early (docs/CRON.md): pure, scheduler/cron/misfire.ts.
    decision = decideOccurrence({
      job: record, dueAt: tick.dueAt, generation: tick.generation, trigger: tick.trigger,
      periodMs: record ? periodAt(record.schedule, record.tz, tick.dueAt) : undefined, now: Date.now(), grace,
    });
    if (decision.action !== 'wait') break;
    const early = decideEarly(decision.untilMs, Date.now(), { draining: deps.turns.draining, canDefer: token !== undefined });
    if (early.action === 'defer') return early;
    await sleep(early.ms, signal);
    if (signal?.aborted) return { action: 'drop', reason: 'aborted', committed: null };
  }
  if (decision.action === 'drop' || !record) {
    const committed = decision.action === 'drop' && record && (await store.getRun(record.id, tick.occurrenceId)) ? record : null;
    return { action: 'drop', reason: decision.action === 'drop' ? decision.reason : 'removed', committed };
  }
  // Overlap (docs/CRON.md, `--overlap`): the turn lock of the job's session `cron:<id>`.
  const lock = record.overlap === 'allow' ? null : await deps.lock.acquire(cronSessionId(record.id), tick.holder);
  const overlap = decideOverlap(record.overlap, record.overlap !== 'allow' && !lock, { deferMs: deps.config.worker.defer_ms, canDefer: token !== undefined });
  if (overlap.action === 'run') return { action: 'fire', record, decision, lock };
  return overlap.action === 'defer' ? overlap : { ...overlap, record };
}

/** Put the tick back for later. @throws DelayedError always */
async function defer(job: Job<CronTickData>, token: string | undefined, tick: CronTick, d: CronDefer): Promise<never> {
  if (d.reason === 'drain') tick.log.info('cron tick handed back: this worker is draining');
  else tick.log.debug({ reason: d.reason, dueAt: tick.dueAt, delayMs: d.delayMs }, 'cron tick delayed');
  return await deferJob(job, token, d.delayMs);
}

/**
 * Step 4: run the claimed occurrence's turn.
 * @returns the run to commit: `ok` with the reply and its deliveries (none when `unchanged`), or
 *   `error`; with its spend either way, and what the commit applies besides
 * @throws DelayedError when a drain cut the turn (handed back); the turn's error when the job's lock
 *   was lost (nothing recorded here); a retryable TurnError while BullMQ attempts are left
 */
async function runTurn(
  deps: WorkerDeps,
  job: Job<CronTickData>,
  token: string | undefined,
  signal: AbortSignal | undefined,
  tick: CronTick,
  c: { record: CronJob; decision: Extract<OccurrenceDecision, { action: 'run' }>; startedAt: number; attempt: number },
): Promise<{ run: CronRun; effects: RunEffects }> {
  const { record, decision, startedAt, attempt } = c;
  const { occurrenceId, dueAt, trigger, log } = tick;
  const run = baseRun(record, {
    occurrenceId, dueAt, trigger: trigger === 'manual' ? 'manual' : decision.catchUp ? 'catch-up' : 'schedule',
    status: 'ok', reason: null, latenessMs: Math.max(0, startedAt - dueAt), workerId: deps.workerId, attempts: attempt,
  });
  run.started_at = startedAt;
  run.late = decision.late;
  log.info({ trigger: run.trigger, latenessMs: run.lateness_ms, late: run.late, attempt }, 'cron run started');
  if (trigger !== 'manual') deps.metrics?.tickLateness.observe({ kind: 'cron' }, run.lateness_ms / 1000);
  const ended = await deps.turns.run(tick.holder, 'deadline', async (turnSignal, turn): Promise<JobTurn | { error: TurnError; spend: ModelSpend }> => {
    try {
      return await jobTurn(record, occurrenceId, dueAt, turnSignal, deps);
    } catch (err) {
      const turnError = err instanceof TurnError ? err : new TurnError((err as Error).message, { kind: 'model', cause: err });
      const ending = decideRunEnding(turn, turnError, job.attemptsMade + 1, job.opts.attempts ?? 1);
      if (ending === 'hand-back') {
        log.warn({ attempt }, 'cron run aborted by drain; handed back for another worker');
        return await defer(job, token, tick, CRON_DRAIN_HAND_BACK);
      }
      if (ending === 'abandon') throw err; // another worker has the job now
      if (ending === 'retry') {
        log.warn({ attempt: job.attemptsMade + 1, error: turnError.message }, 'cron run could not reach the model; retrying with backoff');
        throw turnError;
      }
      // What the model calls made before the failure cost (the agent runner attaches it).
      return { error: turnError, spend: (err as { spend?: ModelSpend }).spend ?? NO_SPEND };
    }
  }, signal);
  const effects: RunEffects = {};
  run.spend = ended.spend;
  run.unchanged = false;
  if ('error' in ended) {
    run.status = 'error';
    run.error = ended.error.message;
    if (ended.error.kind === 'budget') effects.overTurnBudget = true;
  } else if (ended.unchanged) {
    run.unchanged = true;
    effects.watch = ended.watch;
  } else {
    Object.assign(run, withReply(run, ended.reply)); // the record keeps a capped copy; targets get it whole
    effects.watch = ended.watch;
  }
  run.finished_at = Date.now();
  // An unchanged run ran no turn: it is no turn in the metrics either.
  if (!run.unchanged) deps.metrics?.turnFinished('cron', run.status === 'ok' ? 'ok' : 'failed', (run.finished_at - startedAt) / 1000);
  run.deliveries = run.status === 'ok' && !run.unchanged
    ? resolveTargets(record).map((target): CronDelivery => ({ target, status: run.silent ? 'silent' : 'pending' }))
    : [];
  return { run, effects };
}

/**
 * The job's turn: its `--watch` first, when it has one (an unchanged output ends here); then a fresh
 * turn with only its prompt (on its `--model`), or its script.
 * @throws what the runner threw (a TurnError carries the spend of the calls made)
 */
async function jobTurn(job: CronJob, occurrenceId: string, dueAt: number, signal: AbortSignal, deps: WorkerDeps): Promise<JobTurn> {
  const sessionId = cronSessionId(job.id);
  // A job runs as `cron`; one created or edited from another surface than the CLI (over `/api`)
  // answers to that surface's `tools.allow_from` too, so a job is no way around a surface's rule.
  const surface: TurnSurfaces = cronToolSurfaces(job);
  let prompt = job.prompt;
  let watch: JobTurn['watch'];
  if (job.watch) {
    // `--watch` (`watch-check.ts`): the same output as at the last successful run ends the run here.
    const watched = await runWatch(deps, job.watch, { sessionId, surface, signal });
    watch = { spec: job.watch, digest: watched.digest };
    if (job.watch_digest && watched.digest === job.watch_digest) return { reply: '', spend: NO_SPEND, unchanged: true, watch };
    prompt += watchSection(job.watch, watched, !job.watch_digest);
  }
  const messages = [{ role: 'user' as const, content: prompt }];
  if (job.script !== null) {
    const runner = deps.runners.script(job.script, deps.config.cron.script_timeout_seconds * 1000);
    // A script is a process on this host: it runs within a slot of the `command` pool (`worker.max_command_turns`).
    const slot = await deps.turns.slots.acquire('command', signal);
    try {
      const out = await runner.run({
        sessionId, messages, signal,
        env: { HERMES_CRON_JOB_ID: job.id, HERMES_CRON_OCCURRENCE_ID: occurrenceId, HERMES_CRON_DUE_AT: new Date(dueAt).toISOString() },
      });
      return { reply: out.reply, spend: NO_SPEND, unchanged: false, watch };
    } finally {
      slot.release();
    }
  }
  const out = await deps.runners.agent.run({
    sessionId, messages, signal, surface, onEvent: sessionEventSink(deps, sessionId, { occurrenceId }),
    model: job.model ?? undefined, kind: 'cron', origin: job.origin,
  });
  return { reply: out.reply, spend: out.spend ?? NO_SPEND, unchanged: false, watch };
}

function baseRun(
  job: CronJob,
  f: {
    occurrenceId: string; dueAt: number; trigger: CronRun['trigger']; status: CronRun['status']; reason: string | null;
    latenessMs: number; workerId: string; attempts: number;
  },
): CronRun {
  return {
    occurrence_id: f.occurrenceId, job_id: job.id, trigger: f.trigger, status: f.status, reason: f.reason, attempts: f.attempts,
    due_at: f.dueAt, started_at: null, finished_at: null, lateness_ms: Math.max(0, f.latenessMs), late: false,
    output: null, error: null, silent: false, spend: NO_SPEND, unchanged: false, deliveries: [], worker_id: f.workerId,
  };
}

/**
 * Overlap skip (`--overlap skip`, docs/CRON.md): record a skipped occurrence. It is claimed first, so a
 * run of the same occurrence elsewhere wins; an occurrence done already is left to the run that did it
 * (its deliveries may be under way there).
 */
async function recordSkip(store: CronStore, deps: WorkerDeps, record: CronJob, tick: CronTick): Promise<CronTickResult> {
  const { occurrenceId, dueAt, trigger } = tick;
  const latenessMs = Date.now() - dueAt;
  const claim = await store.claim({
    jobId: record.id, occurrenceId, holder: tick.holder, generation: tick.generation, manual: trigger === 'manual', dueAt, skip: true,
  });
  if (claim.status !== 'ok') return { outcome: claim.status === 'done' ? 'duplicate' : 'dropped', occurrenceId, reason: claim.status };
  tick.log.info('cron occurrence skipped: the previous run is still going (--overlap skip)');
  const run = baseRun(record, {
    occurrenceId, dueAt, trigger: trigger === 'manual' ? 'manual' : 'schedule',
    status: 'skipped', reason: 'overlap', latenessMs, workerId: deps.workerId, attempts: claim.attempt,
  });
  return await commit(store, deps, record.id, run, tick.pickedAt);
}

/**
 * Step 5: commit once per occurrence with the version check (re-read and re-apply on conflict,
 * `retryOnConflict`), then apply the outcome and deliver.
 */
async function commit(store: CronStore, deps: WorkerDeps, jobId: string, run: CronRun, pickedAt: number, effects: RunEffects = {}): Promise<CronTickResult> {
  return await retryOnConflict<CronTickResult>(async () => {
    const current = await store.get(jobId);
    if (!current) return { outcome: 'dropped', occurrenceId: run.occurrence_id, reason: 'removed' };
    // The spend joins the job's totals, the watch's digest is kept, a token budget pauses: in this one commit.
    const next = applyRun(current, run, pickedAt, Date.now(), { maxConsecutiveFailures: deps.config.cron.max_consecutive_failures, ...effects });
    // A failed run (or, with --notify always, a skipped one) is told to the targets as a short notice;
    // so is a pause at a token budget, after the reply of the run that reached it.
    const told = withNotice(run, next, current.state === 'scheduled' && next.state === 'paused', resolveTargets(current));
    const local = told.deliveries.some((d) => d.target === 'local' && d.status === 'pending');
    const res = await store.commitRun({
      run: told, job: next, expectedVersion: current.version,
      localEvent: local
        ? {
          text: deliveryText(told), source: 'cron', job_id: jobId, name: current.name, runner: current.script !== null ? 'script' : 'agent',
          occurrence_id: run.occurrence_id, trigger: run.trigger, due_at: run.due_at, status: run.status,
        }
        : null,
    });
    if (res.status === 'conflict') return CONFLICT;
    if (res.status === 'gone') return { outcome: 'dropped', occurrenceId: run.occurrence_id, reason: 'removed' };
    if (res.status === 'duplicate') return await finishDuplicate(store, deps, current, run.occurrence_id);
    await applyOutcome(store, current, next);
    await deliver(store, deps, res.run, next);
    return { outcome: run.status === 'skipped' ? 'skipped' : 'ran', occurrenceId: run.occurrence_id, status: run.status, ...(run.reason ? { reason: run.reason } : {}) };
  }, () => new Error(`cron job ${jobId} kept changing while its run was being recorded`));
}

/** The occurrence was committed before (a retried job): finish deliveries it may have left pending. */
async function finishDuplicate(store: CronStore, deps: WorkerDeps, job: CronJob, occurrenceId: string): Promise<CronTickResult> {
  const run = await store.getRun(job.id, occurrenceId);
  if (run) await deliver(store, deps, run, job);
  return { outcome: 'duplicate', occurrenceId };
}

/** After the commit: a job that left `scheduled` (paused after failures, completed by `--repeat`) loses its job scheduler. */
async function applyOutcome(store: CronStore, before: CronJob, after: CronJob): Promise<void> {
  if (after.state !== 'scheduled' && before.state === 'scheduled') await store.disarm(after);
}

/** Send the run's pending deliveries (the local one was written by the commit) and record their outcomes. */
async function deliver(store: CronStore, deps: WorkerDeps, run: CronRun, job: CronJob): Promise<void> {
  if (run.deliveries.some((d) => d.status === 'pending')) await store.updateRun(await deliverPending(run, job, deps));
}

/** Resolve after `ms` (at once when not positive), or when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return sleepUntil(Date.now() + ms, signal);
}
