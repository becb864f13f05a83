/**
 * Runs one cron occurrence: a `cron-tick` job of the `ticks` queue.
 *
 * The path of a tick, in order:
 *  1. Which occurrence: due time from the scheduler job id
 *     (`repeat:cron:<id>:<millis>`) or the job data (one-shot, manual run).
 *  2. Decide (pure, scheduler/cron/misfire.ts): wait until due (never early),
 *     drop (removed, paused, completed, edited, coalesced), run (on time, late,
 *     or as the single catch-up) or skip (beyond the grace window with
 *     `--misfire skip`).
 *  3. Overlap: one run per job across the fleet through the turn lock of the
 *     job's session `cron:<id>`; when busy, `skip` records a skipped run,
 *     `queue` defers the tick, `allow` runs anyway.
 *  4. Claim the occurrence (Lua: still scheduled in this generation, nobody
 *     else holds it) — the point after which a pause or remove no longer stops it.
 *  5. Run a fresh turn with only the job's prompt (agent), or its `--script`
 *     (command turn, `cron.script_timeout_seconds`). A turn cut by the drain
 *     deadline is not recorded: the job is handed back, and the next worker
 *     to take it claims the occurrence again as its next attempt.
 *  6. Commit run record + job state + local delivery once per occurrence (Lua),
 *     then send the other deliveries and record their outcomes.
 * A retried or duplicated job finds the claim or the commit marker and neither
 * runs nor delivers the occurrence again.
 */
import { DelayedError, type Job } from 'bullmq';
import { TurnError } from '../scheduler/errors/turn-error.ts';
import { periodAt } from '../scheduler/cron/cron-engine.ts';
import {
  applyRun, cronOccurrenceId, cronSessionId, deliveryText, withReply,
  type CronDelivery, type CronJob, type CronRun, type OccurrenceTrigger,
} from '../scheduler/cron/cron-job.ts';
import type { CronStore, CronTickData } from '../scheduler/cron/cron-store.ts';
import { cronStoreFor } from '../scheduler/services.ts';
import { withNotice } from '../scheduler/cron/cron-notice.ts';
import { decideOccurrence } from '../scheduler/cron/misfire.ts';
import { schedulerJobMillis } from '../scheduler/queues.ts';
import type { WorkerDeps } from './worker-deps.ts';
import { deferJob } from '../scheduler/defer-job.ts';
import { sleepUntil } from './sleep-until.ts';
import type { HeldLock } from './session-lock.ts';
import { deliverPending, resolveTargets } from './cron-delivery.ts';
import { sessionEventSink } from './turn-events.ts';

/** What happened to a tick (the job's return value, for logs and tests). */
export interface CronTickResult {
  outcome: 'ran' | 'skipped' | 'dropped' | 'duplicate';
  occurrenceId: string;
  reason?: string;
  status?: CronRun['status'];
}

/** Longest wait inside a processor before an early job is put back as delayed. */
export const MAX_IN_PROCESS_WAIT_MS = 30_000;

const stores = new WeakMap<WorkerDeps, CronStore>();

function storeFor(deps: WorkerDeps): CronStore {
  let store = stores.get(deps);
  if (!store) {
    store = cronStoreFor(deps.config, deps);
    stores.set(deps, store);
  }
  return store;
}

/**
 * Process a `cron-tick` job (called by the `ticks` worker for `job.data.type === 'cron-tick'`).
 *
 * @param token - the worker's lock token of `job` (needed to put an early job back as delayed)
 * @param signal - the job's abort signal, if any; aborts the turn
 * @returns what happened; resolves after the run is committed and delivered
 * @throws DelayedError after moving a job that came too early (or found its job busy with
 *   `--overlap queue`) back to delayed; TurnError for a network failure that BullMQ retries
 */
