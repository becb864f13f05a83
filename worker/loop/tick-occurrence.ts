/**
 * The facts of a loop or heartbeat tick shared by its plan (`tick-processor.ts`) and its claim made
 * ahead (`claim-ahead.ts`): the occurrence a job stands for, what the gate decides over, and the
 * claim script's input.
 */
import type { Job } from 'bullmq';
import { decideFire, earlierOpenSlot, type FireDecision, type LoopRecord } from '../../scheduler/loop/loop-state.ts';
import { schedulerJobMillis } from '../../scheduler/store/queues.ts';
import type { GateRead as StoredGateRead, InflightMark } from '../../scheduler/loop/tick-claim.ts';
import type { TickJobData } from '../../scheduler/loop/tick-job.ts';
import { lazyChild } from '../../scheduler/logger.ts';
import { goalHoldsSession, type GoalRecord } from '../../scheduler/goal/goal-state.ts';
import type { WorkerDeps } from '../worker-deps.ts';

/** The occurrence a tick job stands for. */
export interface Tick {
  sessionId: string;
  kind: TickJobData['kind'];
  loopId: string;
  /** Epoch ms the occurrence is due. */
  dueAt: number;
  occurrenceId: string;
  /** The BullMQ job id: holder of the session's turn lock and of the in-flight mark. */
  jobId: string;
  log: WorkerDeps['log'];
}

/** What the gate decides over: the record, the goal, the pending input, and the fire decision. */
export interface TickGateRead {
  loop: LoopRecord | null;
  goal: GoalRecord | null;
  pendingCount: number;
  fire: FireDecision;
  /** Some pending input is there to be taken first (looked at only when the tick could fire). */
  inputPending: boolean;
  goalHoldsSession: boolean;
}

/** The tick of `job` (its data completed at fetch, `tickJobData`). */
export function tickOf(deps: WorkerDeps, job: Job<TickJobData>): Tick {
  const { sessionId, kind, loopId } = job.data;
  const { dueAt, occurrenceId } = deps.loops.occurrenceOf(job);
  const log = lazyChild(deps.log, { sessionId, kind, loopId, occurrenceId });
  return { sessionId, kind, loopId, dueAt, occurrenceId, jobId: job.id!, log };
}

/** The gate's facts over one stored read; `inputPending` as given (the caller looked closer, or there is none). */
export function gateFacts(tick: Tick, stored: StoredGateRead, inputPending = false): TickGateRead {
  const { loop, pendingCount, goal } = stored;
  const fire = decideFire(loop, { loopId: tick.loopId, dueAt: tick.dueAt, occurrenceId: tick.occurrenceId });
  return { loop, goal, pendingCount, fire, inputPending: fire.fire && inputPending, goalHoldsSession: goalHoldsSession(goal) };
}

/**
 * The claim script (`TickClaim.claimTick`; its rule: `claim-tick-8.lua`), over what the gate read.
 * `ahead`: made before the due time (`claim-ahead.ts`); `tick.started` then says so, its start being the due time.
 */
export async function claimTick(deps: WorkerDeps, tick: Tick, read: TickGateRead, mark: InflightMark, ahead = false) {
  const { lock_duration_ms: lockMs, max_stalled_count: stalls } = deps.config.worker;
  return await deps.loops.claimTick(tick.sessionId, tick.kind, {
    expectedVersion: read.loop!.version,
    goalVersion: read.goal?.version ?? null,
    pendingCount: read.pendingCount,
    mark,
    ttlMs: lockMs * (stalls + 2) + 60_000,
    lock: { holder: tick.jobId, ttlMs: deps.lock.ttlMs },
    started: {
      kind: tick.kind,
      tick: mark.tick,
      occurrenceId: tick.occurrenceId,
      dueAt: tick.dueAt,
      startedAt: mark.startedAt,
      latenessMs: mark.startedAt - tick.dueAt,
      ...(ahead ? { claimedAhead: true } : {}),
      worker: deps.workerId,
      pid: process.pid,
    },
    // A command turn runs on its new input alone (its stdin): the script does not read the transcript for it.
    readTranscript: read.loop!.runner.kind !== 'command',
  });
}

/** Longest a tick yields to an earlier one past its own due time, in its loop's intervals (`earlierTickWaiting`). */
export const YIELD_MAX_INTERVALS = 2;
/** The same in deferrals (`worker.defer_ms`: the earlier tick comes back after one), when that is longer. */
export const YIELD_MAX_DEFERRALS = 4;
/** Most earlier slots a tick looks at, from the first open one on (`earlierTickWaiting`): one job state each, sent at once. */
export const YIELD_MAX_SLOTS = 16;

/**
 * Whether the tick should yield to the job of an earlier occurrence of its loop, one that may still fire
 * (`earlierOpenSlot`) and is still in the queue (`active`, `waiting`, `delayed`, `prioritized`: held, in its
 * gate, or deferred behind the busy session, as the tick itself would be; `yieldToEarlierTick`, tick-gate.ts).
 * Bounded, so that a job that never comes — held by a worker cut off from its Redis until the stall check
 * takes it back — cannot hold the loop: not once the tick is past its due time by more than
 * {@link YIELD_MAX_INTERVALS} intervals or {@link YIELD_MAX_DEFERRALS} deferrals, whichever is longer. The
 * job states of that slot and of each slot after it before this tick's (at most {@link YIELD_MAX_SLOTS}), sent at
 * once, and only when the loop's last tick leaves such a slot before this one; for a job of the loop's job
 * scheduler only, whose jobs are named by their time (`repeat:<scheduler>:<millis>`, the prefetch lead taken
 * off the due time). A slot without a job (left out by the job scheduler) is no reason to wait, but the job of a
 * slot after it, still queued, is: a job picked up late leaves out the slot after it, and the tick after that
 * one, deferred behind the busy session, would otherwise be covered by a later tick.
 * @param loop - the record the tick's gate read (`null`: removed, nothing to yield to)
 * @param now - epoch ms the bound is measured at
 * @returns true when the tick should be deferred; a Redis error is thrown to the caller (the occurrence pipeline's)
 */
export async function earlierTickWaiting(
  deps: WorkerDeps,
  job: Job<TickJobData>,
  tick: Tick,
  loop: LoopRecord | null,
  now = Date.now(),
): Promise<boolean> {
  const slot = loop ? earlierOpenSlot(loop, tick.dueAt) : undefined;
  const millis = schedulerJobMillis(job.id);
  if (slot === undefined || millis === undefined) return false;
  const boundMs = Math.max(YIELD_MAX_INTERVALS * loop!.intervalSeconds! * 1000, YIELD_MAX_DEFERRALS * deps.config.worker.defer_ms);
  if (now > tick.dueAt + boundMs) return false;
  // That slot and each one after it before this tick's: a slot left out by the job scheduler has no job, and
  // the job of the slot after it may still be waiting (deferred behind the busy session).
  const intervalMs = loop!.intervalSeconds! * 1000;
  const ids: string[] = [];
  for (let at = slot; at < tick.dueAt && ids.length < YIELD_MAX_SLOTS; at += intervalMs)
    ids.push(`${job.id!.slice(0, job.id!.lastIndexOf(':') + 1)}${at - (tick.dueAt - millis)}`);
  const ticks = deps.queues.forSession(tick.sessionId).ticks;
  const states = await Promise.all(ids.map((id) => ticks.getJobState(id)));
  return states.some((state) => state === 'active' || state === 'waiting' || state === 'delayed' || state === 'prioritized');
}
