/**
 * Loops and heartbeats in Redis, one object over their three parts: the records and their
 * mutation lock (`loop-records.ts`), the BullMQ jobs that carry their ticks (`tick-scheduler.ts`)
 * and the start of a tick — gate read, claim, in-flight mark (`tick-claim.ts`). Each method
 * delegates to its part, documented there.
 */
import type { Job } from 'bullmq';
import type { RedisClient } from '../store/redis/connection-factory.ts';
import type { Keys } from '../store/keys.ts';
import type { LoopKind } from '../tick/tick-kind.ts';
import type { ExpectedVersion } from '../store/versioned-json.ts';
import type { HermesQueues } from '../store/queues.ts';
import type { LoopRecord } from './loop-state.ts';
import { LoopRecords } from './loop-records.ts';
import type { Page, PageRequest } from '../store/list-page.ts';
import { TickScheduler } from './tick-scheduler.ts';
import { TickClaim, type ClaimTickInput, type ClaimTickResult, type GateRead, type InflightMark } from './tick-claim.ts';
import type { TickJobData } from './tick-job.ts';

// Kept importable from here for the callers written against the single store.
export type { GateRead, InflightMark } from './tick-claim.ts';
export { COMMAND_TICK_JOB_NAME, TICK_JOB_NAME, tickJobData, tickJobName, type StoredTickJobData, type TickJobData } from './tick-job.ts';

/** Records, job schedulers and tick claims of loops and heartbeats. */
export class LoopStore {
  readonly records: LoopRecords;
  readonly scheduler: TickScheduler;
  readonly claim: TickClaim;

  constructor(
    redis: RedisClient,
    keys: Keys,
    queues: HermesQueues,
    /** Prefetch lead in ms (`worker.prefetch_lead_ms`). */
    readonly leadMs: number,
    /** Entries kept per session event stream (`worker.events_max_entries`). */
    eventsMaxLen: number,
  ) {
    this.records = new LoopRecords(redis, keys);
    this.scheduler = new TickScheduler(keys, queues, this.records, leadMs);
    this.claim = new TickClaim(redis, keys, eventsMaxLen);
  }

  /** {@link LoopRecords.get} */
  get(sessionId: string, kind: LoopKind): Promise<LoopRecord | null> {
    return this.records.get(sessionId, kind);
  }

  /** {@link LoopRecords.put} */
  put(record: LoopRecord, expectedVersion: ExpectedVersion): Promise<LoopRecord | null> {
    return this.records.put(record, expectedVersion);
  }

  /** {@link LoopRecords.lockMutation} */
  lockMutation(sessionId: string, kind: LoopKind, waitMs?: number): Promise<() => Promise<void>> {
    return this.records.lockMutation(sessionId, kind, waitMs);
  }

  /** {@link LoopRecords.delete} */
  delete(sessionId: string, kind: LoopKind): Promise<void> {
    return this.records.delete(sessionId, kind);
  }

  /** {@link LoopRecords.forgetWatch} */
  forgetWatch(sessionId: string, kind: LoopKind): Promise<void> {
    return this.records.forgetWatch(sessionId, kind);
  }

  /** {@link LoopRecords.page} */
  page(request: PageRequest, filter?: { sessionPrefix?: string; keep?: (r: LoopRecord) => boolean }): Promise<Page<LoopRecord>> {
    return this.records.page(request, filter);
  }

  /** {@link LoopRecords.list} */
  list(shards?: readonly number[]): Promise<LoopRecord[]> {
    return this.records.list(shards);
  }

  /** {@link TickClaim.readGate} */
  readGate(sessionId: string, kind: LoopKind): Promise<GateRead> {
    return this.claim.readGate(sessionId, kind);
  }

  /** {@link TickClaim.claimTick} */
  claimTick(sessionId: string, kind: LoopKind, input: ClaimTickInput): Promise<ClaimTickResult> {
    return this.claim.claimTick(sessionId, kind, input);
  }

  /** {@link TickClaim.getInflight} */
  getInflight(sessionId: string, kind: LoopKind): Promise<InflightMark | null> {
    return this.claim.getInflight(sessionId, kind);
  }

  /** {@link TickClaim.clearInflight} */
  clearInflight(sessionId: string, kind: LoopKind, occurrenceId: string): Promise<void> {
    return this.claim.clearInflight(sessionId, kind, occurrenceId);
  }

  /** {@link TickScheduler.arm} */
  arm(record: LoopRecord, firstDueAt: number): Promise<void> {
    return this.scheduler.arm(record, firstDueAt);
  }

  /** {@link TickScheduler.removeScheduler} */
  removeScheduler(sessionId: string, kind: LoopKind): Promise<void> {
    return this.scheduler.removeScheduler(sessionId, kind);
  }

  /** {@link TickScheduler.nextDueAt} */
  nextDueAt(record: LoopRecord): Promise<number | undefined> {
    return this.scheduler.nextDueAt(record);
  }

  /** {@link TickScheduler.reconcile} */
  reconcile(now?: number, shards?: readonly number[]): Promise<number> {
    return this.scheduler.reconcile(now, shards);
  }

  /** {@link TickScheduler.occurrenceOf} */
  occurrenceOf(job: Job<TickJobData>): { dueAt: number; occurrenceId: string } {
    return this.scheduler.occurrenceOf(job);
  }
}
