/**
 * Loop and heartbeat records in Redis: one JSON string per session and kind, in the compact form
 * of `loop-record-codec.ts` (docs/BENCHMARKS.md, scale), written with a version check
 * (compare-and-set in Lua, `versioned-json.ts`) so two writers never silently overwrite each
 * other; and the short mutation lock a command takes while it changes a schedule.
 */
import type { RedisClient } from '../store/redis/connection-factory.ts';
import { StoreUnavailableError } from '../errors/store-unavailable-error.ts';
import type { Keys } from '../store/keys.ts';
import type { LoopKind } from '../tick/tick-kind.ts';
import { putVersioned, type ExpectedVersion } from '../store/versioned-json.ts';
import { acquireOwned, releaseOwned } from '../store/redis/owned-key.ts';
import { decodeLoopRecord, encodeLoopRecord } from './loop-record-codec.ts';
import { lexRange } from '../store/lex-index.ts';
import { readPage, type Page, type PageRequest } from '../store/list-page.ts';
import { ensureOrder } from '../store/order-repair.ts';
import type { LoopRecord } from './loop-state.ts';

/** Records of loops and heartbeats, and their mutation locks. */
export class LoopRecords {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  /** The session's loop or heartbeat record, or `null`. */
  async get(sessionId: string, kind: LoopKind): Promise<LoopRecord | null> {
    const raw = await this.redis.get(this.keys.schedule(sessionId, kind));
    return raw ? decodeLoopRecord(raw, { sessionId, kind }) : null;
  }

  /**
   * Write `record` over the version it was read at (`expectedVersion`), or only
   * if none exists (`'absent'`), or unconditionally (`'any'`). The stored record
   * gets `version + 1`.
   * @returns the stored record, or `null` when the check failed (someone wrote in between)
   * @throws StoreUnavailableError when Redis refused the write
   */
  async put(record: LoopRecord, expectedVersion: ExpectedVersion): Promise<LoopRecord | null> {
    const k = this.keys.forSession(record.sessionId);
    return await putVersioned(
      this.redis,
      {
        key: this.keys.schedule(record.sessionId, record.kind),
        indexKey: k.scheduleIndex,
        member: this.keys.scheduleIndexMember(record.sessionId, record.kind),
        what: `${record.kind} state`,
        encode: encodeLoopRecord,
        orders: [
          { key: k.scheduleOrder, member: k.scheduleOrderMember(record.sessionId, record.kind) },
          { key: k.sessionOrder, member: record.sessionId },
        ],
      },
      record,
      expectedVersion,
    );
  }

  /**
   * Take the short mutation lock of a session's schedule (waits up to `waitMs`).
   * @returns a release function
   * @throws StoreUnavailableError when the lock could not be had in time
   */
  async lockMutation(sessionId: string, kind: LoopKind, waitMs = 10_000): Promise<() => Promise<void>> {
    const key = this.keys.scheduleMutation(sessionId, kind);
    const token = `${process.pid}:${Math.random().toString(36).slice(2)}`;
    const deadline = Date.now() + waitMs;
    while (!(await acquireOwned(this.redis, key, token, 15_000))) {
      if (Date.now() > deadline)
        throw new StoreUnavailableError(`The ${kind} of session ${sessionId} is being changed by another process; try again.`);
      await new Promise((r) => setTimeout(r, 20 + Math.random() * 30));
    }
    return async () => {
      await releaseOwned(this.redis, key, token);
    };
  }

  /** Delete a record and what its watch kept (used by `/heartbeat clear` and tests). */
  async delete(sessionId: string, kind: LoopKind): Promise<void> {
    const k = this.keys.forSession(sessionId);
    await this.redis
      .multi()
      .del(k.schedule(sessionId, kind), k.scheduleWatchBase(sessionId, kind))
      .srem(k.scheduleIndex, k.scheduleIndexMember(sessionId, kind))
      .zrem(k.scheduleOrder, k.scheduleOrderMember(sessionId, kind))
      .exec();
  }

  /** Forget what the schedule's `--watch` kept (`worker/watch-check.ts`): it was stopped, finished or replaced. */
  async forgetWatch(sessionId: string, kind: LoopKind): Promise<void> {
    await this.redis.del(this.keys.forSession(sessionId).scheduleWatchBase(sessionId, kind));
  }

  /**
   * One page of records in list order (by session id, then kind: `Keys.scheduleOrder`), of every shard;
   * reads the page's records only (`store/list-page.ts`). `keep` filters the records read.
   * @param filter.sessionPrefix - only sessions whose id starts with it
   * @throws ScheduleInputError (`cursor`) for a cursor this list did not give
   */
  async page(request: PageRequest, filter: { sessionPrefix?: string; keep?: (r: LoopRecord) => boolean } = {}): Promise<Page<LoopRecord>> {
    const shards = this.keys.shards();
    // An order that differs in size from its index is made again first (`store/order-repair.ts`).
    await Promise.all(
      shards.map((k) =>
        ensureOrder(this.redis, {
          index: k.scheduleIndex,
          order: k.scheduleOrder,
          membersOf: async (members) =>
            members.map((m) => k.parseScheduleIndexMember(m)).map(({ sessionId, kind }) => k.scheduleOrderMember(sessionId, kind)),
        }),
      ),
    );
    return await readPage<LoopRecord>(
      {
        list: 'schedules',
        members: (after, count) =>
          lexRange(
            this.redis,
            shards.map((k) => k.scheduleOrder),
            { after, prefix: filter.sessionPrefix },
            count,
          ),
        load: async (members) =>
          await Promise.all(
            members.map(async (m) => {
              const { sessionId, kind } = this.keys.parseScheduleOrderMember(m);
              return await this.get(sessionId, kind);
            }),
          ),
        ...(filter.keep ? { keep: filter.keep } : {}),
      },
      request,
    );
  }

  /**
   * Every stored record, of every shard (or of the shards listed).
   * Each shard is read on its own (one slot per read on a cluster).
   */
  async list(shards?: readonly number[]): Promise<LoopRecord[]> {
    const out: LoopRecord[] = [];
    for (const k of this.keys.shards()) {
      if (shards && !shards.includes(k.shardIndex)) continue;
      const members = await this.redis.smembers(k.scheduleIndex);
      for (let i = 0; i < members.length; i += 1000) {
        const named = members.slice(i, i + 1000).map((m) => k.parseScheduleIndexMember(m));
        const raws = await this.redis.mget(...named.map(({ sessionId, kind }) => k.schedule(sessionId, kind)));
        raws.forEach((r, j) => {
          if (r !== null) out.push(decodeLoopRecord(r, named[j]!));
        });
      }
    }
    return out;
  }
}
