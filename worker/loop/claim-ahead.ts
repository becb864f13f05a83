/**
 * Claim ahead: a held loop or heartbeat tick (fetched `worker.prefetch_lead_ms` before it is due,
 * `scheduler/loop/prefetch-lead.ts`) has its gate read when it is fetched and its claim made
 * `worker.claim_lead_ms` before its due time, so that at the due time its turn starts at once
 * instead of a claim round trip later — in an aligned burst, instead of behind the claims of the
 * whole burst on Redis' one thread.
 *
 * The rule, written here only:
 *  - The claim is the claim of `claim-tick-8.lua`, over the read made ahead: the session's turn
 *    lock, the in-flight mark, the `tick.started` event and the transcript. It is made only when
 *    that read decides `fire` with no pending input; any other read, or a claim that does not
 *    answer `ok`, leaves the tick to the gate and claim at its due time, as without a lead (a lock
 *    the claim took is released first).
 *  - The claim is the point the tick is ordered at. Input that comes after it waits for the turn's
 *    commit, as input that comes a moment after a claim at the due time does (the turn lock is
 *    held from the claim); a `/stop` after it stops the turn (`TurnTracker.claimedAhead`): the
 *    tick is recorded as stopped and never reaches the model.
 *  - The turn starts at the due time, never before (the held ticket wakes then, `JobTicket`):
 *    the `tick.started` event and the in-flight mark say the due time as the start; the turn's
 *    lateness is taken when it really starts.
 *  - A tick handed back by the drain before its due time releases the turn lock its claim took;
 *    its mark and its `tick.started` event stay (the occurrence is the same; whoever takes the job
 *    claims it again as its own retry, `claim-tick-8.lua`). A tick whose job lock was lost leaves
 *    both to the worker that has the job now.
 * Measured effect: docs/BENCHMARKS.md, "Claim ahead".
 */
import type { Job } from 'bullmq';
import type { GateRead as StoredGateRead, InflightMark } from '../../scheduler/loop/tick-claim.ts';
import type { TranscriptMessage } from '../../scheduler/session/session-store.ts';
import type { TickJobData } from '../../scheduler/loop/tick-job.ts';
import type { HeldLock } from '../runtime/session-lock.ts';
import { WorkAhead } from '../occurrence/work-ahead.ts';
import { claimTick, earlierTickWaiting, gateFacts, tickOf, type TickGateRead } from './tick-occurrence.ts';
import { decideGate } from './tick-gate.ts';
import type { WorkerDeps } from '../worker-deps.ts';

/** A claim made ahead that answered `ok`: what the tick's plan fires on at the due time. */
export interface ClaimedAhead {
  read: TickGateRead;
  mark: InflightMark;
  transcript: TranscriptMessage[];
  /** Entries of the occurrence's journal, as the claim found them (`ClaimTickResult`). */
  journalEntries: number;
  lock: HeldLock;
}

/** Held ticks' gate reads and claims (the rule above). */
const ahead = new WorkAhead<Promise<StoredGateRead>, ClaimedAhead>();

/**
 * Start the gate's read of a tick fetched before its due time, so that its claim is sent without a
 * read first, and set the claim for `worker.claim_lead_ms` before the due time (the rule above).
 * The read is used only when it decides `fire`: the claim script checks the record's version, the
 * goal's and the pending input's count against it (`claim-tick-8.lua`), so a read that went stale
 * ends in a fresh read, never in a wrong turn; any other decision is taken over a read at the due time.
 */
export function readAhead(deps: WorkerDeps, job: Job<TickJobData>, lockHeld: () => boolean | Promise<boolean> = () => true): void {
  const read = deps.loops.readGate(job.data.sessionId, job.data.kind);
  read.catch(() => {}); // a failed read is read again at the due time
  const leadMs = deps.config.worker.claim_lead_ms;
  const claimAt = leadMs > 0 ? deps.loops.occurrenceOf(job).dueAt - leadMs : undefined;
  ahead.set(deps, job, read, claimAt, (r) => claimAhead(deps, job, r, lockHeld));
}

/**
 * What was done ahead for `job` (at its due time, once): the read, and the claim if it was made.
 * A claim still in flight is waited for.
 */
export function takeAhead(job: Job): Promise<{ read: Promise<StoredGateRead>; claimed: ClaimedAhead | undefined } | undefined> {
  return ahead.take(job);
}

/** The tick ends without its turn (`WorkAhead.drop`). */
export function dropAhead(job: Job, handedBack: boolean): Promise<void> {
  return ahead.drop(job, handedBack);
}

async function claimAhead(
  deps: WorkerDeps,
  job: Job<TickJobData>,
  readP: Promise<StoredGateRead>,
  lockHeld: () => boolean | Promise<boolean>,
): Promise<ClaimedAhead | undefined> {
  // A job whose lock lapsed (its process starved past the claim time) may be another worker's now, claimed
  // by it already under the same holder (the job id): not claimed here. Its ticket lets it go at the due time.
  if (!(await lockHeld())) return undefined;
  const stored = await readP;
  const tick = tickOf(deps, job);
  const read = gateFacts(tick, stored);
  // Only a plain `fire` is claimed ahead; pending input and every other decision are taken at the due time.
  if (read.pendingCount > 0 || decideGate(read, { deferMs: deps.config.worker.defer_ms }).action !== 'fire') return undefined;
  if (deps.turns.draining) return undefined;
  // An earlier occurrence's job still waiting goes first (`yieldToEarlierTick`): decided at the due time.
  if (await earlierTickWaiting(deps, job, tick, read.loop)) return undefined;
  const mark: InflightMark = {
    occurrenceId: tick.occurrenceId,
    jobId: tick.jobId,
    startedAt: tick.dueAt, // the turn starts at the due time (the rule above)
    tick: read.loop!.ticksUsed + 1,
    workerId: deps.workerId,
  };
  // Registered before the claim is sent, so a `/stop` that comes while it is in flight is not missed.
  deps.turns.claimedAhead(tick.jobId, tick.sessionId, tick.occurrenceId);
  let answer: Awaited<ReturnType<typeof claimTick>>;
  try {
    answer = await claimTick(deps, tick, read, mark, true);
  } catch (err) {
    deps.turns.forgetClaimedAhead(tick.jobId); // not claimed ahead: the due time claims it (or the error is told there)
    throw err;
  }
  if (answer.status === 'ok')
    return {
      read,
      mark,
      transcript: answer.transcript,
      journalEntries: answer.journalEntries,
      lock: deps.lock.adopt(tick.sessionId, tick.jobId),
    };
  deps.turns.forgetClaimedAhead(tick.jobId);
  // `changed` and `inflight` leave the turn lock held by this job: released, the due time decides again.
  if (answer.status !== 'busy') await deps.lock.adopt(tick.sessionId, tick.jobId).release();
  return undefined;
}
