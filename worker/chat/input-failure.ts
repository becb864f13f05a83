/**
 * A session input (a message or slash command) whose handling throws never holds up the inputs sent
 * after it (docs/RELIABILITY.md, "Session input runs in order, and a bad input is set aside"):
 * - a try that throws — a bug, a record that does not parse, a write the store refused — is made again
 *   `worker.input_retry_delay_ms` later, doubled before each further try, while fewer than
 *   `worker.input_attempts` were made; the inputs sent after it wait meanwhile (arrival order);
 * - the last try's error sets it aside (`scheduler/session/set-aside.ts`), and its chat is told;
 * - an input whose job failed outside its processor — stalled more often than
 *   `worker.max_stalled_count` because its worker died with it each time, or failed by a version
 *   without this rule — is set aside by the next input of its session that finds it first in line.
 * A failed model call is not such a failure: it is answered as a failed turn (`inbox-processor.ts`).
 */
import type { Job } from 'bullmq';
import { isHermesError } from '../../scheduler/errors/hermes-error.ts';
import { clipError } from '../../scheduler/loop/loop-state.ts';
import { inputJobIdOf, inputOccurrenceId, type InboxJobData } from '../../scheduler/session/inbox.ts';
import { setAsideInput } from '../../scheduler/session/set-aside.ts';
import { deferJob } from '../../scheduler/store/defer-job.ts';
import { deliverToRoute } from '../runtime/delivery.ts';
import type { WorkerDeps } from '../worker-deps.ts';

/** What became of an input that was set aside (`duplicate`: it had been answered meanwhile). */
export type SetAsideResult = { status: 'set-aside'; eventId: string } | { status: 'duplicate' };

/**
 * After a try of `job`'s input threw `err`: try it again later, or set it aside after the last try.
 * @throws DelayedError when it is to be tried again
 */
export async function retryOrSetAside(
  job: Job<InboxJobData>,
  token: string | undefined,
  deps: WorkerDeps,
  err: unknown,
): Promise<SetAsideResult> {
  const tries = (job.data.failedTries ?? 0) + 1;
  const error = err instanceof Error ? err.message : String(err);
  const attempts = deps.config.worker.input_attempts;
  const log = deps.log.child({ sessionId: job.data.sessionId, jobId: job.id });
  if (tries < attempts) {
    const delayMs = deps.config.worker.input_retry_delay_ms * 2 ** (tries - 1);
    log.warn({ err: error, attempt: tries, attempts, retryInMs: delayMs }, 'session input failed; trying again');
    await job.updateData({ ...job.data, failedTries: tries });
    return await deferJob(job, token, delayMs);
  }
  log.warn({ err: error, attempts: tries }, 'session input failed on its last try; set aside');
  return await setAside(deps, job.data, { attempts: tries, error, told: isHermesError(err) ? err.message : 'an internal error' });
}

/**
 * When the input `occurrenceId` (first in `sessionId`'s pending set) has a failed job, set it aside.
 * @returns whether it was set aside: the caller's input may then go ahead of it
 */
export async function setAsideFailedJob(deps: WorkerDeps, sessionId: string, occurrenceId: string): Promise<boolean> {
  const queue = deps.queues.forSession(sessionId).inbox;
  const jobId = inputJobIdOf(occurrenceId);
  if ((await queue.getJobState(jobId)) !== 'failed') return false;
  const job = (await queue.getJob(jobId)) as Job<InboxJobData> | undefined;
  if (!job || inputOccurrenceId(job.data.sessionId, job.data.messageId) !== occurrenceId) return false;
  deps.log.warn({ sessionId, jobId, err: job.failedReason }, 'session input found failed ahead of a later one; set aside');
  await setAside(deps, job.data, {
    attempts: Math.max(job.attemptsMade, (job.data.failedTries ?? 0) + 1),
    error: job.failedReason || 'its job failed',
    told: 'its worker failed',
  });
  return true;
}

/** Set `data`'s input aside (`scheduler/session/set-aside.ts`) and tell its chat. */
async function setAside(
  deps: WorkerDeps,
  data: InboxJobData,
  outcome: { attempts: number; error: string; told: string },
): Promise<SetAsideResult> {
  const { sessionId } = data;
  const occurrenceId = inputOccurrenceId(sessionId, data.messageId);
  const error = clipError(outcome.error);
  const notice =
    `Your message could not be handled (${clipError(outcome.told).replace(/\.$/, '')}) after ${outcome.attempts} ${outcome.attempts === 1 ? 'try' : 'tries'}; ` +
    'it was set aside, and your next message goes ahead. Send it again to try once more.';
  const res = await setAsideInput(
    deps.redis,
    deps.keys,
    {
      sessionId,
      occurrenceId,
      messageId: data.messageId,
      text: data.text,
      surface: data.origin.surface,
      receivedAt: data.receivedAt,
      setAsideAt: Date.now(),
      attempts: outcome.attempts,
      error,
    },
    { text: notice, error, attempts: outcome.attempts, occurrenceId, input: data.text },
    {
      occurrenceWindowMs: deps.config.worker.occurrence_window_seconds * 1000,
      eventsMaxLen: deps.config.worker.events_max_entries,
      retentionMs: deps.config.worker.set_aside_retention_seconds * 1000,
    },
  );
  if (res.status === 'set-aside') await deliverToRoute(deps, { sessionId, origin: data.origin, text: notice, occurrenceId });
  return res;
}