export async function processCronTick(
  job: Job<CronTickData>,
  token: string | undefined,
  signal: AbortSignal | undefined,
  deps: WorkerDeps,
): Promise<CronTickResult> {
  const store = storeFor(deps);
  const pickedAt = Date.now();
  const data = job.data;
  const trigger: OccurrenceTrigger = data.manual ? 'manual' : 'schedule';
  const dueAt = data.dueAt ?? schedulerJobMillis(job.id) ?? job.timestamp;
  const occurrenceId = cronOccurrenceId(data.jobId, dueAt, trigger);
  const holder = job.id ?? occurrenceId;
  const log = deps.log.child({ cronJobId: data.jobId, occurrenceId });
  const grace = {
    graceMinMs: deps.config.cron.misfire_grace_min_seconds * 1000,
    graceMaxMs: deps.config.cron.misfire_grace_max_seconds * 1000,
  };

  if (deps.turns.draining && token) {
    // Drain policy (as for `/v1` runs and loop ticks): a paused worker still gets the job of a fetch
    // in flight when it paused; an occurrence not claimed yet goes back to the queue at once for
    // another worker (its attempt count untouched), instead of starting a run the drain deadline would cut.
    log.info('cron tick handed back before it started: this worker is draining');
    return await deferJob(job, token, 0);
  }
  // 1–2: decide; wait (in capped steps) until due.
  let record: CronJob | null;
  let decision: ReturnType<typeof decideOccurrence>;
  for (;;) {
    record = await store.get(data.jobId);
    decision = decideOccurrence({
      job: record, dueAt, generation: data.generation, trigger,
      periodMs: record ? periodAt(record.schedule, record.tz, dueAt) : undefined, now: Date.now(), grace,
    });
    if (decision.action !== 'wait') break;
    const waitMs = decision.untilMs - Date.now();
    if ((waitMs > MAX_IN_PROCESS_WAIT_MS || deps.turns.draining) && token) {
      log.debug({ dueAt }, 'cron tick picked up early; delayed until due');
      return await deferJob(job, token, decision.untilMs - Date.now());
    }
    await sleep(Math.min(waitMs, MAX_IN_PROCESS_WAIT_MS), signal);
    if (signal?.aborted) return { outcome: 'dropped', occurrenceId, reason: 'aborted' };
  }
  if (decision.action === 'drop' && record && (await store.getRun(record.id, occurrenceId))) {
    // A retry of an occurrence that was committed: only finish deliveries it may have left pending.
    return await finishDuplicate(store, deps, record, occurrenceId);
  }
  if (decision.action === 'drop' || !record) {
    log.info({ reason: decision.action === 'drop' ? decision.reason : 'removed' }, 'cron occurrence dropped');
    return { outcome: 'dropped', occurrenceId, reason: decision.action === 'drop' ? decision.reason : 'removed' };
  }

  // 3: overlap.
  let lock: HeldLock | null = null;
  if (record.overlap !== 'allow') {
    lock = await deps.lock.acquire(cronSessionId(record.id), holder);
    if (!lock) {
      if (record.overlap === 'queue' && token) {
        return await deferJob(job, token, deps.config.worker.defer_ms);
      }
      return await recordSkip(store, deps, job, record, { occurrenceId, dueAt, trigger, holder, pickedAt, reason: 'overlap', latenessMs: Date.now() - dueAt });
    }
  }

  try {
    // 4: claim.
    const startedAt = Date.now();
    const claim = await store.claim({
      jobId: record.id, occurrenceId, holder, generation: data.generation, manual: trigger === 'manual', dueAt, skip: decision.action === 'skip',
    });
    if (claim.status !== 'ok') {
      if (claim.status === 'done') return await finishDuplicate(store, deps, record, occurrenceId);
      log.info({ reason: claim.status }, 'cron occurrence not claimed');
      return { outcome: 'dropped', occurrenceId, reason: claim.status };
    }
    if (decision.action === 'skip') {
      log.info({ latenessMs: decision.latenessMs, graceMs: decision.graceMs }, 'cron occurrence missed its grace window; skipped (--misfire skip)');
      return await commit(store, deps, record.id, baseRun(record, {
        occurrenceId, dueAt, trigger: 'schedule', status: 'skipped', reason: 'misfire', latenessMs: decision.latenessMs, workerId: deps.workerId,
        attempts: claim.attempt,
      }), pickedAt);
    }

    // 5: the turn.
    const run = baseRun(record, {
      occurrenceId, dueAt, trigger: trigger === 'manual' ? 'manual' : decision.catchUp ? 'catch-up' : 'schedule',
      status: 'ok', reason: null, latenessMs: Math.max(0, startedAt - dueAt), workerId: deps.workerId, attempts: claim.attempt,
    });
    run.started_at = startedAt;
    run.late = decision.late;
    log.info({ trigger: run.trigger, latenessMs: run.lateness_ms, late: run.late, attempt: claim.attempt }, 'cron run started');
    if (trigger !== 'manual') deps.metrics?.tickLateness.observe({ kind: 'cron' }, run.lateness_ms / 1000);
    let lockLost = false;
    try {
      const reply = await deps.turns.run(holder, 'scheduled', async (turnSignal, turn) => {
        try {
          return await runTurn(record!, occurrenceId, dueAt, turnSignal, deps);
        } catch (err) {
          // Drain policy (SPEC §9): a run cut by the drain deadline was never
          // completed, so it is not recorded; the job goes back to the queue
          // (this worker is paused) and another worker runs it as its next
          // attempt, under the same claim holder.
          if (turn.abortedByDrain) {
            log.warn({ attempt: claim.attempt }, 'cron run aborted by drain; handed back for another worker');
            return await deferJob(job, token, 0);
          }
          if (turn.lockLost) lockLost = true;
          throw err;
        }
      }, signal);
      Object.assign(run, withReply(run, reply)); // the record keeps a capped copy; targets get it whole
    } catch (err) {
      if (err instanceof DelayedError || lockLost) throw err; // handed back, or another worker has the job now
      const turnError = err instanceof TurnError ? err : new TurnError((err as Error).message, { kind: 'model', cause: err });
      if (turnError.retryable && job.attemptsMade + 1 < (job.opts.attempts ?? 1)) {
        log.warn({ attempt: job.attemptsMade + 1, error: turnError.message }, 'cron run could not reach the model; retrying with backoff');
        throw turnError;
      }
      run.status = 'error';
      run.error = turnError.message;
    }
    run.finished_at = Date.now();
    deps.metrics?.turnFinished('cron', run.status === 'ok' ? 'ok' : 'failed', (run.finished_at - startedAt) / 1000);
    run.deliveries = run.status === 'ok'
      ? resolveTargets(record).map((target): CronDelivery => ({ target, status: run.silent ? 'silent' : 'pending' }))
      : [];
    const result = await commit(store, deps, record.id, run, pickedAt);
    log.info({ status: run.status, durationMs: run.finished_at - startedAt, silent: run.silent }, 'cron run finished');
    return result;
  } finally {
    await lock?.release();
  }
}

