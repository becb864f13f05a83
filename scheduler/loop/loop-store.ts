/**
 * Loop and heartbeat records in Redis, and their BullMQ job schedulers.
 *
 * - A record is one JSON string per session and kind, written with a version
 *   check (compare-and-set in Lua), so two writers never silently overwrite
 *   each other.
 * - A fixed-cadence schedule is one BullMQ job scheduler (`<kind>:<session>`,
 *   `every` = interval). A self-paced loop has no scheduler: each tick adds the
 *   next delayed job under a deterministic id, so two adds never make two jobs.
 * - Prefetch lead: the scheduler fires `leadMs` before the occurrence is due and
 *   the worker starts the turn exactly at the due time, so the queue's own
 *   latency is off the critical path; both conversions are `prefetch-lead.ts`.
 *
 * - Stored compactly (docs/BENCHMARKS.md, scale): the record in the form of
 *   `loop-record-codec.ts`; a job scheduler's job data is only the kind and
 *   the loop id (`StoredTickJobData`), the session being named by the job
 *   scheduler id, so the scheduler hash keeps Redis's small (listpack)
 *   encoding whatever the session id's length; no job options on the `ticks`
 *   queue's jobs beyond what BullMQ writes itself (retention is the worker's).
 *
 * Write order (no silent writes, docs/DESIGN.md §6): the record is written first and
 * confirmed; then the scheduler is armed or disarmed. A worker re-arms any
 * active fixed schedule whose scheduler is missing (`reconcile`), so a crash
 * between the two steps cannot leave an active loop that never fires.
 */
import { holdWritesThisTurn, type RedisClient } from '../store/redis/connection-factory.ts';
import type { Job } from 'bullmq';
import { StoreUnavailableError } from '../errors/store-unavailable-error.ts';
import { bullJobId, compositeId, parseLoopSchedulerId, type Keys, type LoopKind } from '../store/keys.ts';
import { decodeLoopRecord, encodeLoopRecord } from './loop-record-codec.ts';
import { resumeDueAt, type LoopRecord } from './loop-state.ts';
import { putVersioned, type ExpectedVersion } from '../store/versioned-json.ts';
import { acquireOwned, releaseOwned } from '../store/redis/owned-key.ts';
import { schedulerJobMillis, type HermesQueues } from '../store/queues.ts';
import { luaScript, runLuaScript } from '../store/redis/lua-script.ts';
import { prefetchLead } from './prefetch-lead.ts';
import { DEFAULT_EVENTS_MAX_LEN, type TranscriptMessage } from '../session/session-store.ts';
import type { GoalRecord } from '../goal/goal-state.ts';

/** Data of a tick job as the worker reads it (`tickJobData`). */
export interface TickJobData {
  kind: LoopKind;
  sessionId: string;
  loopId: string;
  /** Written by earlier versions; the worker takes a `ticks` job without a `type` as a schedule tick. */
  type?: 'schedule-tick';
}

/**
 * Data of a tick job as stored. A job scheduler's template (and so each job it
 * makes) holds no `sessionId`: its id `<kind>:<session>` names the session,
 * and a template under 64 bytes keeps the scheduler hash listpack-encoded.
 * A self-paced tick job (no scheduler) keeps its `sessionId`.
 */
export type StoredTickJobData = Omit<TickJobData, 'sessionId'> & { sessionId?: string };

/**
 * A tick job's data with its session: the stored `sessionId` when there is
 * one (self-paced jobs, and every job written by earlier versions), else the
 * session named by the job's scheduler id (`job.repeatJobKey`, or the
 * `repeat:<schedulerId>:<millis>` job id).
 * @throws Error when the job names no session (not a loop or heartbeat tick)
 */
export function tickJobData(job: Pick<Job<StoredTickJobData>, 'data' | 'id' | 'repeatJobKey'>): TickJobData {
  const { data } = job;
  if (typeof data.sessionId === 'string') return data as TickJobData;
  const schedulerId = job.repeatJobKey ?? (schedulerJobMillis(job.id) !== undefined ? job.id!.slice('repeat:'.length, job.id!.lastIndexOf(':')) : undefined);
  const named = schedulerId === undefined ? undefined : parseLoopSchedulerId(schedulerId);
  if (!named) throw new Error(`tick job ${job.id} names no session`);
  return { ...data, kind: data.kind ?? named.kind, sessionId: named.sessionId };
}

