/**
 * The cron part of the gateway's `/api`, backed by `CronService`. Jobs made
 * over HTTP are never trusted: they cannot carry a `--script` (docs/DESIGN.md §3).
 */
import type { Logger } from 'pino';
import type { HermesConfig } from '../scheduler/config/config.ts';
import { cronServiceFor } from '../scheduler/services.ts';
import { cronJobView, cronRunView, type CronJob } from '../scheduler/cron/cron-job.ts';
import { backfillView } from '../scheduler/cron/backfill.ts';
import { isoUtc, nextOccurrences } from '../scheduler/cron/cron-engine.ts';
import type { CronApi } from '../gateway/http/cron-routes.ts';
import { connectCli } from './connect-cli.ts';
import { unconfiguredPlatformWarnings } from '../scheduler/delivery/unconfigured-platform.ts';
import { budgetSetWarning } from '../scheduler/economy/token-budget.ts';
import type { RedisTopology } from '../scheduler/store/redis/connection-factory.ts';

/**
 * Open a `CronApi` over its own Redis connections.
 * @throws StoreUnavailableError when Redis cannot be reached
 * @returns the API and a `close()` for its connections
 */
export async function openCronApi(
  config: HermesConfig,
  target: RedisTopology | string,
  log: Logger,
): Promise<{ api: CronApi; close(): Promise<void> }> {
  const conn = await connectCli(config, target);
  const service = cronServiceFor(config, conn, log);
  const caller = { origin: { surface: 'api' as const }, trusted: false };
  const api: CronApi = {
    list: async (request, filter) => {
      const page = await service.page(request, filter);
      return { data: page.items.map(cronJobView), next_cursor: page.nextCursor };
    },
    get: async (ref, options) => {
      const job = await service.get(ref);
      return withWarnings(withNextRuns(job, options?.nextRuns), config, job);
    },
    add: async (input) => {
      const job = await service.add(input, caller);
      return withWarnings(cronJobView(job), config, job);
    },
    edit: async (ref, changes) => {
      const job = await service.edit(ref, changes, caller);
      return withWarnings(withNextRuns(job), config, job);
    },
    runs: async (ref, limit) => (await service.runs(ref, limit)).map(cronRunView),
    pause: async (ref) => cronJobView((await service.pause(ref)).job),
    resume: async (ref, { runNow }) => cronJobView((await service.resume(ref, caller, { runNow })).job),
    runNow: async (ref, options) => {
      const r = await service.runNow(ref, caller, options);
      return { ...cronJobView(r.job), manual_job_id: r.manualJobId };
    },
    backfill: async (ref, input) => {
      const { job, window, queued, recorded } = await service.backfill(ref, caller, input);
      return { ...cronJobView(job), backfill: backfillView(job.id, window, queued, recorded) };
    },
    remove: async (ref) => cronJobView(await service.remove(ref)),
  };
  return { api, close: () => conn.close() };
}

/**
 * A job's view plus `warnings` while it will not work as set: a platform target (or an `origin` on a platform)
 * without this gateway's bot (scheduler/delivery/unconfigured-platform.ts); a `max_tokens` one run uses up
 * (scheduler/economy/token-budget.ts). Absent when there is nothing to say.
 */
function withWarnings(view: Record<string, unknown>, config: HermesConfig, job: CronJob): Record<string, unknown> {
  const budget = budgetSetWarning(job.max_tokens, job.spend, 'run');
  const warnings = [...unconfiguredPlatformWarnings(config, job.deliver, 'This gateway', job.origin.route), ...(budget ? [budget] : [])];
  return warnings.length === 0 ? view : { ...view, warnings };
}

/** A job's view plus its next `count` fire times (ISO UTC), from the armed occurrence on. */
function withNextRuns(job: CronJob, count = 5): Record<string, unknown> {
  const next =
    job.state !== 'scheduled' || job.next_run_at === null
      ? []
      : [job.next_run_at, ...(count > 1 ? nextOccurrences(job.schedule, job.tz, job.next_run_at, count - 1) : [])];
  return { ...cronJobView(job), next_runs: next.map(isoUtc) };
}
