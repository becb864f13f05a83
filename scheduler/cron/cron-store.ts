/**
 * Cron jobs in Redis: the job records, their run history, the occurrence
 * claim and commit scripts, and their BullMQ jobs in the `ticks` queue.
 *
 * - A job record is one JSON string written with a version check (Lua), so two
 *   writers never silently overwrite each other; its compact form, which also
 *   reads the earlier full form, is `cron-record-codec.ts`.
 * - A recurring job is one BullMQ job scheduler `cron:<id>` whose `pattern`
 *   encodes the schedule for `cronRepeatStrategy` (croner decides every fire
 *   time); a one-shot is one delayed job with a deterministic id; a manual run
 *   is one job with a deterministic id.
 * - Exactly once per occurrence: before a turn starts, the worker claims the
 *   occurrence (`claim`: the job must still be scheduled in the generation the
 *   occurrence belongs to, and nobody else may hold the claim); after the turn,
 *   `commitRun` writes the run record, the job's new state and the local
 *   delivery in one script and adds the occurrence to the job's committed set,
 *   so a retried job or a second worker never records or delivers an
 *   occurrence twice. Every key of these scripts shares the hash-tag prefix
 *   (Redis Cluster safe); the scripts are files in `../store/redis/scripts/`.
 * - Bounded memory: claims and committed occurrences live in one hash and one
 *   sorted set per job, trimmed to `worker.occurrence_window_seconds`; a
 *   scheduled occurrence due at or before the job's last handled one is
 *   dropped when it is read (`last_due_at`, misfire.ts), however late it comes back.
 *
 * Write order: the record is written and confirmed first, then the BullMQ side
 * is armed or disarmed. The claim re-checks the record, so once a pause or
 * remove has been written no occurrence can start, even if its BullMQ job was
 * already waiting or picked up. `reconcile` re-arms scheduled jobs whose
 * BullMQ side is missing (a crash between the two steps).
 */
import { randomBytes } from 'node:crypto';
import type { Job } from 'bullmq';
import type { ReplicaAck } from '../store/redis/replica-ack.ts';
import type { RedisClient } from '../store/redis/connection-factory.ts';
import { StoreUnavailableError } from '../errors/store-unavailable-error.ts';
import { parseCronSchedulerId, type Keys } from '../store/keys.ts';
import { schedulerJobMillis, type HermesQueues } from '../store/queues.ts';
import { parseStreamEntry } from '../session/session-store.ts';
import { luaScript, runLuaScript } from '../store/redis/lua-script.ts';
import { cronOccurrenceId, cronSessionId, type CronDelivery, type CronJob, type CronRun } from './cron-job.ts';
import { encodePattern, leadFor, patternLead } from './repeat-strategy.ts';
import { nextOccurrence } from './cron-engine.ts';
import { encodeCronJob, readCronJob } from './cron-record-codec.ts';
import { bufferPlace } from './overlap-buffer.ts';
import { lexRange } from '../store/lex-index.ts';
import { ensureOrder } from '../store/order-repair.ts';
import { readPage, type Page, type PageRequest } from '../store/list-page.ts';
import { cronNamePrefix, cronNameSpellings, cronOrderId, cronOrderMember, cronOrderNamed } from './cron-order.ts';
import { afterAllKey, afterRunDigest, type ParentRunContext } from './cron-after.ts';

/** Data of a cron tick job in the `ticks` queue, as the worker reads it (`cronTickData`; a job scheduler stores less). */
export interface CronTickData {
  type: 'cron-tick';
  jobId: string;
  /** Job generation the occurrence belongs to. */
  generation: number;
  /** Due time for one-shot and manual jobs; scheduler jobs carry it in their id, less `leadMs`. */
  dueAt?: number;
  /** A job scheduler's jobs: the prefetch lead they are released with, ms (from its pattern, `repeat-strategy.ts`; absent: 0). */
  leadMs?: number;
  /** A manual run (`hermes cron run`, `resume --run-now`). */
  manual?: boolean;
  /** A backfilled occurrence (`hermes cron backfill`), due at `dueAt`. */
  backfill?: boolean;
  /** A run after a parent's run (`--after`): that run, with its output as the child's turn is offered it. */
  after?: ParentRunContext;
  /** A run after all its parents' runs (`--after-all`): those runs, by parent job id, with their outputs. */
  afterAll?: ParentRunContext[];
  /** A missed occurrence queued by `--misfire all` after an outage (misfire.ts), due at `dueAt`. */
  catchUp?: boolean;
  /** In a backfill or a catch-up after an outage: the occurrence before it, which runs first (`isAhead`). */
  follows?: OccurrenceRef;
}

/**
 * Data of the jobs a cron job scheduler makes, as stored (the template in its hash, copied into each job): the
 * generation alone. The job name says it is a cron tick, the scheduler id `cron:<id>` names the job, and the
 * pattern carries the prefetch lead (`repeat-strategy.ts`): `cronTickData` reads them back. Earlier versions
 * stored the whole `CronTickData`, which reads as it is; an earlier worker cannot read this form, so the
 * processes that share a Redis are upgraded together (docs/OPERATIONS.md).
 */
export type StoredCronSchedulerData = Pick<CronTickData, 'generation'>;

/**
 * A cron tick job's data with its `type`, `jobId` and `leadMs`: the stored data when it names them (every job but
 * a job scheduler's of this version), else what the job's scheduler id (`job.repeatJobKey`, or its
 * `repeat:cron:<id>:<millis>` id) and its pattern (`job.opts.repeat.pattern`) say.
 * @throws Error when the job names no cron job
 */
