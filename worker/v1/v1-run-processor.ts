/**
 * Runs one `/v1` request (a `v1-runs` job queued by the gateway) as a turn.
 *
 * - The turn is tracked as `scheduled` work, so a worker drain gives it
 *   `agent.cron_drain_timeout` like a cron tick (docs/DESIGN.md §9; the old system gave
 *   `/v1` runs the chat budget of 0 s and killed them at once).
 * - Only the agent runner is used: `/v1` input can never create a command turn (docs/DESIGN.md §3);
 *   the turn has the operator's tools allowed from `v1`, never tools from the request.
 * - A streamed request (`stream: true`) calls the model with `stream: true` and writes each
 *   content delta to the run's event stream (`run.delta`) as it arrives.
 * - The caller's model (a name the operator declared under `agent.models`, else the primary
 *   model) and its sampling and output parameters (`temperature`, `max_tokens`, …; checked by
 *   the gateway) go with every model call of the turn; the model's `finish_reason` is stored
 *   with the reply, so a cut answer (`length`) never looks complete.
 * - The outcome is written to the run record (scheduler/v1/v1-runs.ts), which the
 *   waiting gateway reads; the job itself always completes, so BullMQ never
 *   retries a run whose caller already got an answer. Only a stalled job (its
 *   worker died) is taken over and run again.
 * - Drain hand-back (as for loop ticks and cron runs, occurrence/defer.ts): a run aborted
 *   through its signal (drain deadline, the job's own signal) was never
 *   completed, so the record goes back to `queued` and the job is handed back
 *   to the queue (`deferJob` with no delay); another worker runs it from the
 *   start and the caller still waiting gets that answer. A run stopped
 *   through `POST /v1/runs/:id/stop` ends `cancelled`.
 * - Lost lock (as for ticks and cron runs): the turn is tracked under the
 *   job's id, so when this worker loses the job's BullMQ lock
 *   (`lockRenewalFailed`, worker-process.ts) the turn is aborted and this
 *   copy writes nothing to the run record: no `completed`, no `failed`, no
 *   hand-back to `queued`. The job may already run on another worker, which
 *   took the run over (`markRunning` with `retake`) and alone ends it; a
 *   hand-back here would put the record it is running back to `queued` and
 *   make its completion fail.
 */
import type { Job } from 'bullmq';
import { TurnError } from '../../scheduler/errors/turn-error.ts';
import type { TurnOutcome } from '../../scheduler/metrics.ts';
import { deferJob } from '../../scheduler/store/defer-job.ts';
import { CANCELLED_ERROR, type RunErrorInfo, type V1RunStatus, type V1RunJobData } from '../../scheduler/v1/v1-runs.ts';
import { runStoreFor } from '../../scheduler/services.ts';
import type { WorkerDeps } from '../worker-deps.ts';

/** How often a running run checks whether a stop was requested, ms. */
export const STOP_POLL_MS = 200;

/** Return value of a `v1-runs` job. */
export interface V1RunJobResult {
  runId: string;
  /** The run's status after this attempt, or `missing` when its record expired. */
  status: V1RunStatus | 'missing';
}

/**
 * Process a `v1-runs` job.
 *
 * @param signal - the BullMQ job's abort signal, if any; it aborts the turn like a drain does
 * @returns the run's status; never throws for a failed model call (the failure is in the run record)
 * @throws DelayedError when the run is handed back (BullMQ leaves the job to another worker);
 *   otherwise only when Redis itself fails (BullMQ then fails the job; the caller's wait ends at its timeout)
 */
