/**
 * The facts of a loop or heartbeat tick shared by its plan (`tick-processor.ts`) and its claim made
 * ahead (`claim-ahead.ts`): the occurrence a job stands for, what the gate decides over, and the
 * claim script's input.
 */
import type { Job } from 'bullmq';
import { decideFire, type FireDecision, type LoopRecord } from '../scheduler/loop/loop-state.ts';
import type { GateRead as StoredGateRead, InflightMark } from '../scheduler/loop/tick-claim.ts';
import type { TickJobData } from '../scheduler/loop/tick-job.ts';
import { lazyChild } from '../scheduler/logger.ts';
import { goalHoldsSession, type GoalRecord } from '../scheduler/goal/goal-state.ts';
import type { WorkerDeps } from './worker-deps.ts';

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
 * The claim script (`TickClaim.claimTick`; its rule: `claim-tick-7.lua`), over what the gate read.
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