export function cronTickData(job: {
  data: unknown;
  id?: string | undefined;
  repeatJobKey?: string | undefined;
  opts: object;
}): CronTickData {
  const data = job.data as Partial<CronTickData> & StoredCronSchedulerData;
  if (data.type === 'cron-tick' && typeof data.jobId === 'string') return data as CronTickData;
  const schedulerId =
    job.repeatJobKey ?? (schedulerJobMillis(job.id) !== undefined ? job.id!.slice('repeat:'.length, job.id!.lastIndexOf(':')) : undefined);
  const jobId = schedulerId === undefined ? undefined : parseCronSchedulerId(schedulerId);
  if (jobId === undefined) throw new Error(`cron tick job ${job.id} names no cron job`);
  const pattern = (job.opts as { repeat?: { pattern?: string } }).repeat?.pattern;
  const leadMs = pattern ? patternLead(pattern).leadMs : 0;
  return { ...data, type: 'cron-tick', jobId, ...(leadMs > 0 ? { leadMs } : {}) };
}

/** Whether a `ticks` job is a cron tick: by its name, or by its data's `type` (jobs of earlier versions). */
export function isCronTick(job: Pick<Job, 'name' | 'data'>): boolean {
  return job.name === CRON_TICK_JOB_NAME || (job.data as { type?: string } | undefined)?.type === 'cron-tick';
}

/** An occurrence and the BullMQ job that runs it. */
export interface OccurrenceRef {
  occurrenceId: string;
  queueJobId: string;
}

/** BullMQ job name of cron ticks. */
export const CRON_TICK_JOB_NAME = 'cron-tick';

/** Attempts of a cron tick job: failures that never reached the model retry with backoff (docs/DESIGN.md §7 Retries). */
export const CRON_TICK_ATTEMPTS = 3;

/** Global recent-runs list length (for `hermes cron runs` without a job). */
export const RECENT_RUNS_MAX = 1000;

const CLAIM = luaScript('claim-cron-occurrence-5.lua');
const COMMIT_RUN = luaScript('commit-cron-run-8.lua');
const DELETE_JOB = luaScript('delete-cron-job-8.lua');
const PUT_JOB = luaScript('put-cron-job-3.lua');
const UPDATE_RUN = luaScript('update-cron-run-1.lua');
const JOIN_AFTER_ALL = luaScript('join-after-all-1.lua');
const TAKE_AFTER_ALL = luaScript('take-after-all-1.lua');

/** Result of `claim`: `ok`, or why the occurrence may not start. */
export type ClaimResult = 'ok' | 'removed' | 'done' | 'claimed' | 'stale' | 'repeat-used' | 'locked' | 'paused' | 'completed' | 'error';

/** Result of `commitRun`. */
export type RunCommitResult =
  { status: 'committed'; eventId: string | null; run: CronRun } | { status: 'duplicate' } | { status: 'conflict' } | { status: 'gone' };

/** Settings of the store (from `cron.*`). */
export interface CronStoreSettings {
  /** Run records kept per job (`cron.history_limit`). */
  historyLimit: number;
  /** How long a claim or a committed occurrence is remembered, ms (`worker.occurrence_window_seconds`). */
  occurrenceWindowMs: number;
  /** First delay of the exponential backoff of a tick retried after a network failure, ms (`cron.retry_backoff_seconds`). */
  retryBackoffMs: number;
  /** Entries kept per event stream of a job's session (`worker.events_max_entries`). */
  eventsMaxLen: number;
  /** Replicas a run's commit waits for (`redis.wait_replicas`); none when absent. */
  replicaAck?: ReplicaAck;
  /** How long before its due time a scheduled occurrence's job is released, ms (`cron.prefetch_lead_ms`; `repeat-strategy.ts`). */
  prefetchLeadMs: number;
}

/** Records, history and BullMQ jobs of cron jobs. */
export class CronStore {
  constructor(
    readonly redis: RedisClient,
    readonly keys: Keys,
    readonly queues: HermesQueues,
    readonly settings: CronStoreSettings,
  ) {}

  /** The job, or `null`. */
  async get(id: string): Promise<CronJob | null> {
    const raw = await this.redis.get(this.keys.cronJob(id));
    return raw ? readCronJob(raw) : null;
  }

  /**
   * Every stored job (unordered) of every shard, or of the shards listed.
   * Reads each shard on its own, in batches of 1000.
   */
  async list(shards?: readonly number[]): Promise<CronJob[]> {
    const out: CronJob[] = [];
    for (const k of this.keys.shards()) {
      if (shards && !shards.includes(k.shardIndex)) continue;
      const ids = await this.redis.smembers(k.cronJobIndex);
      for (let i = 0; i < ids.length; i += 1000) {
        const raws = await this.redis.mget(...ids.slice(i, i + 1000).map((id) => k.cronJob(id)));
        for (const r of raws) if (r !== null) out.push(readCronJob(r));
      }
    }
    return out;
  }

  /**
   * Write `job` over the version it was read at, or only when none exists (`'absent'`).
   * @returns the stored record (version + 1), or `null` when someone wrote in between
   * @throws StoreUnavailableError when Redis refused the write
   */
  async put(job: CronJob, expectedVersion: number | 'absent'): Promise<CronJob | null> {
    const k = this.keys.forCronJob(job.id);
    const stored: CronJob = { ...job, version: (typeof expectedVersion === 'number' ? expectedVersion : job.version) + 1 };
    try {
      const ok = await runLuaScript(
        this.redis,
        PUT_JOB,
        [k.cronJob(job.id), k.cronJobIndex, k.cronJobOrder],
        [String(expectedVersion), encodeCronJob(stored), job.id, cronOrderMember(job)],
      );
      return ok === 1 ? stored : null;
    } catch (err) {
      throw new StoreUnavailableError(`Redis did not take the cron job ${job.id}: ${(err as Error).message}`, { cause: err });
    }
  }

