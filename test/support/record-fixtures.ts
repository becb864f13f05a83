/**
 * Loop and cron job records for tests that need one but are about something else: every field set
 * to a plain value, overridden where a test cares.
 */
import { createCronJob, type CronJob, type CronRun, type NewCronJob } from '../../scheduler/cron/cron-job.ts';
import { createLoop, type LoopRecord, type NewLoop } from '../../scheduler/loop/loop-state.ts';

/** 2026-03-04 10:00 UTC: the fixtures' clock unless a test passes `now`. */
export const FIXTURE_T0 = Date.parse('2026-03-04T10:00:00Z');

/** A fixed 60 s agent loop `L1` of session `s`, set from the CLI at `FIXTURE_T0`. */
export function loopFixture(over: Partial<NewLoop> = {}): LoopRecord {
  return createLoop({
    kind: 'loop',
    loopId: 'L1',
    sessionId: 's',
    prompt: 'p',
    intervalSeconds: 60,
    times: null,
    until: null,
    maxTicks: 0,
    selfPacedFloorSeconds: 60,
    runner: { kind: 'agent' },
    origin: { surface: 'cli' },
    now: FIXTURE_T0,
    ...over,
  });
}

/** An agent cron job `abcdefabcdef` running every minute from `FIXTURE_T0` (UTC, local delivery, skip on overlap). */
export function cronJobFixture(over: Partial<NewCronJob> = {}): CronJob {
  const now = over.now ?? FIXTURE_T0;
  return createCronJob({
    id: 'abcdefabcdef',
    name: 'n',
    prompt: 'p',
    schedule: { kind: 'interval', expression: 'every 1m', display: 'every 1m', everyMs: 60_000, anchorMs: now },
    tz: 'UTC',
    repeat: null,
    deliver: ['local'],
    script: null,
    misfire: 'once',
    overlap: 'skip',
    paused: false,
    origin: { surface: 'cli' },
    now,
    ...over,
  });
}

/** A run of `jobId` due at `dueAt` that finished `ok` 10 ms after it started on time. */
export function cronRunFixture(jobId: string, dueAt: number, over: Partial<CronRun> = {}): CronRun {
  return {
    occurrence_id: `${jobId}:${dueAt}`,
    job_id: jobId,
    trigger: 'schedule',
    status: 'ok',
    reason: null,
    attempts: 1,
    due_at: dueAt,
    started_at: dueAt,
    finished_at: dueAt + 10,
    lateness_ms: 0,
    late: false,
    output: 'done',
    error: null,
    silent: false,
    deliveries: [],
    worker_id: 'w',
    ...over,
  };
}