/** Run the job's turn: a fresh turn with only its prompt, or its script. @returns the reply */
async function runTurn(job: CronJob, occurrenceId: string, dueAt: number, signal: AbortSignal, deps: WorkerDeps): Promise<string> {
  const sessionId = cronSessionId(job.id);
  const messages = [{ role: 'user' as const, content: job.prompt }];
  if (job.script !== null) {
    const runner = deps.runners.script(job.script, deps.config.cron.script_timeout_seconds * 1000);
    return (await runner.run({
      sessionId, messages, signal,
      env: { HERMES_CRON_JOB_ID: job.id, HERMES_CRON_OCCURRENCE_ID: occurrenceId, HERMES_CRON_DUE_AT: new Date(dueAt).toISOString() },
    })).reply;
  }
  const out = await deps.runners.agent.run({ sessionId, messages, signal, surface: 'cron', onEvent: sessionEventSink(deps, sessionId, { occurrenceId }) });
  return out.reply;
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
    output: null, error: null, silent: false, deliveries: [], worker_id: f.workerId,
  };
}

/** Record a skipped occurrence (claimed first, so a run of the same occurrence elsewhere wins). */
async function recordSkip(
  store: CronStore,
  deps: WorkerDeps,
  job: Job<CronTickData>,
  record: CronJob,
  f: { occurrenceId: string; dueAt: number; trigger: OccurrenceTrigger; holder: string; pickedAt: number; reason: string; latenessMs: number },
): Promise<CronTickResult> {
  const claim = await store.claim({
    jobId: record.id, occurrenceId: f.occurrenceId, holder: f.holder, generation: job.data.generation, manual: f.trigger === 'manual', dueAt: f.dueAt,
    skip: true,
  });
  if (claim.status !== 'ok') return { outcome: claim.status === 'done' ? 'duplicate' : 'dropped', occurrenceId: f.occurrenceId, reason: claim.status };
  deps.log.info({ cronJobId: record.id, occurrenceId: f.occurrenceId }, 'cron occurrence skipped: the previous run is still going (--overlap skip)');
  const run = baseRun(record, {
    occurrenceId: f.occurrenceId, dueAt: f.dueAt, trigger: f.trigger === 'manual' ? 'manual' : 'schedule',
    status: 'skipped', reason: f.reason, latenessMs: f.latenessMs, workerId: deps.workerId, attempts: claim.attempt,
  });
  return await commit(store, deps, record.id, run, f.pickedAt);
}