  /**
   * One page of jobs in list order (by name, then id: `cron-order.ts`), of every shard; reads the page's
   * records only (`store/list-page.ts`). Filters the order cannot answer (`keep`) are applied to the records read.
   * @param filter.namePrefix - only jobs whose name starts with it (ASCII letters in either case)
   * @throws ScheduleInputError (`cursor`) for a cursor this list did not give
   */
  async page(request: PageRequest, filter: { namePrefix?: string; keep?: (job: CronJob) => boolean } = {}): Promise<Page<CronJob>> {
    const shards = this.keys.shards();
    await this.ensureOrders();
    const prefix = filter.namePrefix ? cronNamePrefix(filter.namePrefix) : undefined;
    return await readPage<CronJob>(
      {
        list: 'cron-jobs',
        members: (after, count) =>
          lexRange(
            this.redis,
            shards.map((k) => k.cronJobOrder),
            { after, prefix },
            count,
          ),
        load: async (members) => {
          const ids = members.map(cronOrderId);
          const raws = await Promise.all(ids.map((id) => this.redis.get(this.keys.cronJob(id))));
          // A member whose record is gone or renamed in between is skipped: the record's own member is listed.
          return raws.map((r, i) => {
            const job = r ? readCronJob(r) : null;
            return job && cronOrderMember(job) === members[i] ? job : null;
          });
        },
        ...(filter.keep ? { keep: filter.keep } : {}),
      },
      request,
    );
  }

  /**
   * The jobs whose name equals `name` in any case (`toLowerCase`, as references compare), read from the list
   * order, never every job: the members under each spelling of the name (`cronNameSpellings`: one for a name
   * of ASCII letters) are compared by name, and only the records of those that match are read.
   */
  async withNameInAnyCase(name: string): Promise<CronJob[]> {
    await this.ensureOrders();
    const orders = this.keys.shards().map((k) => k.cronJobOrder);
    const { spellings, whole } = cronNameSpellings(name);
    const members = new Set<string>();
    for (const spelling of spellings) {
      const prefix = whole ? `${spelling}\0` : spelling;
      let after: string | undefined;
      for (;;) {
        const page = await lexRange(this.redis, orders, { after, prefix }, 1000);
        for (const m of page) if (cronOrderNamed(m, name)) members.add(m);
        if (page.length < 1000) break;
        after = page.at(-1);
      }
    }
    const found = await Promise.all([...members].map(async (m) => ({ m, raw: await this.redis.get(this.keys.cronJob(cronOrderId(m))) })));
    // A member whose record is gone or renamed in between is left out: the record's own member is compared.
    return found.flatMap(({ m, raw }) => {
      const job = raw ? readCronJob(raw) : null;
      return job && cronOrderMember(job) === m ? [job] : [];
    });
  }

  /** Make every shard's list order whole when it differs in size from its job index (`store/order-repair.ts`). */
  private async ensureOrders(): Promise<void> {
    await Promise.all(
      this.keys.shards().map((k) =>
        ensureOrder(this.redis, {
          index: k.cronJobIndex,
          order: k.cronJobOrder,
          membersOf: async (ids) =>
            (await this.redis.mget(...ids.map((id) => k.cronJob(id))))
              .filter((r): r is string => r !== null)
              .map((r) => cronOrderMember(readCronJob(r))),
        }),
      ),
    );
  }

  /** Delete the record, its history and its `--after-all` window. @returns whether it existed */
  async delete(id: string): Promise<boolean> {
    try {
      const ok = await runLuaScript(
        this.redis,
        DELETE_JOB,
        [
          this.keys.cronJob(id),
          this.keys.forCronJob(id).cronJobIndex,
          this.keys.cronRuns(id),
          this.keys.cronRunIndex(id),
          this.keys.cronClaims(id),
          this.keys.cronCommitted(id),
          this.keys.cronWatchBase(id),
          this.keys.forCronJob(id).cronJobOrder,
        ],
        [id],
      );
      await this.redis.del(this.keys.cronAfterAll(id));
      return ok === 1;
    } catch (err) {
      throw new StoreUnavailableError(`Redis did not remove cron job ${id}: ${(err as Error).message}`, { cause: err });
    }
  }

  /**
   * Make BullMQ fire the job's next occurrence: upsert the job scheduler of a
   * recurring job (replacing its pending job), or add the one-shot's delayed job.
   * A job that is not scheduled, or has no times of its own, is disarmed instead.
   * @throws StoreUnavailableError when Redis refused it
   */
  async arm(job: CronJob, now = Date.now()): Promise<void> {
    // A job with no times of its own (`--after` only) has nothing to arm: its parents' runs queue its runs.
    if (job.state !== 'scheduled' || job.schedule.kind === 'after') return await this.disarm(job);
    const data: CronTickData = { type: 'cron-tick', jobId: job.id, generation: job.generation };
    const ticks = this.queues.forCronJob(job.id).ticks;
    try {
      if (job.schedule.kind === 'once') {
        await ticks.removeJobScheduler(this.keys.cronSchedulerId(job.id));
        const dueAt = job.next_run_at ?? job.schedule.atMs;
        await ticks.add(
          CRON_TICK_JOB_NAME,
          { ...data, dueAt },
          {
            jobId: this.keys.cronOnceJobId(job.id, dueAt),
            delay: Math.max(0, dueAt - this.settings.prefetchLeadMs - now),
          },
        );
      } else {
        const lead = leadFor(job.schedule, job.tz, this.settings.prefetchLeadMs, now);
        const upsertFrom = Date.now();
        await ticks.upsertJobScheduler(
          this.keys.cronSchedulerId(job.id),
          { pattern: encodePattern(job.schedule, lead), tz: job.tz },
          { name: CRON_TICK_JOB_NAME, data: { generation: job.generation } satisfies StoredCronSchedulerData },
        );
        // BullMQ computes a scheduler's first job from the time of the upsert. When the
        // occurrence the record announces (`next_run_at`, computed before the record was
        // written) has passed by then — a slow store, a busy machine — or is due within the
        // prefetch lead, the scheduler starts at the one after it; that occurrence gets its
        // own job, so it still runs (late, under the misfire policy) instead of silently never running.
        // With a lead, the scheduler also leaves out an occurrence due within the lead from now (at most one: the
        // lead is at most half the period, `leadFor`), which gets its own job in the same way. BullMQ's clock read
        // that moment somewhere between `upsertFrom` and the upsert's answer: the earliest counts, so that an
        // occurrence falling in between is not left without a job (at worst it runs rather than coalescing).
        const first = job.next_run_at;
        const schedulerFirst = first === null ? undefined : await this.schedulerNext(job.id);
        if (first !== null && schedulerFirst !== undefined && schedulerFirst > first) {
          await this.addPassedOccurrence(job, first);
          const withinLead = lead > 0 ? nextOccurrence(job.schedule, job.tz, Math.max(first, upsertFrom)) : undefined;
          if (withinLead !== undefined && withinLead < schedulerFirst) await this.addPassedOccurrence(job, withinLead);
        }
      }
    } catch (err) {
      throw new StoreUnavailableError(`Redis did not take the schedule of cron job ${job.id}: ${(err as Error).message}`, { cause: err });
    }
  }

