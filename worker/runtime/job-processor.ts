/**
 * What a kind of job registers to be run by a worker process: the queue its jobs are on, which of
 * the queue's jobs are its own, how a fetched job is admitted (its pool of turn slots and due time)
 * and its processor. Every kind — loop and heartbeat ticks, cron runs, inbox messages, `/v1` runs —
 * registers the same way, in one list (`worker-process.ts`); the process builds one BullMQ worker
 * per queue and shard from the kinds registered on that queue.
 */
import type { AdvancedOptions, Job } from 'bullmq';
import type { WorkerDeps } from '../worker-deps.ts';
import type { TurnPool } from './turn-tracker.ts';

/** Whether this process still holds a fetched job's lock: surely (by its fetch time), or asked of Redis. */
export type LockHeld = () => boolean | Promise<boolean>;

/** The terms of a fetched job's ticket (`JobAdmission.admit`): the pool of its turn slot, and its due time (epoch ms; `undefined`: now). */
export interface TicketTerms {
  pool: TurnPool;
  dueAt: number | undefined;
}

/** The terms of a job whose kind sets none: the `agent` pool, due now. */
export const DUE_NOW: TicketTerms = { pool: 'agent', dueAt: undefined };

/**
 * One kind of job. Its methods take the job typed by the kind (`D`); the process hands each one only
 * the jobs `accepts` takes.
 */
export interface JobProcessor<D = unknown, R = unknown> {
  /** The queue its jobs are on (`QUEUES`). */
  readonly queue: string;
  /** Which of the queue's jobs are its own, when several kinds share the queue (`ticks`). Default: all of them. */
  accepts?(job: Job): boolean;
  /** Its jobs live on the first shard only and belong to no session (`/v1` runs). Default: every shard the process consumes. */
  readonly firstShardOnly?: boolean;
  /** The pools of turn slots its jobs may need (default `agent`): what the queue's fetch loop waits for. */
  readonly pools?: readonly TurnPool[];
  /** Its jobs may come early and be held until due. */
  readonly holdable?: boolean;
  /**
   * A held job's lock is set once, when it is admitted, to last until its due time plus `worker.lock_duration_ms`,
   * and not renewed while it is held (`WorkerProcess.holdLock`): a lead longer than the lock costs no renewals. Without
   * it, a held job's lock is renewed as a running job's, unless the lock its fetch set already lasts past its due time.
   */
  readonly lockedUntilDue?: boolean;
  /** BullMQ settings of its queue's worker. */
  readonly settings?: AdvancedOptions;
  /**
   * A fetched job's pool and due time (default {@link DUE_NOW}). Called once per fetch, before the
   * job waits; when it throws, the job is admitted now and its processor fails it with the reason.
   */
  admit?(job: Job<D>, deps: WorkerDeps, lockHeld: LockHeld): TicketTerms;
  /**
   * The job ends here without its turn: `handedBack` by the drain before it started (due now, for
   * another worker), else left (its lock lost while it waited) or ended by its processor.
   */
  release?(job: Job<D>, deps: WorkerDeps, handedBack: boolean): Promise<void>;
  /**
   * The job waits for a turn slot of this process (every slot of its pool is taken): called then, and
   * again every `worker.defer_ms` while it still waits, for what it may do without a slot — a cron
   * occurrence with `--overlap cancel_other` cancels the run it replaces, which may be the very turn
   * that holds the slot. Errors are logged, never fail the job.
   */
  waitingForSlot?(job: Job<D>, deps: WorkerDeps): Promise<void>;
  /** Run the job. `signal` is BullMQ's (unused: a turn's own controller is the turn tracker's). */
  process(job: Job<D>, token: string | undefined, signal: AbortSignal | undefined, deps: WorkerDeps): Promise<R>;
}
