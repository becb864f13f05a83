/**
 * The BullMQ jobs of loop and heartbeat ticks: their names and data, as stored and as the worker
 * reads them. What a job's time means (the prefetch lead) is `prefetch-lead.ts`; who arms the jobs
 * is `tick-scheduler.ts`.
 *
 * Stored compactly (docs/BENCHMARKS.md, scale): a job scheduler's job data is only the loop id
 * (`StoredTickJobData`), the kind and session being named by the job scheduler id, so the
 * scheduler hash keeps Redis's small (listpack) encoding whatever the session id's length; no job
 * options on the `ticks` queue's jobs beyond what BullMQ writes itself (retention is the worker's).
 */
import type { Job } from 'bullmq';
import { parseLoopSchedulerId } from '../store/keys.ts';
import type { LoopKind } from '../tick/tick-kind.ts';
import { schedulerJobMillis } from '../store/queues.ts';
import type { LoopRecord } from './loop-state.ts';

/** Data of a tick job as the worker reads it (`tickJobData`). */
export interface TickJobData {
  kind: LoopKind;
  sessionId: string;
  loopId: string;
  /** Written by earlier versions; the worker takes a `ticks` job without a `type` as a schedule tick. */
  type?: 'schedule-tick';
}

/**
 * Data of a tick job as stored. A job scheduler's template (and so each job it
 * makes) holds only the `loopId`: its id `<kind>:<session>` names the kind and
 * the session, and a template under 64 bytes keeps the scheduler hash
 * listpack-encoded. A self-paced tick job (no scheduler) keeps its `kind` and
 * `sessionId`; jobs of earlier versions' schedulers hold the `kind` too.
 */
export type StoredTickJobData = Omit<TickJobData, 'sessionId' | 'kind'> & { sessionId?: string; kind?: LoopKind };

/**
 * A tick job's data with its kind and session: the stored `kind` and
 * `sessionId` when there are both (self-paced jobs, and jobs written before
 * schedulers' jobs named no session), else those named by the job's scheduler
 * id (`job.repeatJobKey`, or the `repeat:<schedulerId>:<millis>` job id).
 * @throws Error when the job names no session (not a loop or heartbeat tick)
 */
export function tickJobData(job: Pick<Job<StoredTickJobData>, 'data' | 'id' | 'repeatJobKey'>): TickJobData {
  const { data } = job;
  if (typeof data.sessionId === 'string' && data.kind !== undefined) return data as TickJobData;
  const schedulerId =
    job.repeatJobKey ?? (schedulerJobMillis(job.id) !== undefined ? job.id!.slice('repeat:'.length, job.id!.lastIndexOf(':')) : undefined);
  const named = schedulerId === undefined ? undefined : parseLoopSchedulerId(schedulerId);
  if (!named) throw new Error(`tick job ${job.id} names no session`);
  return { ...data, kind: data.kind ?? named.kind, sessionId: named.sessionId };
}

/** BullMQ job name of schedule ticks. */
export const TICK_JOB_NAME = 'schedule-tick';

/**
 * BullMQ job name of the ticks of a command loop (`--run`, `--command`): a worker sees from the
 * name alone, before reading anything, that the tick runs in the `command` pool of turn slots
 * (`worker.max_command_turns`). No longer than {@link TICK_JOB_NAME}, so a scheduler costs no more.
 */
export const COMMAND_TICK_JOB_NAME = 'command-tick';

/** The job name of a loop's ticks: by its runner (the pool its turns run in). */
export function tickJobName(record: Pick<LoopRecord, 'runner'>): string {
  return record.runner.kind === 'command' ? COMMAND_TICK_JOB_NAME : TICK_JOB_NAME;
}
