/**
 * Reading cron jobs and their runs for the CLI, the gateway's `/api` and the agent's `schedules`
 * tool: listing, references (an id or a name) and run history. Writes nothing.
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import type { CronJob, CronJobState, CronRun } from './cron-job.ts';
import type { CronStore } from './cron-store.ts';
import { resolveJobRef } from './job-ref.ts';
import type { Page, PageRequest } from '../store/list-page.ts';
import { reachesPlatform } from '../session/reaches-platform.ts';

/** What a page of jobs may be narrowed to. */
export interface CronListFilter {
  /** Include completed jobs (otherwise left out unless `state` asks for them). */
  all?: boolean;
  /** Only jobs in this state. */
  state?: CronJobState;
  /** Only jobs set from this platform or delivering to it (`reachesPlatform`). */
  platform?: string;
  /** Only jobs whose name starts with this (ASCII letters in either case). */
  name?: string;
}

/** Queries over the cron job records and run history. */
export class CronQueries {
  constructor(private readonly store: CronStore) {}

  /**
   * Jobs sorted by next run (then creation). Without `all`, completed jobs are left out.
   */
  async list(options: { all?: boolean } = {}): Promise<CronJob[]> {
    const jobs = await this.store.list();
    return jobs
      .filter((j) => options.all || j.state !== 'completed')
      .sort((a, b) => (a.next_run_at ?? Infinity) - (b.next_run_at ?? Infinity) || a.created_at - b.created_at);
  }

  /**
   * One page of jobs in list order (by name, then id: `cron-order.ts`), read a page at a time (`store/list-page.ts`).
   * Without `all` or a `state`, completed jobs are left out.
   * @throws ScheduleInputError (`cursor`) for a cursor this list did not give
   */
  async page(request: PageRequest, filter: CronListFilter = {}): Promise<Page<CronJob>> {
    const { state, platform } = filter;
    const hideCompleted = !filter.all && state === undefined;
    const keep =
      state !== undefined || platform !== undefined || hideCompleted
        ? (j: CronJob) =>
            (state === undefined || j.state === state) &&
            (!hideCompleted || j.state !== 'completed') &&
            (platform === undefined || reachesPlatform(j, platform))
        : undefined;
    return await this.store.page(request, { ...(filter.name ? { namePrefix: filter.name } : {}), ...(keep ? { keep } : {}) });
  }

  /** The job a reference names. @throws ScheduleInputError when none or several match */
  async get(ref: string): Promise<CronJob> {
    return await this.resolveRef(ref);
  }

  /**
   * Run records, newest first: of one job, or of all jobs without `ref`.
   * @throws ScheduleInputError for a bad reference or limit
   */
  async runs(ref: string | undefined, limit = 20): Promise<CronRun[]> {
    if (!Number.isInteger(limit) || limit < 1)
      throw new ScheduleInputError(`\`limit\` must be a positive whole number, got ${limit}.`, { field: 'limit' });
    if (ref === undefined) return await this.store.recentRuns(limit);
    const job = await this.resolveRef(ref);
    return await this.store.runs(job.id, limit);
  }

  /** Resolve an id or case-insensitive name. @throws ScheduleInputError when none or several match */
  async resolveRef(ref: string): Promise<CronJob> {
    if (/^[0-9a-f]{12}$/.test(ref.trim())) {
      const byId = await this.store.get(ref.trim());
      if (byId) return byId;
    }
    // By name: the jobs of that name in any case from the list order (`withNameInAnyCase`), never every job.
    return resolveJobRef(ref, await this.store.withNameInAnyCase(ref.trim()));
  }
}