/** An occurrence whose turn has started but is not committed. */
export interface InflightMark {
  occurrenceId: string;
  jobId: string;
  startedAt: number;
  /** The tick number the turn runs as (`HERMES_TICK`). */
  tick: number;
  /** Worker process running it. */
  workerId: string;
}

/** What a tick's gate reads: the schedule's record, the session's pending user input and its goal. */
export interface GateRead {
  loop: LoopRecord | null;
  /** Entries in the session's pending user input (`claimTick` checks the count again). */
  pendingCount: number;
  goal: GoalRecord | null;
}

/** Ticks whose gate reads share one `MGET` at most (bounds one command's size and Redis time). */
const GATE_READS_PER_COMMAND = 500;

interface GateWaiter {
  sessionId: string;
  kind: LoopKind;
  resolve: (read: GateRead) => void;
  reject: (err: unknown) => void;
}

/** BullMQ job name of schedule ticks. */
export const TICK_JOB_NAME = 'schedule-tick';

/**
 * BullMQ job name of the ticks of a command loop (`--run`, `--command`): a worker sees from the
 * name alone, before reading anything, that the tick runs in the `command` pool of turn slots
 * (`worker.max_command_turns`). No longer than {@link TICK_JOB_NAME}, so a scheduler costs no more.
 */
export const COMMAND_TICK_JOB_NAME = 'command-tick';

/** The job name of a loop's ticks: by its runner (the pool its turns run in). */
export function tickJobName(record: Pick<LoopRecord, 'runner'>): string {
  return record.runner.kind === 'command' ? COMMAND_TICK_JOB_NAME : TICK_JOB_NAME;
}

const CLAIM_TICK = luaScript('claim-tick-7.lua');
const RELEASE_INFLIGHT = luaScript('release-inflight-1.lua');


