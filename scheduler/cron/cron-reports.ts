/**
 * Fleet reports over the cron jobs: `hermes cron status` (workers alive, job counts, the next runs,
 * lateness, failing jobs, delivery outcomes) and `hermes cron doctor` (read-only checks). Writes nothing.
 */
import { assertTimeZone } from './cron-engine.ts';
import { pausedByStreak, type CronJob } from './cron-job.ts';
import type { CronStore } from './cron-store.ts';
import { countAliveWorkers } from '../worker-liveness.ts';

/** Fleet health for `hermes cron status`. */
export interface CronStatus {
  workersAlive: number;
  jobs: { total: number; scheduled: number; paused: number; completed: number; error: number };
  /** The next few runs, soonest first. */
  upcoming: Array<{ id: string; name: string; tz: string; next_run_at: number }>;
  /** Lateness of the recent runs that started. */
  lateness: { runs: number; averageMs: number; maxMs: number; late: number };
  /** Jobs with failed runs in a row; `paused_reason` when the streak paused the job. */
  failing: Array<{
    id: string;
    name: string;
    failure_streak: number;
    last_error: string | null;
    state: CronJob['state'];
    paused_reason: string | null;
  }>;
  /** Delivery outcomes of the recent runs, by status (`sent`, `delivered`, `queued`, `failed`, …). */
  deliveries: Record<string, number>;
  /** Failed deliveries of the recent runs, newest first (at most 5). */
  failedDeliveries: Array<{ id: string; name: string; occurrence_id: string; target: string; error: string | null }>;
}

/** One `doctor` finding. */
export interface CronFinding {
  jobId: string | null;
  message: string;
}

/** A delivery still queued for the gateway this long after its run is a `doctor` finding. */
export const DELIVERY_STUCK_MS = 10 * 60_000;

