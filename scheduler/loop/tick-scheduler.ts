/**
 * The BullMQ side of loops and heartbeats: arming and disarming the jobs that carry their ticks.
 *
 * - A fixed-cadence schedule is one BullMQ job scheduler (`<kind>:<session>`,
 *   `every` = interval). A self-paced loop has no scheduler: each tick adds the
 *   next delayed job under a deterministic id, so two adds never make two jobs.
 * - Prefetch lead: a job is released `leadMs` before its occurrence is due and
 *   the worker starts the turn exactly at the due time; every conversion between
 *   a job's time and its occurrence's due time is `prefetch-lead.ts`.
 * - The jobs' names and data: `tick-job.ts`.
 *
 * Write order (no silent writes, docs/DESIGN.md §6): the record is written first and
 * confirmed (`loop-records.ts`); then the scheduler is armed or disarmed here. A worker
 * re-arms any active fixed schedule whose scheduler is missing (`reconcile`), so a crash
 * between the two steps cannot leave an active loop that never fires.
 */
import type { Job } from 'bullmq';
import { StoreUnavailableError } from '../errors/store-unavailable-error.ts';
import { bullJobId, compositeId, type Keys } from '../store/keys.ts';
import type { LoopKind } from '../tick/tick-kind.ts';
import { schedulerJobMillis, type HermesQueues } from '../store/queues.ts';
import { resumeDueAt, type LoopRecord } from './loop-state.ts';
import type { LoopRecords } from './loop-records.ts';
import { prefetchLead } from './prefetch-lead.ts';
import { tickJobName, type StoredTickJobData, type TickJobData } from './tick-job.ts';

/** Job schedulers and delayed jobs of loop and heartbeat ticks. */
export class TickScheduler {
  /** Job time ⇄ due time (`prefetch-lead.ts`). */
  private readonly lead: ReturnType<typeof prefetchLead>;

  constructor(
    private readonly keys: Keys,
    private readonly queues: HermesQueues,
    /** Read by `reconcile` for the active schedules. */
    private readonly records: Pick<LoopRecords, 'list'>,
    /** Prefetch lead in ms (`worker.prefetch_lead_ms`). */
    readonly leadMs: number,
  ) {
    this.lead = prefetchLead(leadMs);
  }

  /**
   * Arm the schedule so its next tick is due at `firstDueAt` (epoch ms).
   * Fixed cadence: upsert the job scheduler (replacing any previous one and its
   * pending job). Self-paced: add the next delayed tick job.
   * @throws StoreUnavailableError when Redis refused it
   */
  async arm(record: LoopRecord, firstDueAt: number): Promise<void> {
    const data: StoredTickJobData = { loopId: record.loopId };
    try {
      if (record.mode === 'fixed' && record.intervalSeconds) {
        // Remove first: an upsert with an unchanged `every` keeps the old next
        // occurrence and ignores `startDate`, so a replaced loop would not fire "now".
        await this.removeScheduler(record.sessionId, record.kind);
        await this.queues
          .forSession(record.sessionId)
          .ticks.upsertJobScheduler(
            this.keys.loopSchedulerId(record.sessionId, record.kind),
            { every: record.intervalSeconds * 1000, startDate: this.lead.firstJobAt(firstDueAt, Date.now()) },
            { name: tickJobName(record), data },
          );
      } else {
        await this.removeScheduler(record.sessionId, record.kind);
        await this.queues.forSession(record.sessionId).ticks.add(
          tickJobName(record),
          { ...data, kind: record.kind, sessionId: record.sessionId },
          {
            jobId: bullJobId('selfpaced', record.kind, record.sessionId, record.loopId, firstDueAt),
            delay: Math.max(0, this.lead.jobAt(firstDueAt) - Date.now()),
          },
        );
      }
    } catch (err) {
      throw new StoreUnavailableError(`Redis did not take the ${record.kind} schedule: ${(err as Error).message}`, { cause: err });
    }
  }

