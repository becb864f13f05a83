/**
 * Managing cron jobs, one object over its three parts: the commands that change jobs
 * (`cron-commands.ts`, with the input readers of `cron-input.ts`), the queries that read them
 * (`cron-queries.ts`) and the fleet reports (`cron-reports.ts`). Each method delegates to its
 * part, documented there.
 */
import type { Logger } from 'pino';
import type { CronJob, CronRun } from './cron-job.ts';
import { CronCommands } from './cron-commands.ts';
import type { CronCaller, CronInputSettings, CronJobChanges, CronJobInput } from './cron-input.ts';
import { CronQueries, type CronListFilter } from './cron-queries.ts';
import type { Page, PageRequest } from '../store/list-page.ts';
import { CronReports, type CronFinding, type CronStatus } from './cron-reports.ts';
import type { CronStore } from './cron-store.ts';
import type { BackfillWindow } from './backfill.ts';

// Kept importable from here for the callers written against the single service.
export type { CronCaller, CronJobChanges, CronJobInput } from './cron-input.ts';
export { DELIVERY_STUCK_MS, type CronFinding, type CronStatus } from './cron-reports.ts';

/** Settings of the service, resolved once from the configuration: those of its input (`cron-input.ts`). */
export type CronServiceSettings = CronInputSettings;

/** Commands, queries and reports of cron jobs. */
export class CronService {
  readonly commands: CronCommands;
  readonly queries: CronQueries;
  readonly reports: CronReports;

  constructor(
    readonly store: CronStore,
    settings: CronServiceSettings,
    log: Logger,
    clock: () => number = Date.now,
  ) {
    this.queries = new CronQueries(store);
    this.commands = new CronCommands(store, this.queries, settings, log, clock);
    this.reports = new CronReports(store, clock);
  }

  /** {@link CronCommands.add} */
  add(input: CronJobInput, caller: CronCaller): Promise<CronJob> {
    return this.commands.add(input, caller);
  }

  /** {@link CronCommands.edit} */
  edit(ref: string, changes: CronJobChanges, caller: CronCaller): Promise<CronJob> {
    return this.commands.edit(ref, changes, caller);
  }

  /** {@link CronCommands.pause} */
  pause(ref: string): Promise<{ job: CronJob; changed: boolean }> {
    return this.commands.pause(ref);
  }

  /** {@link CronCommands.resume} */
  resume(
    ref: string,
    caller: CronCaller,
    options?: { runNow?: boolean },
  ): Promise<{ job: CronJob; changed: boolean; manualJobId?: string }> {
    return this.commands.resume(ref, caller, options);
  }

  /** {@link CronCommands.runNow} */
  runNow(ref: string, caller: CronCaller, options?: { force?: boolean }): Promise<{ job: CronJob; manualJobId: string; dueAt: number }> {
    return this.commands.runNow(ref, caller, options);
  }

  /** {@link CronCommands.backfill} */
  backfill(
    ref: string,
    caller: CronCaller,
    input: { from?: string; to?: string; force?: boolean },
  ): Promise<{ job: CronJob; window: BackfillWindow; queued: number[]; recorded: number[] }> {
    return this.commands.backfill(ref, caller, input);
  }

  /** {@link CronCommands.remove} */
  remove(ref: string): Promise<CronJob> {
    return this.commands.remove(ref);
  }

  /** {@link CronQueries.page} */
  page(request: PageRequest, filter?: CronListFilter): Promise<Page<CronJob>> {
    return this.queries.page(request, filter);
  }

  /** {@link CronQueries.list} */
  list(options?: { all?: boolean }): Promise<CronJob[]> {
    return this.queries.list(options);
  }

  /** {@link CronQueries.get} */
  get(ref: string): Promise<CronJob> {
    return this.queries.get(ref);
  }

  /** {@link CronQueries.runs} */
  runs(ref: string | undefined, limit?: number): Promise<CronRun[]> {
    return this.queries.runs(ref, limit);
  }

  /** {@link CronQueries.resolveRef} */
  resolveRef(ref: string): Promise<CronJob> {
    return this.queries.resolveRef(ref);
  }

  /** {@link CronReports.status} */
  status(options?: { upcoming?: number }): Promise<CronStatus> {
    return this.reports.status(options);
  }

  /** {@link CronReports.doctor} */
  doctor(): Promise<CronFinding[]> {
    return this.reports.doctor();
  }
}