  /**
   * A job of its own for an occurrence of a scheduled job its job scheduler will not make (`arm` above; a pick-up
   * later than the prefetch lead allows: `skippedByLead`), released a lead before it is due. One per occurrence: its
   * id names the occurrence.
   * @throws StoreUnavailableError when Redis refused it
   */
  async addPassedOccurrence(job: Pick<CronJob, 'id' | 'generation'>, dueAt: number): Promise<void> {
    const data: CronTickData = { type: 'cron-tick', jobId: job.id, generation: job.generation, dueAt };
    try {
      await this.queues.forCronJob(job.id).ticks.add(CRON_TICK_JOB_NAME, data, {
        jobId: this.keys.cronPassedFirstJobId(job.id, dueAt),
        delay: Math.max(0, dueAt - this.settings.prefetchLeadMs - Date.now()),
      });
    } catch (err) {
      throw new StoreUnavailableError(`Redis did not take an occurrence of cron job ${job.id}: ${(err as Error).message}`, { cause: err });
    }
  }

  /**
   * Remove the job's BullMQ scheduler and its waiting job, and a one-shot's
   * delayed job. A job already picked up by a worker is not removed here; its
   * claim fails because the record changed first.
   */
  async disarm(job: Pick<CronJob, 'id' | 'schedule' | 'next_run_at'>): Promise<void> {
    try {
      const ticks = this.queues.forCronJob(job.id).ticks;
      await ticks.removeJobScheduler(this.keys.cronSchedulerId(job.id));
      if (job.schedule.kind === 'once') {
        const ids = new Set([job.schedule.atMs, job.next_run_at].filter((v): v is number => v !== null));
        for (const at of ids) await ticks.remove(this.keys.cronOnceJobId(job.id, at)).catch(() => 0);
      }
    } catch (err) {
      throw new StoreUnavailableError(`Redis did not remove the schedule of cron job ${job.id}: ${(err as Error).message}`, { cause: err });
    }
  }

  /** Queue a manual run due at `now`. @returns its BullMQ job id */
  async enqueueManual(job: CronJob, now = Date.now()): Promise<string> {
    const jobId = this.keys.cronManualJobId(job.id, now);
    const data: CronTickData = { type: 'cron-tick', jobId: job.id, generation: job.generation, dueAt: now, manual: true };
    await this.queues.forCronJob(job.id).ticks.add(CRON_TICK_JOB_NAME, data, { jobId });
    return jobId;
  }

  /**
   * Queue backfilled occurrences (`backfill.ts`), each its own job with an id per (job, due time), so a
   * request made again (a retry, a crash before it answered) adds nothing for an occurrence still queued,
   * running or kept among the completed jobs; each names the one before it, which runs first
   * (`isAhead`). Occurrences whose backfilled run is recorded in the job's history, or committed
   * within `worker.occurrence_window_seconds`, are not queued again.
   * @param dueTimes - oldest first
   * @returns the due times queued and those already recorded
   * @throws StoreUnavailableError when Redis refused it
   */
  async enqueueBackfill(job: CronJob, dueTimes: number[]): Promise<{ queued: number[]; recorded: number[] }> {
    const occ = (at: number) => cronOccurrenceId(job.id, at, 'backfill');
    try {
      const runs = dueTimes.length === 0 ? [] : await this.redis.hmget(this.keys.cronRuns(job.id), ...dueTimes.map(occ));
      const committed = await Promise.all(dueTimes.map((at) => this.isCommitted(job.id, occ(at))));
      const recorded = dueTimes.filter((_, i) => runs[i] !== null || committed[i]);
      const queued = dueTimes.filter((at) => !recorded.includes(at));
      await this.queues.forCronJob(job.id).ticks.addBulk(
        queued.map((dueAt, i) => ({
          name: CRON_TICK_JOB_NAME,
          data: {
            type: 'cron-tick',
            jobId: job.id,
            generation: job.generation,
            dueAt,
            backfill: true,
            ...(i > 0
              ? { follows: { occurrenceId: occ(queued[i - 1]!), queueJobId: this.keys.cronBackfillJobId(job.id, queued[i - 1]!) } }
              : {}),
          } satisfies CronTickData,
          opts: { jobId: this.keys.cronBackfillJobId(job.id, dueAt) },
        })),
      );
      return { queued, recorded };
    } catch (err) {
      throw new StoreUnavailableError(`Redis did not take the backfill of cron job ${job.id}: ${(err as Error).message}`, { cause: err });
    }
  }