  /**
   * Remove the job scheduler and its pending job in whatever state it waits
   * (BullMQ's own removal only takes a *delayed* job; a job already due sits in
   * the wait list). A job that is running is left to finish. No-op when there is none.
   */
  async removeScheduler(sessionId: string, kind: LoopKind): Promise<void> {
    const schedulerId = this.keys.loopSchedulerId(sessionId, kind);
    const ticks = this.queues.forSession(sessionId).ticks;
    const scheduler = await ticks.getJobScheduler(schedulerId);
    await ticks.removeJobScheduler(schedulerId);
    // Only after the job scheduler is gone may its last job be removed (BullMQ refuses before).
    if (scheduler?.next !== undefined && scheduler.next !== null) {
      await ticks.remove(`repeat:${schedulerId}:${scheduler.next}`).catch(() => 0);
    }
  }

  /**
   * Epoch ms the next tick is due, or `undefined` when unknown. A fixed loop's
   * comes from its job scheduler; a self-paced loop's is the record's own
   * `nextDueAt` (the one tick that may fire next, set when the last tick
   * finished).
   */
  async nextDueAt(record: LoopRecord): Promise<number | undefined> {
    if (record.mode !== 'fixed') return record.nextDueAt ?? undefined;
    const s = await this.queues
      .forSession(record.sessionId)
      .ticks.getJobScheduler(this.keys.loopSchedulerId(record.sessionId, record.kind));
    return s?.next !== undefined && s.next !== null ? this.lead.dueAt(Number(s.next)) : undefined;
  }

  /**
   * Re-arm active fixed schedules whose job scheduler is missing (a crash
   * between the state write and the scheduler write). Idempotent. A scheduler
   * whose jobs bear another name than its loop's runner calls for
   * (`tickJobName`; a command loop armed by an earlier version) is armed again
   * at the same next due time, so its ticks run in their pool of turn slots.
   * @param shards - only these shards (a worker's `worker.shards`); default every shard
   * @returns how many were re-armed
   */
  async reconcile(now = Date.now(), shards?: readonly number[]): Promise<number> {
    const active = (await this.records.list(shards)).filter((r) => r.status === 'active' && r.mode === 'fixed');
    if (active.length === 0) return 0;
    // One call per shard for all its schedulers instead of one round trip per loop (this runs at every worker start).
    const existing = new Map<string, { name: string; next?: number | null }>();
    for (const q of this.queues.shards()) {
      if (shards && !shards.includes(q.keys.shardIndex)) continue;
      for (const s of await q.ticks.getJobSchedulers(0, -1)) existing.set(`${q.keys.shardIndex} ${s.key}`, s);
    }
    let rearmed = 0;
    for (const record of active) {
      const scheduler = existing.get(
        `${this.keys.shardOfSession(record.sessionId)} ${this.keys.loopSchedulerId(record.sessionId, record.kind)}`,
      );
      if (scheduler?.name === tickJobName(record)) continue;
      const next = scheduler?.next;
      await this.arm(record, next !== undefined && next !== null ? this.lead.dueAt(Number(next)) : resumeDueAt(record, now));
      rearmed++;
    }
    return rearmed;
  }

  /**
   * The occurrence a tick job stands for.
   * @returns due time (epoch ms) and a unique occurrence id
   */
  occurrenceOf(job: Job<TickJobData>): { dueAt: number; occurrenceId: string } {
    const millis = schedulerJobMillis(job.id);
    if (millis !== undefined) {
      return { dueAt: this.lead.dueAt(millis), occurrenceId: compositeId(job.data.kind, job.data.loopId, millis) };
    }
    const tail = Number(job.id?.slice(job.id.lastIndexOf('|') + 1));
    const dueAt = Number.isFinite(tail) ? tail : this.lead.dueAt(job.timestamp + (job.opts.delay ?? 0));
    return { dueAt, occurrenceId: compositeId(job.data.kind, job.data.loopId, dueAt) };
  }
}
