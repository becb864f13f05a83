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
 *  - At the due time the job's record is read again (one read, no lock or claim round trip: sent by the due
 *    instant's timer for every occurrence of the instant, before any of them waits for a turn slot) and
 *    decides as the gate would: a pause, an edit or a removal made before the due time still stops the
 *    occurrence (its claim is forgotten, `CronStore.unclaim`, its lock released, and the gate decides as
 *    without a lead). A turn that gets its slot more than `DUE_READ_FRESH_MS` (1 s) after that read
 *    answered reads the record again, so no run starts more than a second after `pause` or `remove`
 *    returned (within that second it may: the occurrence was due before them). A `/stop` between the claim and
 *    the turn's start stops the turn as it starts (`TurnTracker.claimedAhead`).
 *  - The claims of one due time are spread ahead of it: the k-th occurrence held for a due time is claimed
 *    `floor(k / CLAIM_BATCH) × CLAIM_BATCH × CLAIM_SPACING_MS` earlier than `worker.claim_lead_ms` before it
 *    (no earlier than it was fetched), so a top-of-the-hour burst's claims are done before its instant
 *    instead of spilling past it. One occurrence alone is claimed `claim_lead_ms` ahead, as before.
 *  - The turn starts at the due time, never before; its lateness is taken when it really starts.
 *  - The overlap lock is taken in the claim's script (`claim-cron-occurrence-5.lua`): both or neither. A claim that
 *    does not answer `ok` has taken no lock; the gate decides at the due time.
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
import { callAt } from '../runtime/sleep-until.ts';
import type { WorkerDeps } from '../worker-deps.ts';

/** A claim made ahead that answered `ok`: what the occurrence's plan runs on at the due time. */
export interface CronClaimedAhead {
  record: CronJob;
  /** The occurrence's attempt, as the claim counted it. */
  attempt: number;
  /** Entries of the occurrence's turn journal when it was claimed (0: the turn opens none). */
  journalEntries: number;
  /** The job's overlap lock (`null`: `--overlap allow`). */
  lock: HeldLock | null;
  /**
   * The job's record read at the due time (the rule above): sent by the due instant's timer, for every
   * occurrence of the instant in one write, whether or not its turn has a slot yet; sent again when asked
   * once its answer is older than {@link DUE_READ_FRESH_MS}, or when asked before the timer fired. Never
   * sent before the due time.
   */
  recordAtDue: () => Promise<CronJob | null>;
  /** Cancel the read at the due time (the occurrence ends before it). */
  cancel: () => void;
}

/** Held occurrences' claims (the rule above); the record read at the fetch is the claim's own. */
const ahead = new WorkAhead<Promise<CronJob | null>, CronClaimedAhead>();

/** Claims made together, one step earlier than the batch after them (the spread, rule above). */
const CLAIM_BATCH = 64;
/**
 * What one claim costs this process and Redis, ms, with room (about 0.1 ms measured at a 10,000-occurrence
 * burst, `ops/bench/top-of-hour.ts`): the spread's step per claim.
 */
const CLAIM_SPACING_MS = 0.25;
/** Occurrences held for each due time (epoch ms) so far: their place in the spread. */
const heldForDueAt = new Map<number, number>();

/**
 * When to claim the next occurrence held for `dueAt` (the spread, rule above): each call counts one more.
 * @param leadMs - `worker.claim_lead_ms`
 * @returns epoch ms (may be past: then it is claimed at once)
 */
export function spreadClaimAt(dueAt: number, leadMs: number): number {
  const k = heldForDueAt.get(dueAt) ?? 0;
  if (k === 0 && heldForDueAt.size >= 64) {
    const now = Date.now();
    for (const at of heldForDueAt.keys()) if (at < now) heldForDueAt.delete(at);
  }
  heldForDueAt.set(dueAt, k + 1);
  return dueAt - leadMs - Math.floor(k / CLAIM_BATCH) * CLAIM_BATCH * CLAIM_SPACING_MS;
}

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
  ahead.set(deps, job, read, spreadClaimAt(dueAt, leadMs), (r) => claimAhead(deps, job, dueAt, r, lockHeld));
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
  const sessionId = cronSessionId(record.id);
  const occurrenceId = cronOccurrenceId(record.id, dueAt, 'schedule');
  const locked = record.overlap !== 'allow';
  // Registered before the claim is sent, so a `/stop` that comes while it is in flight is not missed.
  deps.turns.claimedAhead(holder, sessionId, occurrenceId);
  let claim: Awaited<ReturnType<WorkerDeps['cron']['claim']>>;
  try {
    holdWritesThisTurn(deps.redis);
    // The turn lock is taken in the claim's script, set to last past the due time and renewed from then
    // (`SessionLock.ttlFrom`): no renewals through the lead. Busy, neither is taken: the gate decides at the due time.
    claim = await deps.cron.claim({
      jobId: record.id,
      occurrenceId,
      holder,
      generation: job.data.generation,
      manual: false,
      dueAt,
      ...(locked ? { lockTtlMs: deps.lock.ttlFrom(dueAt) } : {}),
    });
  } catch (err) {
    deps.turns.forgetClaimedAhead(holder);
    // The script may have taken the lock before its answer was lost.
    if (locked) await deps.lock.adopt(sessionId, holder, dueAt).release();
    throw err;
  }
  if (claim.status === 'ok') {
    const lock = locked ? deps.lock.adopt(sessionId, holder, dueAt) : null;
    return { record, attempt: claim.attempt, journalEntries: claim.journalEntries, lock, ...readAtDue(deps, record.id, dueAt) };
  }
  deps.turns.forgetClaimedAhead(holder);
  return undefined;
}

/**
 * How old the answer of the read the due instant sent may be when the turn takes it, ms: a turn that waited
 * longer for a slot reads the record again (the rule above).
 */
export const DUE_READ_FRESH_MS = 1000;

/** The record's read at `dueAt`, sent by the instant's timer (`CronClaimedAhead.recordAtDue`). */
function readAtDue(deps: WorkerDeps, jobId: string, dueAt: number): Pick<CronClaimedAhead, 'recordAtDue' | 'cancel'> {
  let read: Promise<CronJob | null> | undefined;
  let answeredAt = Infinity;
  const send = () => {
    holdWritesThisTurn(deps.redis); // the reads of one instant leave in one write
    answeredAt = Infinity;
    read = deps.cron.get(jobId);
    read.then(
      () => (answeredAt = Date.now()),
      () => {}, // told where it is taken
    );
    return read;
  };
  const cancel = callAt(dueAt, () => void send());
  return {
    recordAtDue: () => {
      cancel();
      return read && Date.now() - answeredAt <= DUE_READ_FRESH_MS ? read : send();
    },
    cancel,
  };
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