  /**
   * Queue the missed occurrences `--misfire all` runs after an outage (misfire.ts, `catchUpsAfter`), each its own
   * job with an id per (job, due time) — a second pick-up of the same overdue occurrence adds nothing — and each
   * after the one before it (`isAhead`), the first after `first` (the overdue occurrence that found them, run or skipped).
   * @param dueTimes - oldest first
   * @throws StoreUnavailableError when Redis refused it
   */
  async enqueueCatchUps(job: CronJob, first: OccurrenceRef, dueTimes: number[]): Promise<void> {
    const refOf = (at: number): OccurrenceRef => ({
      occurrenceId: cronOccurrenceId(job.id, at, 'schedule'),
      queueJobId: this.keys.cronCatchUpJobId(job.id, at),
    });
    try {
      await this.queues.forCronJob(job.id).ticks.addBulk(
        dueTimes.map((dueAt, i) => {
          const after = i > 0 ? refOf(dueTimes[i - 1]!) : first;
          return {
            name: CRON_TICK_JOB_NAME,
            data: {
              type: 'cron-tick',
              jobId: job.id,
              generation: job.generation,
              dueAt,
              catchUp: true,
              ...(after ? { follows: after } : {}),
            } satisfies CronTickData,
            opts: { jobId: refOf(dueAt).queueJobId },
          };
        }),
      );
    } catch (err) {
      throw new StoreUnavailableError(`Redis did not take the catch-up runs of cron job ${job.id}: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  /**
   * Whether an occurrence is still ahead of the one queued after it: not committed, and its job still queued,
   * delayed or running (one that failed for good, or is gone, holds nothing up).
   */
  async isAhead(jobId: string, ref: OccurrenceRef): Promise<boolean> {
    if (await this.isCommitted(jobId, ref.occurrenceId)) return false;
    const job = await this.queues.forCronJob(jobId).ticks.getJob(ref.queueJobId);
    if (!job) return false;
    const state = await job.getState();
    return state !== 'failed' && state !== 'completed' && state !== 'unknown';
  }

  /** Whether a lock holder (a BullMQ job id) is a backfilled occurrence of the job. */
  isBackfillHolder(jobId: string, holder: string | null): boolean {
    return holder !== null && holder.startsWith(this.keys.cronBackfillJobIdPrefix(jobId));
  }

  /**
   * Queue the run of `child` after the parent run `parent`, due at `dueAt`. Its BullMQ job id is made from the
   * child and the parent run (`Keys.cronAfterJobId`), so a hand-off made again (a retried commit path) adds nothing;
   * past the queue's retention the child's claim still finds its occurrence committed.
   * @returns its BullMQ job id
   */
  async enqueueAfter(child: Pick<CronJob, 'id' | 'generation'>, parent: ParentRunContext, dueAt: number): Promise<string> {
    const jobId = this.keys.cronAfterJobId(child.id, afterRunDigest(parent.occurrenceId));
    const data: CronTickData = { type: 'cron-tick', jobId: child.id, generation: child.generation, dueAt, after: parent };
    await this.queues.forCronJob(child.id).ticks.add(CRON_TICK_JOB_NAME, data, { jobId });
    return jobId;
  }

  /**
   * A parent's run, ended at `at`, joins the window of `child`, which waits for all its parents (`--after-all`):
   * kept as that parent's run unless a later one is kept, or a run of the child took it or a later one
   * (`join-after-all-1.lua`), so a hand-off made again adds nothing.
   * @returns the runs waiting in the window, by parent job id
   */
  async joinAfterAll(childId: string, parent: ParentRunContext, at: number): Promise<Map<string, ParentRunContext>> {
    const entry = JSON.stringify({ occurrence_id: parent.occurrenceId, at, context: parent });
    const flat = (await runLuaScript(
      this.redis,
      JOIN_AFTER_ALL,
      [this.keys.cronAfterAll(childId)],
      [parent.jobId, parent.occurrenceId, at, entry],
    )) as string[];
    const waiting = new Map<string, ParentRunContext>();
    for (let i = 0; i + 1 < flat.length; i += 2) {
      if (flat[i]!.startsWith('run:'))
        waiting.set(flat[i]!.slice('run:'.length), (JSON.parse(flat[i + 1]!) as { context: ParentRunContext }).context);
    }
    return waiting;
  }

  /**
   * Queue the run of `child` after all of `parents`' runs (`--after-all`), due at `dueAt`, then take those runs out
   * of its window. Its BullMQ job id is made from the parents' runs (`afterAllKey`): queued again after a crash
   * between the two steps, it is the same job.
   * @param parents - one run per parent, by parent job id
   * @returns its BullMQ job id
   */
  async enqueueAfterAll(child: Pick<CronJob, 'id' | 'generation'>, parents: ParentRunContext[], dueAt: number): Promise<string> {
    const jobId = this.keys.cronAfterJobId(child.id, afterRunDigest(afterAllKey(parents)));
    const data: CronTickData = { type: 'cron-tick', jobId: child.id, generation: child.generation, dueAt, afterAll: parents };
    await this.queues.forCronJob(child.id).ticks.add(CRON_TICK_JOB_NAME, data, { jobId });
    const taken = parents.flatMap((p) => [p.jobId, p.occurrenceId, p.endedAt]);
    await runLuaScript(this.redis, TAKE_AFTER_ALL, [this.keys.cronAfterAll(child.id)], taken);
    return jobId;
  }

  /** Start the window of `--after-all` afresh: its parents, or the setting, changed (`CronCommands.edit`). */
  async resetAfterAll(id: string): Promise<void> {
    await this.redis.del(this.keys.cronAfterAll(id));
  }

  /**
   * List `childId` among the jobs that run after each of `parentIds` (`Keys.cronChildren`, on each parent's shard).
   * Written before the child's record names a parent and taken out after it stops naming one, so the index is
   * never short of a child its record names.
   */
  async linkChildren(childId: string, parentIds: readonly string[]): Promise<void> {
    for (const parentId of parentIds) await this.redis.sadd(this.keys.cronChildren(parentId), childId);
  }

  /** Take `childId` out of the jobs that run after each of `parentIds`. */
  async unlinkChildren(childId: string, parentIds: readonly string[]): Promise<void> {
    for (const parentId of parentIds) await this.redis.srem(this.keys.cronChildren(parentId), childId);
  }

  /** Drop the list of jobs that run after `parentId` (it was removed). */
  async forgetChildren(parentId: string): Promise<void> {
    await this.redis.del(this.keys.cronChildren(parentId));
  }

  /** Ids of the jobs listed as running after `parentId` (candidates: each one's record decides). */
  async children(parentId: string): Promise<string[]> {
    return await this.redis.smembers(this.keys.cronChildren(parentId));
  }

  /** Epoch ms the job scheduler's pending job is due (its time plus the lead), or `undefined` when there is no scheduler. */
  async schedulerNext(id: string): Promise<number | undefined> {
    const s = await this.queues.forCronJob(id).ticks.getJobScheduler(this.keys.cronSchedulerId(id));
    return s?.next !== undefined && s.next !== null ? Number(s.next) + (s.pattern ? patternLead(s.pattern).leadMs : 0) : undefined;
  }

  /** Whether a one-shot's delayed job exists. */
  async hasOnceJob(id: string, atMs: number): Promise<boolean> {
    return (await this.queues.forCronJob(id).ticks.getJob(this.keys.cronOnceJobId(id, atMs))) !== undefined;
  }

  /**
   * Claim an occurrence for `holder` (a BullMQ job id) before its turn starts,
   * against the job record as it is now. Succeeds when the job still exists
   * and — unless `manual` — is scheduled in `generation`, the occurrence is not committed,
   * and nobody else holds it (the same holder, a handed-back, stalled or
   * retried job, takes it over as its next attempt). A scheduled occurrence of
   * a `--repeat N` job is refused (`repeat-used`) while completed runs plus
   * scheduled runs in flight already make N.
   * @returns `ok` with the attempt number (1 the first time) and the entries of the occurrence's turn journal (0: a
   *   fresh turn, which opens none without reading it), or why not
   */
  async claim(input: {
    jobId: string;
    occurrenceId: string;
    holder: string;
    generation: number;
    manual: boolean;
    /** A run after another job's run (`--after`): the job must be scheduled; no generation or `--repeat` check. */
    after?: boolean;
    dueAt: number;
    /** Claimed to be recorded as skipped (overlap, misfire): takes nothing from the `--repeat` budget. */
    skip?: boolean;
    /**
     * Take the turn lock of the job's session `cron:<id>` for `holder` with the claim, for this many ms (a claim
     * ahead, `worker/cron/cron-claim-ahead.ts`): free or `holder`'s already, or neither is taken (`locked`).
     */
    lockTtlMs?: number;
  }): Promise<{ status: 'ok'; attempt: number; journalEntries: number } | { status: Exclude<ClaimResult, 'ok'> }> {
    const k = this.keys.forCronJob(input.jobId);
    const [status, attempt, journalEntries] = (await runLuaScript(
      this.redis,
      CLAIM,
      [
        k.cronJob(input.jobId),
        k.cronClaims(input.jobId),
        k.cronCommitted(input.jobId),
        k.turnJournal(cronSessionId(input.jobId), input.occurrenceId),
        k.turnLock(cronSessionId(input.jobId)),
      ],
      [
        input.occurrenceId,
        input.holder,
        String(input.generation),
        input.manual ? '1' : input.after ? '2' : '0',
        input.dueAt,
        Date.now(),
        this.windowMs,
        input.skip ? '1' : '0',
        input.lockTtlMs === undefined ? '' : String(Math.max(1, Math.ceil(input.lockTtlMs))),
      ],
    )) as [ClaimResult, number, number?];
    return status === 'ok' ? { status, attempt, journalEntries: journalEntries ?? 0 } : { status };
  }

  /**
   * Forget the claim of an occurrence claimed ahead of its due time that will not run on it after all: its job
   * was paused, edited or removed before the due time (`worker/cron/cron-claim-ahead.ts`). Only its holder calls
   * this (a claim held by one holder is never taken by another), so the `--repeat` budget does not count it.
   */
  async unclaim(jobId: string, occurrenceId: string): Promise<void> {
    await this.redis.hdel(this.keys.cronClaims(jobId), occurrenceId);
  }

  /**
   * Whether the job scheduler made a job for a scheduled occurrence: its job is there (in any state), or it was
   * claimed or run (a job that ran may be gone). For `skippedByLead`'s unsure answer (`worker/cron/cron-processor.ts`).
   * @param dueAt - the occurrence's due time, epoch ms
   * @param leadMs - the lead its jobs are released with
   */
  async schedulerMadeOccurrence(jobId: string, occurrenceId: string, dueAt: number, leadMs: number): Promise<boolean> {
    const ticks = this.queues.forCronJob(jobId).ticks;
    const [state, claimed, run] = await Promise.all([
      ticks.getJobState(`repeat:${this.keys.cronSchedulerId(jobId)}:${dueAt - leadMs}`),
      this.redis.hexists(this.keys.cronClaims(jobId), occurrenceId),
      this.redis.hexists(this.keys.cronRuns(jobId), occurrenceId),
    ]);
    return state !== 'unknown' || claimed === 1 || run === 1;
  }

  /** Whether `holder` (a BullMQ job id) holds a claim of an occurrence of a job (within the remembered window). */
  async hasClaimBy(jobId: string, holder: string): Promise<boolean> {
    const claims = await this.redis.hvals(this.keys.cronClaims(jobId));
    return claims.some((c) => (JSON.parse(c) as { holder: string }).holder === holder);
  }

  /**
   * Join the job's overlap buffer (`--overlap buffer_all`, `overlap-buffer.ts`), or keep its place there,
   * and drop the stale entries. The buffer expires with the occurrence window, so a removed job leaves none.
   * @returns where the occurrence stands among the live entries (0: first)
   */
  async joinBuffer(job: Pick<CronJob, 'id' | 'generation' | 'last_due_at'>, member: string, dueAt: number): Promise<number> {
    const key = this.keys.cronBuffer(job.id);
    const res = await this.redis.multi().zadd(key, 'NX', dueAt, member).pexpire(key, this.windowMs).zrange(key, 0, -1, 'WITHSCORES').exec();
    const flat = (res?.[2]?.[1] ?? []) as string[];
    const entries: Array<[string, number]> = [];
    for (let i = 0; i + 1 < flat.length; i += 2) entries.push([flat[i]!, Number(flat[i + 1])]);
    const { place, stale } = bufferPlace(entries, member, job);
    if (stale.length > 0) await this.redis.zrem(key, ...stale);
    return place;
  }

  /** Leave the job's overlap buffer: the occurrence was claimed (to run, or to be recorded as skipped). */
  async leaveBuffer(jobId: string, member: string): Promise<void> {
    await this.redis.zrem(this.keys.cronBuffer(jobId), member);
  }

  /** The occurrence `holder` (a BullMQ job id) has claimed and not committed yet, if any. */
  async claimedBy(jobId: string, holder: string): Promise<string | undefined> {
    const claims = await this.redis.hgetall(this.keys.cronClaims(jobId));
    return Object.entries(claims).find(([, c]) => (JSON.parse(c) as { holder: string }).holder === holder)?.[0];
  }

  /** Whether an occurrence of a job was committed (within the remembered window). */
  async isCommitted(jobId: string, occurrenceId: string): Promise<boolean> {
    return (await this.redis.zscore(this.keys.cronCommitted(jobId), occurrenceId)) !== null;
  }

  /**
   * Give a tick job a worker took its BullMQ attempts and backoff (docs/DESIGN.md §7 Retries). Tick jobs are
   * stored without them — every pending job and job scheduler would carry them, bytes per stored job
   * (docs/BENCHMARKS.md, "Cron store") — and BullMQ reads them from the job it holds when the job fails.
   * A job stored with attempts of its own (by an earlier version) keeps them.
   */
  applyRetryPolicy(job: Pick<Job, 'opts'>): void {
    if (job.opts.attempts) return;
    job.opts.attempts = CRON_TICK_ATTEMPTS;
    job.opts.backoff = { type: 'exponential', delay: this.settings.retryBackoffMs };
  }

  private get windowMs(): number {
    return this.settings.occurrenceWindowMs;
  }

  /**
   * Record a run once per occurrence, atomically with the job's new state
   * (written over `expectedVersion`) and, when `localEvent` is given, the reply
   * event on the job's session stream (the `local` target becomes `delivered`
   * with the stream id as evidence). The occurrence's claim is released in
   * the same step.
   * @returns `committed`; `duplicate` when the occurrence was recorded before;
   *   `conflict` when the job changed since it was read (re-read and retry);
   *   `gone` when the job was removed meanwhile
   */
  async commitRun(input: {
    run: CronRun;
    job: CronJob;
    expectedVersion: number;
    localEvent: Record<string, unknown> | null;
  }): Promise<RunCommitResult> {
    const { run } = input;
    const stored: CronJob = { ...input.job, version: input.expectedVersion + 1 };
    // The `local` target's evidence is the reply event's stream id, known inside the script only: the run goes
    // with the target marked delivered and a token of this call where the id goes, which the script replaces.
    const evidence = input.localEvent ? `evidence-${randomBytes(16).toString('hex')}` : '';
    const sent: CronRun = input.localEvent
      ? { ...run, deliveries: run.deliveries.map((d) => (d.target === 'local' ? { ...d, status: 'delivered', evidence } : d)) }
      : run;
    // Every key on the job's shard (its session `cron:<id>` lives there too): one slot for the script.
    const k = this.keys.forCronJob(run.job_id);
    const keys = [
      k.cronCommitted(run.job_id),
      k.cronJob(run.job_id),
      k.cronRuns(run.job_id),
      k.cronRunIndex(run.job_id),
      k.cronRecentRuns,
      k.events(cronSessionId(run.job_id)),
      k.cronClaims(run.job_id),
      k.turnJournal(cronSessionId(run.job_id), run.occurrence_id),
    ];
    const [code, eventId] = (await runLuaScript(this.redis, COMMIT_RUN, keys, [
      JSON.stringify(sent),
      run.occurrence_id,
      Date.now(),
      this.windowMs,
      this.settings.historyLimit,
      RECENT_RUNS_MAX,
      String(input.expectedVersion),
      encodeCronJob(stored),
      input.localEvent ? JSON.stringify(input.localEvent) : '',
      this.settings.eventsMaxLen,
      this.keys.cronRecentRunEntry(run.job_id, run.occurrence_id),
      evidence,
    ])) as [number, string];
    if (code === 1) {
      await this.settings.replicaAck?.after(this.redis, keys[0]!);
      const deliveries = run.deliveries.map((d): CronDelivery =>
        d.target === 'local' && eventId ? { ...d, status: 'delivered', evidence: eventId } : d,
      );
      return { status: 'committed', eventId: eventId || null, run: { ...run, deliveries } };
    }
    if (code === 0) return { status: 'duplicate' };
    if (code === -2) return { status: 'gone' };
    return { status: 'conflict' };
  }

  /** One run record, or `null` (never recorded, or trimmed from the history). */
  async getRun(jobId: string, occurrenceId: string): Promise<CronRun | null> {
    const raw = await this.redis.hget(this.keys.cronRuns(jobId), occurrenceId);
    return raw ? (JSON.parse(raw) as CronRun) : null;
  }

  /** Replace a recorded run (delivery outcomes); no-op when it is no longer in the history. */
  async updateRun(run: CronRun): Promise<void> {
    await runLuaScript(this.redis, UPDATE_RUN, [this.keys.cronRuns(run.job_id)], [run.occurrence_id, JSON.stringify(run)]);
  }

  /** A job's runs, newest first. */
  async runs(jobId: string, limit: number): Promise<CronRun[]> {
    const ids = await this.redis.lrange(this.keys.cronRunIndex(jobId), 0, Math.max(0, limit - 1));
    if (ids.length === 0) return [];
    const raws = await this.redis.hmget(this.keys.cronRuns(jobId), ...ids);
    return raws.filter((r): r is string => r !== null).map((r) => JSON.parse(r) as CronRun);
  }

  /**
   * The whole output of each run (`hermes cron logs`): what its `local` target got — the reply event on
   * the job's session stream `cron:<id>`, found by the stream id its delivery names — else the record's
   * copy (`output`, capped at `MAX_RUN_OUTPUT_CHARS`), else the error. An event trimmed from the stream
   * (`events_max_len`) falls back to the record's copy.
   * @returns the text per occurrence id, and whether it is the whole output
   */
  async wholeOutputs(jobId: string, runs: CronRun[]): Promise<Map<string, { text: string; whole: boolean }>> {
    const stream = this.keys.forCronJob(jobId).events(cronSessionId(jobId));
    const local = runs.map((r) => r.deliveries.find((d) => d.target === 'local' && d.status === 'delivered' && d.evidence)?.evidence);
    const pipe = this.redis.pipeline();
    for (const id of local) if (id) pipe.xrange(stream, id, id);
    const answers = local.some(Boolean) ? ((await pipe.exec()) ?? []) : [];
    const out = new Map<string, { text: string; whole: boolean }>();
    let i = 0;
    runs.forEach((run, n) => {
      let text: string | undefined;
      if (local[n]) {
        const [err, entries] = answers[i++] ?? [null, []];
        const entry = !err ? (entries as Array<[string, string[]]>)[0] : undefined;
        const data = entry ? parseStreamEntry(entry[0], entry[1]).data : undefined;
        if (typeof data?.text === 'string') text = data.text;
      }
      if (text !== undefined && run.status === 'ok') out.set(run.occurrence_id, { text, whole: true });
      else if (run.output !== null) out.set(run.occurrence_id, { text: run.output, whole: !run.output.endsWith('\n[output cut]') });
      else out.set(run.occurrence_id, { text: run.error ?? '', whole: true });
    });
    return out;
  }

  /**
   * Recent runs of all jobs, newest first (by start time): the newest `limit`
   * live runs of every shard's recent-runs list, merged.
   *
   * Entries of removed jobs (and runs trimmed from a job's history) stay in
   * the recent-runs list until it is trimmed; they are skipped and the list is
   * read on, page by page, until `limit` live runs are found or the list ends,
   * so a removed job never shortens the answer.
   * @param limit - how many runs at most (>= 1)
   */
  async recentRuns(limit: number): Promise<CronRun[]> {
    const out: CronRun[] = [];
    const want = Math.max(1, limit);
    const page = Math.max(want, 100);
    for (const k of this.keys.shards()) {
      let found = 0;
      for (let start = 0; found < want; start += page) {
        const entries = await this.redis.lrange(k.cronRecentRuns, start, start + page - 1);
        if (entries.length === 0) break;
        const pipe = this.redis.pipeline();
        for (const e of entries) {
          const { jobId, occurrenceId } = k.parseCronRecentRunEntry(e);
          pipe.hget(this.keys.cronRuns(jobId), occurrenceId);
        }
        const replies = (await pipe.exec()) ?? [];
        for (const [err, raw] of replies) {
          if (err) throw err;
          if (typeof raw !== 'string') continue;
          out.push(JSON.parse(raw) as CronRun);
          if (++found >= want) break;
        }
        if (entries.length < page) break;
      }
    }
    if (this.keys.shardCount === 1) return out;
    return out.sort((a, b) => runTime(b) - runTime(a)).slice(0, want);
  }

  /**
   * Re-arm scheduled jobs whose BullMQ side is missing (a crash between the
   * record write and the arm). Idempotent; call at worker start.
   * @param shards - only these shards (a worker's `worker.shards`); default every shard
   * @returns how many were re-armed
   */
  async reconcile(now = Date.now(), shards?: readonly number[]): Promise<number> {
    let rearmed = 0;
    for (const job of await this.list(shards)) {
      if (job.state !== 'scheduled' || job.schedule.kind === 'after') continue;
      const armed =
        job.schedule.kind === 'once'
          ? job.next_run_at !== null && (await this.hasOnceJob(job.id, job.next_run_at))
          : (await this.schedulerNext(job.id)) !== undefined;
      if (!armed) {
        await this.arm(job, now);
        rearmed++;
      }
    }
    return rearmed;
  }
}

/** When a run started (or was due), epoch ms, for ordering runs of several shards. */
function runTime(run: CronRun): number {
  return run.started_at ?? run.due_at;
}