/** Commit with the version check (re-read and re-apply on conflict), then deliver. */
async function commit(store: CronStore, deps: WorkerDeps, jobId: string, run: CronRun, pickedAt: number): Promise<CronTickResult> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const current = await store.get(jobId);
    if (!current) return { outcome: 'dropped', occurrenceId: run.occurrence_id, reason: 'removed' };
    const next = applyRun(current, run, pickedAt, Date.now(), { maxConsecutiveFailures: deps.config.cron.max_consecutive_failures });
    // A failed run (or, with --notify always, a skipped one) is told to the targets as a short notice.
    const told = withNotice(run, next, current.state === 'scheduled' && next.state === 'paused', resolveTargets(current));
    const local = told.deliveries.some((d) => d.target === 'local' && d.status === 'pending');
    const res = await store.commitRun({
      run: told, job: next, expectedVersion: current.version,
      localEvent: local
        ? { text: deliveryText(told), source: 'cron', job_id: jobId, occurrence_id: run.occurrence_id, trigger: run.trigger, due_at: run.due_at }
        : null,
    });
    if (res.status === 'conflict') continue;
    if (res.status === 'gone') return { outcome: 'dropped', occurrenceId: run.occurrence_id, reason: 'removed' };
    if (res.status === 'duplicate') return await finishDuplicate(store, deps, current, run.occurrence_id);
    if (next.state !== 'scheduled' && current.state === 'scheduled') await store.disarm(next);
    if (res.run.deliveries.some((d) => d.status === 'pending')) await store.updateRun(await deliverPending(res.run, next, deps));
    return { outcome: run.status === 'skipped' ? 'skipped' : 'ran', occurrenceId: run.occurrence_id, status: run.status, ...(run.reason ? { reason: run.reason } : {}) };
  }
  throw new Error(`cron job ${jobId} kept changing while its run was being recorded`);
}

/** The occurrence was committed before (a retried job): finish deliveries it may have left pending. */
async function finishDuplicate(store: CronStore, deps: WorkerDeps, job: CronJob, occurrenceId: string): Promise<CronTickResult> {
  const run = await store.getRun(job.id, occurrenceId);
  if (run && run.deliveries.some((d) => d.status === 'pending')) await store.updateRun(await deliverPending(run, job, deps));
  return { outcome: 'duplicate', occurrenceId };
}

/** Resolve after `ms` (at once when not positive), or when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return sleepUntil(Date.now() + ms, signal);
}
