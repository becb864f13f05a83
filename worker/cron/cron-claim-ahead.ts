/**
 * Claim ahead for cron: a scheduled occurrence held until due (it came by `cron.prefetch_lead_ms`,
 * `scheduler/cron/repeat-strategy.ts`) has its job's record read when it is fetched, and its overlap
 * lock and claim taken `worker.claim_lead_ms` before its due time, so that at the due time its turn
 * starts at once — in a top-of-the-hour burst, instead of behind the reads, locks and claims of the
 * whole burst on Redis' one thread.
 *
 * The rule, written here only (the loop tick's own: `worker/loop/claim-ahead.ts`):
 *  - Only a plain scheduled occurrence is claimed ahead: one that the read decides to run on time
 *    (`decideOccurrence` at its due time), of a job whose `--overlap` is `skip`, `queue` or `allow`,
 *    with the job's lock free. Anything else — a catch-up, a backfill, a run after another job's,
 *    `buffer_all` and `cancel_other`, a busy job, a paused or edited one, a worker draining — is
 *    decided at the due time by the gate, as without a lead.
 *  - At the due time the job's record is read again (one read, no lock or claim round trip) and decides
 *    as the gate would: a pause, an edit or a removal made before the due time still stops the
 *    occurrence (its claim is forgotten, `CronStore.unclaim`, its lock released, and the gate decides as
 *    without a lead); no run starts after `pause` or `remove` returned. A `/stop` between the claim and
 *    the turn's start stops the turn as it starts (`TurnTracker.claimedAhead`).
 *  - The turn starts at the due time, never before; its lateness is taken when it really starts.
 *  - A claim that does not answer `ok` releases the lock it took; the gate decides at the due time.
 *    An occurrence handed back by the drain before its due time releases the lock; its claim stays,
 *    and whoever takes the job claims it again as its own retry (the holder is the BullMQ job).
 */
import type { Job } from 'bullmq';
import { cronSessionId, cronOccurrenceId, type CronJob } from '../../scheduler/cron/cron-job.ts';
import type { CronTickData } from '../../scheduler/cron/cron-store.ts';
import { decideOccurrence, graceSettings, type OccurrenceDecision } from '../../scheduler/cron/misfire.ts';
import { periodAt } from '../../scheduler/cron/cron-engine.ts';
import { schedulerJobMillis } from '../../scheduler/store/queues.ts';
import { holdWritesThisTurn } from '../../scheduler/store/redis/connection-factory.ts';
import type { HeldLock } from '../runtime/session-lock.ts';
import { WorkAhead } from '../occurrence/work-ahead.ts';
import type { WorkerDeps } from '../worker-deps.ts';

/** A claim made ahead that answered `ok`: what the occurrence's plan runs on at the due time. */
export interface CronClaimedAhead {
  record: CronJob;
  /** The occurrence's attempt, as the claim counted it. */
  attempt: number;
  /** The job's overlap lock (`null`: `--overlap allow`). */
  lock: HeldLock | null;
}

/** Held occurrences' claims (the rule above); the record read at the fetch is the claim's own. */
const ahead = new WorkAhead<Promise<CronJob | null>, CronClaimedAhead>();

/**
 * For a scheduled occurrence fetched before its due time: read its job's record now and set its claim for
 * `worker.claim_lead_ms` before the due time (the rule above).
 * @param dueAt - the occurrence's due time, epoch ms (`cronTickDueAt`)
 */
export function claimCronAhead(deps: WorkerDeps, job: Job<CronTickData>, dueAt: number, lockHeld: () => boolean | Promise<boolean>): void {
  const leadMs = deps.config.worker.claim_lead_ms;
  if (leadMs === 0 || !isScheduled(job)) return;
  // The fetches of a burst come together: their reads leave in one write.
  holdWritesThisTurn(deps.redis);
  const read = deps.cron.get(job.data.jobId);
  read.catch(() => {}); // read again by the gate at the due time
  ahead.set(deps, job, read, dueAt - leadMs, (r) => claimAhead(deps, job, dueAt, r, lockHeld));
}

/** What was claimed ahead for `job` (at its due time, once); a claim still in flight is waited for. */
export async function takeCronAhead(job: Job): Promise<CronClaimedAhead | undefined> {
  return (await ahead.take(job))?.claimed;
}

/** The occurrence ends without its turn here (`WorkAhead.drop`). */
export function dropCronAhead(job: Job, handedBack: boolean): Promise<void> {
  return ahead.drop(job, handedBack);
}

/** A job scheduler's scheduled occurrence (not a one-shot, manual run, backfill, catch-up or run after another job's). */
function isScheduled(job: Job<CronTickData>): boolean {
  const d = job.data;
  if (d.dueAt !== undefined || d.manual || d.backfill || d.after || d.afterAll || d.catchUp || d.follows) return false;
  return schedulerJobMillis(job.id) !== undefined;
}

async function claimAhead(
  deps: WorkerDeps,
  job: Job<CronTickData>,
  dueAt: number,
  read: Promise<CronJob | null>,
  lockHeld: () => boolean | Promise<boolean>,
): Promise<CronClaimedAhead | undefined> {
  // A job whose lock lapsed may be another worker's now (the same holder, the job id): not claimed here.
  if (deps.turns.draining || !(await lockHeld())) return undefined;
  const record = await read;
  if (!record || (record.overlap !== 'skip' && record.overlap !== 'queue' && record.overlap !== 'allow')) return undefined;
  if (onTimeRun(record, job, dueAt, deps)?.action !== 'run') return undefined;
  const holder = job.id!;
  const occurrenceId = cronOccurrenceId(record.id, dueAt, 'schedule');
  holdWritesThisTurn(deps.redis);
  const lock = record.overlap === 'allow' ? null : await deps.lock.acquire(cronSessionId(record.id), holder);
  if (record.overlap !== 'allow' && !lock) return undefined; // busy: the gate decides at the due time
  // Registered before the claim is sent, so a `/stop` that comes while it is in flight is not missed.
  deps.turns.claimedAhead(holder, cronSessionId(record.id), occurrenceId);
  let claim: Awaited<ReturnType<WorkerDeps['cron']['claim']>>;
  try {
    holdWritesThisTurn(deps.redis);
    claim = await deps.cron.claim({ jobId: record.id, occurrenceId, holder, generation: job.data.generation, manual: false, dueAt });
  } catch (err) {
    deps.turns.forgetClaimedAhead(holder);
    await lock?.release();
    throw err;
  }
  if (claim.status === 'ok') return { record, attempt: claim.attempt, lock };
  deps.turns.forgetClaimedAhead(holder);
  await lock?.release();
  return undefined;
}

/** The misfire decision at the due time over the read made ahead: `run`, on time, for an occurrence to claim ahead. */
function onTimeRun(record: CronJob, job: Job<CronTickData>, dueAt: number, deps: WorkerDeps): OccurrenceDecision | undefined {
  const decision = decideOccurrence({
    job: record,
    dueAt,
    generation: job.data.generation,
    trigger: 'schedule',
    periodMs: periodAt(record.schedule, record.tz, dueAt),
    now: dueAt,
    grace: graceSettings(deps.config.cron),
  });
  return decision.action === 'run' && !decision.late && !decision.catchUp ? decision : undefined;
}
