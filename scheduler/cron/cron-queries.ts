/**
 * Reading cron jobs and their runs for the CLI, the gateway's `/api` and the agent's `schedules`
 * tool: listing, references (an id or a name) and run history. Writes nothing.
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import type { CronJob, CronRun } from './cron-job.ts';
import type { CronStore } from './cron-store.ts';
import { resolveJobRef } from './job-ref.ts';

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
    return resolveJobRef(ref, await this.store.list());
  }
}