/** Status and doctor reports of the cron fleet. */
export class CronReports {
  constructor(
    private readonly store: CronStore,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Fleet health: workers alive, job counts, the next runs, lateness of recent runs, failing jobs. */
  async status(options: { upcoming?: number } = {}): Promise<CronStatus> {
    const now = this.clock();
    const [jobs, workersAlive, recent] = await Promise.all([
      this.store.list(),
      countAliveWorkers(this.store.redis, this.store.keys.workers, now),
      this.store.recentRuns(100),
    ]);
    const count = (s: CronJob['state']) => jobs.filter((j) => j.state === s).length;
    const started = recent.filter((r) => r.started_at !== null);
    const names = new Map(jobs.map((j) => [j.id, j.name]));
    const deliveries: Record<string, number> = {};
    const failedDeliveries: CronStatus['failedDeliveries'] = [];
    for (const r of recent) {
      for (const d of r.deliveries) {
        deliveries[d.status] = (deliveries[d.status] ?? 0) + 1;
        if (d.status === 'failed' && failedDeliveries.length < 5) {
          failedDeliveries.push({
            id: r.job_id,
            name: names.get(r.job_id) ?? r.job_id,
            occurrence_id: r.occurrence_id,
            target: d.target,
            error: d.error ?? null,
          });
        }
      }
    }
    const lateness = started.map((r) => r.lateness_ms);
    return {
      workersAlive,
      jobs: {
        total: jobs.length,
        scheduled: count('scheduled'),
        paused: count('paused'),
        completed: count('completed'),
        error: count('error'),
      },
      upcoming: jobs
        .filter((j) => j.state === 'scheduled' && j.next_run_at !== null)
        .sort((a, b) => a.next_run_at! - b.next_run_at!)
        .slice(0, options.upcoming ?? 5)
        .map((j) => ({ id: j.id, name: j.name, tz: j.tz, next_run_at: j.next_run_at! })),
      lateness: {
        runs: started.length,
        averageMs: lateness.length ? Math.round(lateness.reduce((a, b) => a + b, 0) / lateness.length) : 0,
        maxMs: lateness.length ? Math.max(...lateness) : 0,
        late: started.filter((r) => r.late).length,
      },
      failing: jobs
        .filter((j) => j.failure_streak > 0)
        .sort((a, b) => b.failure_streak - a.failure_streak)
        .map((j) => ({
          id: j.id,
          name: j.name,
          failure_streak: j.failure_streak,
          last_error: j.last_error,
          state: j.state,
          paused_reason: j.paused_reason ?? null,
        })),
      deliveries,
      failedDeliveries,
    };
  }

  /**
   * Findings about the deliveries of a job's latest run: a target that failed
   * (with the reason), or one still queued for the gateway after
   * `DELIVERY_STUCK_MS` (no gateway running, or a chat that keeps failing).
   */
  private async deliveryFindings(job: CronJob, now: number): Promise<CronFinding[]> {
    const [last] = await this.store.runs(job.id, 1);
    if (!last) return [];
    const out: CronFinding[] = [];
    for (const d of last.deliveries) {
      if (d.status === 'failed') {
        out.push({ jobId: job.id, message: `last delivery to ${d.target} failed (not retried): ${d.error ?? 'unknown error'}` });
      } else if (d.status === 'queued' && (last.finished_at ?? last.due_at) < now - DELIVERY_STUCK_MS) {
        const why = d.error ? `last attempt: ${d.error}, ${d.will_retry ? 'retrying' : 'not retried'}` : 'is a gateway running?';
        out.push({
          jobId: job.id,
          message: `last delivery to ${d.target} is still queued after ${Math.round((now - (last.finished_at ?? last.due_at)) / 60_000)} min (${why}).`,
        });
      }
    }
    return out;
  }

  /**
   * Read-only checks (`hermes cron doctor`): Redis eviction policy, workers
   * alive, every scheduled job armed and firing when its record says, zones
   * valid, repeated failures, scheduled jobs whose next run is long past.
   * @returns the findings; empty when all is well
   */
  async doctor(): Promise<CronFinding[]> {
    const now = this.clock();
    const findings: CronFinding[] = [];
    try {
      const res = (await this.store.redis.config('GET', 'maxmemory-policy')) as string[];
      if (res[1] && res[1] !== 'noeviction') {
        findings.push({
          jobId: null,
          message: `Redis maxmemory-policy is ${res[1]}: jobs may be evicted under memory pressure; set it to noeviction.`,
        });
      }
    } catch {
      // CONFIG is disabled on some managed Redis services; not a finding.
    }
    const jobs = await this.store.list();
    const alive = await countAliveWorkers(this.store.redis, this.store.keys.workers, now);
    if (alive === 0 && jobs.some((j) => j.state === 'scheduled')) {
      findings.push({
        jobId: null,
        message: 'No worker is alive: scheduled jobs will not run. Start one with `hermes worker` or `hermes up`.',
      });
    }
    for (const job of jobs) {
      try {
        assertTimeZone(job.tz);
      } catch {
        findings.push({ jobId: job.id, message: `time zone ${job.tz} is unknown to this runtime.` });
        continue;
      }
      if (job.state === 'paused' && job.paused_reason) {
        findings.push({
          jobId: job.id,
          message: pausedByStreak(job)
            ? `paused after ${job.paused_reason}; \`hermes cron resume ${job.id}\` continues.`
            : `paused: ${job.paused_reason}; \`hermes cron resume ${job.id}\` continues${job.max_tokens ? ' with a fresh token allowance' : ''}.`,
        });
      }
      // A job with no times of its own has nothing armed: it is queued by its parents' runs.
      if (job.state !== 'scheduled' || job.schedule.kind === 'after') continue;
      if (job.schedule.kind === 'once') {
        if (job.next_run_at !== null && !(await this.store.hasOnceJob(job.id, job.next_run_at))) {
          findings.push({ jobId: job.id, message: 'scheduled one-shot has no queued job; a worker start (reconcile) re-arms it.' });
        }
      } else {
        const next = await this.store.schedulerNext(job.id);
        if (next === undefined) {
          findings.push({ jobId: job.id, message: 'scheduled job has no job scheduler; a worker start (reconcile) re-arms it.' });
        } else if (job.next_run_at !== null && job.next_run_at > now && next !== job.next_run_at) {
          // A record whose next run is in the past is mid-run (the scheduler already moved on).
          findings.push({
            jobId: job.id,
            message: `job scheduler fires at ${new Date(next).toISOString()} but the record says ${new Date(job.next_run_at).toISOString()}.`,
          });
        }
      }
      if (job.next_run_at !== null && job.next_run_at < now - 10 * 60_000) {
        findings.push({ jobId: job.id, message: `next run ${new Date(job.next_run_at).toISOString()} is more than 10 minutes overdue.` });
      }
      findings.push(...(await this.deliveryFindings(job, now)));
      // A streak is a finding from its first failure: the job still runs, and will pause if it goes on.
      if (job.failure_streak > 0) {
        const runs = job.failure_streak === 1 ? 'its last run failed' : `failed ${job.failure_streak} runs in a row`;
        findings.push({
          jobId: job.id,
          message: `in a failure streak: ${runs}; last error: ${job.last_error ?? 'unknown'} (\`hermes cron logs ${job.id}\` shows the runs).`,
        });
      }
    }
    return findings;
  }
}
