/**
 * What a kind of occurrence (a loop or heartbeat tick, a cron run) plugs into
 * the occurrence pipeline (`pipeline.ts`): the facts of its job and its own
 * gate, claim, turn, commit, delivery and outcome. The pipeline carries out
 * every policy the two share; a plan only gathers facts and writes records.
 */
import type { Logger } from 'pino';
import type { TurnError } from '../../scheduler/errors/turn-error.ts';
import type { TickKind } from '../../scheduler/tick/tick-kind.ts';
import type { ModelSpend } from '../../scheduler/model-spend.ts';
import type { CONFLICT } from '../../scheduler/store/optimistic-retry.ts';
import type { HeldLock } from '../runtime/session-lock.ts';
import type { TrackedTurn } from '../runtime/turn-tracker.ts';
import type { OccurrenceDefer } from './defer-decision.ts';

/** The occurrence a job stands for, and how the pipeline treats it. */
export interface Occurrence {
  /** `loop`, `heartbeat` or `cron`: the `kind` label of the lateness and turn metrics. */
  kind: TickKind;
  /** How the logs name it (`loop tick`, `cron run`). */
  label: string;
  occurrenceId: string;
  /** The ids its spans carry (docs/OPERATIONS.md, "Traces"): the schedule's (a loop's or cron job's) and, when known, its session's. */
  ids: { scheduleId: string; sessionId?: string };
  /** Epoch ms the occurrence is due. */
  dueAt: number;
  /** Who runs it: the BullMQ job id; the tracked turn's id and the holder of its locks and claim. */
  holder: string;
  log: Logger;
  /** The job came early by the prefetch lead: hold it until this epoch ms before anything else (ticks). */
  holdUntil?: number;
  /** The job can be moved back to delayed (a cron job only with the worker's lock token). */
  canDefer: boolean;
  /** Count its deferrals in `hermes_ticks_deferred_total` (loop and heartbeat ticks). */
  countsDeferrals: boolean;
  /** Observe the lateness of its turn (not for a manual run). */
  measuresLateness: boolean;
  /** A `/stop` in this session, or Ctrl+C aimed at this occurrence, aborts the turn (`TurnTracker.abortTurns`). */
  stoppableAs?: { sessionId: string; occurrenceId: string };
  /** The job's BullMQ attempts: a turn that never reached the model is retried while some are left. */
  attempts?: { attempt: number; of: number };
}

/** What a plan's gate answers over one read: wait until due, claim, defer, or end here with a result. */
export type GateAnswer<Gated, Result> =
  | { action: 'wait'; untilMs: number }
  | { action: 'claim'; gated: Gated; lock?: HeldLock | null }
  | OccurrenceDefer
  | { action: 'done'; result: Result };

/**
 * What a plan's claim answers: `fire` (run the turn, then commit), `record` (commit without a turn:
 * a skipped occurrence), `again` (decide over a fresh gate read), defer, or end here with a result.
 * `lock`: the session lock the claim took (the pipeline holds it from then on).
 */
export type ClaimAnswer<Claimed, Ran, Result> = (
  | { action: 'fire'; claimed: Claimed; startedAt: number }
  | { action: 'record'; claimed: Claimed; ran: Ran }
  | { action: 'again' }
  | OccurrenceDefer
  | { action: 'done'; result: Result }
) & { lock?: HeldLock };

/** What the pipeline needs of a turn that ran to its end. */
export interface RanTurn {
  /** The turn failed; it is still committed (the next occurrence, or the failure policy, is the retry). */
  failed: boolean;
  /** A `--watch` check found nothing new: no turn ran (no turn in the metrics either). */
  unchanged: boolean;
  /** Epoch ms the turn ended. */
  finishedAt: number;
}

/** What one commit attempt answers: committed, a conflict (try again over a fresh read), or an end here. */
export type CommitAnswer<Committed, Result> =
  { action: 'committed'; committed: Committed; lockReleased: boolean } | { action: 'done'; result: Result } | typeof CONFLICT;

/** One kind of occurrence, plugged into `runOccurrence`. A plan is made for one job. */
export interface OccurrencePlan<Gated, Claimed, Ran extends RanTurn, Committed, Result> {
  occurrence: Occurrence;
  /** Read what the decision needs and decide (pure deciders); `waited`: a `wait` answer was slept out before this read. */
  gate(waited: boolean): Promise<GateAnswer<Gated, Result>>;
  /** Claim the occurrence (a Lua script); `round` counts the `again` answers before this one. */
  claim(gated: Gated, round: number): Promise<ClaimAnswer<Claimed, Ran, Result>>;
  /** The turn itself; throws when it fails. */
  runTurn(claimed: Claimed, signal: AbortSignal, turn: TrackedTurn): Promise<Ran>;
  /** The failed turn to commit: `error` as a TurnError, `spend` what its model calls cost. */
  failedTurn(claimed: Claimed, failure: { error: TurnError; spend: ModelSpend; turn: TrackedTurn }): Ran;
  /** One commit attempt, exactly once per occurrence (a duplicate ends in `done`). */
  commit(claimed: Claimed, ran: Ran, attempt: number): Promise<CommitAnswer<Committed, Result>>;
  /** What to throw when the record kept changing through every commit attempt. */
  commitExhausted(): Error;
  /** After the commit: send what the occurrence says to its targets. */
  deliver(claimed: Claimed, ran: Ran, committed: Committed): Promise<void>;
  /** After the commit: what the new state means for the schedule (its job scheduler, its next tick, a notice). */
  applyOutcome(claimed: Claimed, committed: Committed): Promise<void>;
  /** The job's return value once delivered. */
  result(claimed: Claimed, ran: Ran, committed: Committed): Result;
}