export async function processV1Run(
  job: Job<V1RunJobData>,
  token: string | undefined,
  signal: AbortSignal | undefined,
  deps: WorkerDeps,
): Promise<V1RunJobResult> {
  const runs = runStoreFor(deps.config, deps.redis, deps.keys);
  const { runId } = job.data;
  const log = deps.log.child({ runId, jobId: job.id });
  if (signal?.aborted || deps.turns.draining) {
    // Fetched while this worker drains (a blocking fetch in flight when it paused): not started, hand it back.
    log.info('v1 run handed back before it started');
    return await deferJob(job, token, 0);
  }
  const retake = job.attemptsStarted > 1 || job.stalledCounter > 0;
  if (!(await runs.markRunning(runId, deps.workerId, { retake }))) {
    const current = await runs.get(runId);
    log.debug({ status: current?.status }, 'v1 run not started: no longer queued');
    return { runId, status: current?.status ?? 'missing' };
  }
  return await deps.turns.run(
    job.id!, // the id `lockRenewalFailed` names, so a lost lock finds this turn
    'deadline',
    async (turnSignal, turn) => {
      let stopped = false;
      const poll = setInterval(() => {
        runs.stopRequested(runId).then(
          (yes) => {
            if (yes && !stopped) {
              stopped = true;
              turn.controller.abort(new Error('run stopped by request'));
            }
          },
          () => {},
        );
      }, STOP_POLL_MS);
      const started = Date.now();
      // Every /v1 turn counts in hermes_turns_total and hermes_turn_duration_seconds as kind `v1`
      // (completed → ok, failed → failed, stopped by request or cut by a drain → aborted).
      const finished = (outcome: TurnOutcome) => deps.metrics?.turnFinished('v1', outcome, (Date.now() - started) / 1000);
      try {
        const hasSystem = job.data.messages.some((m) => m.role === 'system');
        // The operator's tools allowed from `v1`; the caller's request can never add one.
        const res = await deps.runners.agent.complete(job.data.messages, turnSignal, undefined, {
          ...(hasSystem ? { system: null } : {}),
          surface: 'v1',
          kind: 'v1',
          turn: { kind: 'v1' },
          ...(job.data.agentModel !== undefined ? { model: job.data.agentModel } : {}),
          ...(job.data.params ? { params: job.data.params } : {}),
          // A run's usage is its answer's `usage`; per-call `model.called` events stay out of the run stream.
          onEvent: (e) => (e.type === 'model.called' ? undefined : runs.addEvent(runId, e.type, e.data)),
          // Streamed: every content delta becomes a `run.delta` event as it arrives (one connection,
          // so they stay in order and before the terminal event the completion appends).
          ...(job.data.stream ? { onDelta: (text: string) => void runs.addEvent(runId, 'run.delta', { text }).catch(() => {}) } : {}),
        });
        if (turnSignal.aborted) throw new TurnError('The turn was aborted.', { kind: 'aborted' });
        await runs.complete(runId, res.content, res.usage, Date.now(), res.finishReason ?? 'stop');
        finished('ok');
        log.info({ ms: Date.now() - started }, 'v1 run completed');
        return { runId, status: 'completed' as const };
      } catch (err) {
        // Lost lock: another worker has the job now and ends the run; commit nothing here.
        if (turn.lockLost) throw err;
        if (stopped) {
          await runs.end(runId, 'cancelled', CANCELLED_ERROR);
          finished('aborted');
          log.info('v1 run stopped by request');
          return { runId, status: 'cancelled' as const };
        }
        if (turnSignal.aborted) {
          // Never completed: hand it back (record first, so the next worker finds it queued).
          if (await runs.requeue(runId, ['running'], 'drain')) {
            finished('aborted');
            log.warn({ abortedByDrain: turn.abortedByDrain }, 'v1 run aborted by shutdown; handed back for another worker');
            return await deferJob(job, token, 0);
          }
          const current = await runs.get(runId);
          return { runId, status: current?.status ?? 'missing' };
        }
        const info = runErrorOf(err);
        await runs.end(runId, 'failed', info);
        finished('failed');
        log.warn({ code: info.code, err: info.message }, 'v1 run failed');
        return { runId, status: 'failed' as const };
      } finally {
        clearInterval(poll);
      }
    },
    signal,
  );
}

/**
 * The caller-facing error of a failed turn. No model configured is 503 (the
 * service is not set up to answer; nothing is wrong with the request or a
 * bug in the gateway), with a message that says what to set.
 */
function runErrorOf(err: unknown): RunErrorInfo {
  if (err instanceof TurnError) {
    // A model the gateway accepted but this worker's config does not declare (configs differ).
    if (err.kind === 'config' && err.message.startsWith('Unknown model'))
      return { code: 'model_not_found', message: err.message, httpStatus: 404 };
    if (err.kind === 'config') {
      return {
        code: 'model_not_configured',
        message:
          'No model is configured for this server: set agent.base_url (or OPENAI_BASE_URL and OPENAI_API_KEY) for the workers and restart them.',
        httpStatus: 503,
      };
    }
    if (err.kind === 'timeout') return { code: 'model_timeout', message: err.message, httpStatus: 504 };
    return { code: err.kind === 'network' ? 'model_unreachable' : 'model_error', message: err.message, httpStatus: 502 };
  }
  return { code: 'internal_error', message: 'The run failed inside the worker.', httpStatus: 500 };
}