/** Records and job schedulers of loops and heartbeats. */
export class LoopStore {
  /** Job time ⇄ due time (`prefetch-lead.ts`). */
  private readonly lead: ReturnType<typeof prefetchLead>;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly queues: HermesQueues,
    /** Prefetch lead in ms (`worker.prefetch_lead_ms`). */
    readonly leadMs: number,
    /** Entries kept per session event stream (`worker.events_max_entries`). */
    private readonly eventsMaxLen = DEFAULT_EVENTS_MAX_LEN,
  ) {
    this.lead = prefetchLead(leadMs);
  }

  /** Gate reads asked for in this turn of the event loop, not yet sent. */
  private gateBatch: GateWaiter[] | null = null;

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
    return await putVersioned(this.redis, {
      key: this.keys.schedule(record.sessionId, record.kind), indexKey: this.keys.forSession(record.sessionId).scheduleIndex,
      member: this.keys.scheduleIndexMember(record.sessionId, record.kind), what: `${record.kind} state`, encode: encodeLoopRecord,
    }, record, expectedVersion);
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
      if (Date.now() > deadline) throw new StoreUnavailableError(`The ${kind} of session ${sessionId} is being changed by another process; try again.`);
      await new Promise((r) => setTimeout(r, 20 + Math.random() * 30));
    }
    return async () => {
      await releaseOwned(this.redis, key, token);
    };
  }

  /**
   * What a tick's gate decides over (`GateRead`), read for every tick that asks
   * in the same turn of the event loop together: the ticks of an aligned burst
   * wake from their timers together, and their 3 reads each become, per shard
   * and per {@link GATE_READS_PER_COMMAND} ticks, one `MGET` (records and goals)
   * and one `EXISTS` over the pending-input keys, sent together. Only when some
   * session of the group has pending input (an empty sorted set does not exist)
   * are that group's counts read, one `ZCARD` each. Not atomic, as the three
   * reads it replaces were not: `claimTick` checks all three again atomically.
   * @throws Error whatever Redis answered (every tick of the failed group gets it);
   *   the decoder's error (that tick only) when a stored record does not decode
   */
  readGate(sessionId: string, kind: LoopKind): Promise<GateRead> {
    return new Promise<GateRead>((resolve, reject) => {
      if (!this.gateBatch) {
        this.gateBatch = [];
        // After the timers, I/O and microtasks of this turn: the whole burst is in the batch.
        setImmediate(() => this.flushGateReads());
      }
      this.gateBatch.push({ sessionId, kind, resolve, reject });
    });
  }

  private flushGateReads(): void {
    const batch = this.gateBatch ?? [];
    this.gateBatch = null;
    // One group per shard (one slot on a cluster), cut into commands of bounded size.
    const byShard = new Map<number, GateWaiter[]>();
    for (const w of batch) {
      const shard = this.keys.shardOfSession(w.sessionId);
      let group = byShard.get(shard);
      if (!group) byShard.set(shard, (group = []));
      group.push(w);
    }
    for (const group of byShard.values()) {
      for (let i = 0; i < group.length; i += GATE_READS_PER_COMMAND) {
        const chunk = group.slice(i, i + GATE_READS_PER_COMMAND);
        this.readGateChunk(chunk).catch((err: unknown) => {
          for (const w of chunk) w.reject(err);
        });
      }
    }
  }

  private async readGateChunk(chunk: GateWaiter[]): Promise<void> {
    const keys = this.keys;
    const pendingKeys = chunk.map((w) => keys.pendingInput(w.sessionId));
    const [values, withInput] = await Promise.all([
      this.redis.mget(chunk.flatMap((w) => [keys.schedule(w.sessionId, w.kind), keys.goal(w.sessionId)])),
      this.redis.exists(pendingKeys),
    ]);
    const counts = withInput > 0 ? await Promise.all(pendingKeys.map((k) => this.redis.zcard(k))) : null;
    // The ticks go on to their claim scripts now, together: one write for all of them.
    holdWritesThisTurn(this.redis);
    chunk.forEach((w, i) => {
      try {
        const loop = values[2 * i], goal = values[2 * i + 1];
        w.resolve({
          loop: loop ? decodeLoopRecord(loop, { sessionId: w.sessionId, kind: w.kind }) : null,
          pendingCount: counts ? counts[i]! : 0,
          goal: goal ? (JSON.parse(goal) as GoalRecord) : null,
        });
      } catch (err) {
        w.reject(err);
      }
    });
  }

  /**
   * Start an occurrence's turn in one step (`../store/redis/scripts/claim-tick-7.lua`):
   * take the session's turn lock for `lock.holder`, claim the occurrence,
   * mark it in flight, add the `tick.started` event and read the transcript.
   *
   * The claim holds atomically against the state as it is now: the record is
   * still at `expectedVersion` (the version the fire decision and the tick
   * number were taken over), the session's goal is still at `goalVersion` and
   * its pending input still has `pendingCount` entries (what the gate read),
   * and no other occurrence of this schedule is in flight. Later occurrences
   * wait for an in-flight one, so a tick whose worker died is completed by
   * another worker instead of being overtaken. The turn lock is taken first
   * and stays held whatever the claim says (except `busy`); the caller releases it.
   * @param input.ttlMs - the mark expires after this long (a bound on a lost retry)
   * @param input.goalVersion - the goal record's version the gate read, `null` when there was none
   * @param input.lock - turn lock holder (the job id) and time-to-live, ms
   * @param input.started - data of the `tick.started` event
   * @returns `busy` when another job holds the session's turn lock (nothing
   *   written); `ok` with the event id and the transcript (oldest first);
   *   `changed` when the record, the goal or the pending input changed, or the
   *   record is gone (decide again over a fresh read); `inflight` with the other occurrence's mark
   */
  async claimTick(
    sessionId: string,
    kind: LoopKind,
    input: {
      expectedVersion: number;
      goalVersion: number | null;
      pendingCount: number;
      mark: InflightMark;
      ttlMs: number;
      lock: { holder: string; ttlMs: number };
      started: Record<string, unknown>;
      /** Read the transcript for the turn (an agent turn); a command turn gets only its new input, so `false` spares the read. */
      readTranscript: boolean;
    },
  ): Promise<
    | { status: 'ok'; eventId: string; transcript: TranscriptMessage[] }
    | { status: 'busy' }
    | { status: 'changed' }
    | { status: 'inflight'; mark: InflightMark }
  > {
    const [status, ...rest] = (await runLuaScript(
      this.redis, CLAIM_TICK,
      [
        this.keys.schedule(sessionId, kind), this.keys.scheduleInflight(sessionId, kind), this.keys.goal(sessionId),
        this.keys.pendingInput(sessionId), this.keys.turnLock(sessionId), this.keys.events(sessionId), this.keys.transcript(sessionId),
      ],
      [
        String(input.expectedVersion), JSON.stringify(input.mark), input.ttlMs, input.mark.occurrenceId,
        input.goalVersion === null ? '' : String(input.goalVersion), String(input.pendingCount), input.lock.holder, input.lock.ttlMs, this.eventsMaxLen, JSON.stringify(input.started),
        input.readTranscript ? '1' : '0',
      ],
    )) as [string, ...string[]];
    if (status === 'ok') {
      const [eventId, ...messages] = rest;
      return { status: 'ok', eventId: eventId!, transcript: messages.map((m) => JSON.parse(m) as TranscriptMessage) };
    }
    if (status === 'busy') return { status: 'busy' };
    if (status === 'inflight') return { status: 'inflight', mark: JSON.parse(rest[0]!) as InflightMark };
    return { status: 'changed' };
  }

  /** The in-flight mark, or `null`. */
  async getInflight(sessionId: string, kind: LoopKind): Promise<InflightMark | null> {
    const raw = await this.redis.get(this.keys.scheduleInflight(sessionId, kind));
    return raw ? (JSON.parse(raw) as InflightMark) : null;
  }

  /** Clear the in-flight mark if it is still the one of `occurrenceId`. */
  async clearInflight(sessionId: string, kind: LoopKind, occurrenceId: string): Promise<void> {
    await runLuaScript(this.redis, RELEASE_INFLIGHT, [this.keys.scheduleInflight(sessionId, kind)], [occurrenceId]);
  }

  /** Delete a record (used by `/heartbeat clear` and tests). */
  async delete(sessionId: string, kind: LoopKind): Promise<void> {
    const k = this.keys.forSession(sessionId);
    await this.redis.multi().del(k.schedule(sessionId, kind)).srem(k.scheduleIndex, k.scheduleIndexMember(sessionId, kind)).exec();
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

  /**
   * Arm the schedule so its next tick is due at `firstDueAt` (epoch ms).
   * Fixed cadence: upsert the job scheduler (replacing any previous one and its
   * pending job). Self-paced: add the next delayed tick job.
   * @throws StoreUnavailableError when Redis refused it
   */
  async arm(record: LoopRecord, firstDueAt: number): Promise<void> {
    const data: StoredTickJobData = { kind: record.kind, loopId: record.loopId };
    try {
      if (record.mode === 'fixed' && record.intervalSeconds) {
        // Remove first: an upsert with an unchanged `every` keeps the old next
        // occurrence and ignores `startDate`, so a replaced loop would not fire "now".
        await this.removeScheduler(record.sessionId, record.kind);
        await this.queues.forSession(record.sessionId).ticks.upsertJobScheduler(
          this.keys.loopSchedulerId(record.sessionId, record.kind),
          { every: record.intervalSeconds * 1000, startDate: this.lead.firstJobAt(firstDueAt, Date.now()) },
          { name: tickJobName(record), data },
        );
      } else {
        await this.removeScheduler(record.sessionId, record.kind);
        await this.queues.forSession(record.sessionId).ticks.add(tickJobName(record), { ...data, sessionId: record.sessionId }, {
          jobId: bullJobId('selfpaced', record.kind, record.sessionId, record.loopId, firstDueAt),
          delay: Math.max(0, this.lead.jobAt(firstDueAt) - Date.now()),
        });
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
    const s = await this.queues.forSession(record.sessionId).ticks.getJobScheduler(this.keys.loopSchedulerId(record.sessionId, record.kind));
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
    const active = (await this.list(shards)).filter((r) => r.status === 'active' && r.mode === 'fixed');
    if (active.length === 0) return 0;
    // One call per shard for all its schedulers instead of one round trip per loop (this runs at every worker start).
    const existing = new Map<string, { name: string; next?: number | null }>();
    for (const q of this.queues.shards()) {
      if (shards && !shards.includes(q.keys.shardIndex)) continue;
      for (const s of await q.ticks.getJobSchedulers(0, -1)) existing.set(`${q.keys.shardIndex} ${s.key}`, s);
    }
    let rearmed = 0;
    for (const record of active) {
      const scheduler = existing.get(`${this.keys.shardOfSession(record.sessionId)} ${this.keys.loopSchedulerId(record.sessionId, record.kind)}`);
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
