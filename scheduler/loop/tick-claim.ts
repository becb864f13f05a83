/**
 * Starting a loop or heartbeat tick: the gate read (`readGate`, batched across a burst), the
 * claim script (`claimTick`) and the in-flight mark it leaves until the commit. What the worker
 * decides over these answers is `worker/loop/tick-gate.ts`.
 */
import { holdWritesThisTurn, type RedisClient } from '../store/redis/connection-factory.ts';
import type { Keys } from '../store/keys.ts';
import type { LoopKind } from '../tick/tick-kind.ts';
import { luaScript, runLuaScript } from '../store/redis/lua-script.ts';
import type { TranscriptMessage } from '../session/session-store.ts';
import type { GoalRecord } from '../goal/goal-state.ts';
import { decodeLoopRecord } from './loop-record-codec.ts';
import type { LoopRecord } from './loop-state.ts';

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

/** What `claimTick` takes besides the schedule. */
export interface ClaimTickInput {
  /** The record version the fire decision and the tick number were taken over. */
  expectedVersion: number;
  /** The goal record's version the gate read, `null` when there was none. */
  goalVersion: number | null;
  /** The pending-input entries the gate read. */
  pendingCount: number;
  mark: InflightMark;
  /** The mark expires after this long, ms (a bound on a lost retry). */
  ttlMs: number;
  /** Turn lock holder (the job id) and time-to-live, ms. */
  lock: { holder: string; ttlMs: number };
  /** Data of the `tick.started` event. */
  started: Record<string, unknown>;
  /** Read the transcript for the turn (an agent turn); a command turn gets only its new input, so `false` spares the read. */
  readTranscript: boolean;
}

/** What the claim script answered (`claim-tick-8.lua`). */
export type ClaimTickResult =
  | {
      status: 'ok';
      eventId: string;
      transcript: TranscriptMessage[];
      /** Entries of the occurrence's turn journal (0: the turn opens an empty one, without a read). */
      journalEntries: number;
    }
  | { status: 'busy' }
  | { status: 'changed' }
  | { status: 'inflight'; mark: InflightMark };

/** Ticks whose gate reads share one `MGET` at most (bounds one command's size and Redis time). */
const GATE_READS_PER_COMMAND = 500;

interface GateWaiter {
  sessionId: string;
  kind: LoopKind;
  resolve: (read: GateRead) => void;
  reject: (err: unknown) => void;
}

const CLAIM_TICK = luaScript('claim-tick-8.lua');
const RELEASE_INFLIGHT = luaScript('release-inflight-1.lua');

/** Gate reads, claims and in-flight marks of loop and heartbeat ticks. */
export class TickClaim {
  /** Gate reads asked for in this turn of the event loop, not yet sent. */
  private gateBatch: GateWaiter[] | null = null;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    /** Entries kept per session event stream (`worker.events_max_entries`). */
    private readonly eventsMaxLen: number,
  ) {}

  /**
   * What a tick's gate decides over (`GateRead`). Not atomic, as three separate reads would not
   * be: `claimTick` checks all three again atomically.
   *
   * Burst batching — the contract between `worker/runtime/sleep-until.ts`, this batch and
   * `holdWritesThisTurn` (`../store/redis/connection-factory.ts`), written here only:
   *  1. Ticks sleeping until the same due time share one timer (`sleepUntil`), so the ticks of an
   *     aligned burst wake in one timer callback, all in the timers phase of one turn of the event loop.
   *  2. A woken tick that reaches `readGate` with no I/O in between (promise continuations only)
   *     joins this turn's batch, which is sent from `setImmediate`: after the timers phase and every
   *     microtask of the turn, so the whole burst is in it. The batch becomes, per shard and per
   *     {@link GATE_READS_PER_COMMAND} ticks, one `MGET` (records and goals) and one `EXISTS` over the
   *     pending-input keys, sent together; only a group in which some session has pending input (an
   *     empty sorted set does not exist) has its counts read, one `ZCARD` each.
   *  3. When a group's answer arrives its ticks go on to their claim scripts in that same turn, and
   *     each claim holds the connection's writes until the check phase (`holdWritesThisTurn`), so the
   *     claims leave in one write — also those of a burst claimed ahead of its due time
   *     (`worker/loop/claim-ahead.ts`), whose claims go out from one shared timer callback as in step 1.
   * A tick that misses a batch (it awaited I/O first) is read in a later one: a round trip more,
   * never a wrong decision. The round trips per tick are pinned by `test/tick-round-trips.test.ts`.
   * @throws Error whatever Redis answered (every tick of the failed group gets it);
   *   the decoder's error (that tick only) when a stored record does not decode
   */
  readGate(sessionId: string, kind: LoopKind): Promise<GateRead> {
    return new Promise<GateRead>((resolve, reject) => {
      if (!this.gateBatch) {
        this.gateBatch = [];
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
    chunk.forEach((w, i) => {
      try {
        const loop = values[2 * i],
          goal = values[2 * i + 1];
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
   * Start an occurrence's turn in one step: the claim script
   * (`../store/redis/scripts/claim-tick-8.lua`, where the claim rule is written and enforced).
   * The turn lock stays held whatever the claim says (except `busy`); the caller releases it.
   * @returns `busy` when another job holds the session's turn lock (nothing written); `ok` with
   *   the `tick.started` event id, the length of the occurrence's journal and, for `readTranscript`,
   *   the transcript (oldest first);
   *   `changed` when the record, the goal or the pending input changed, or the record is gone
   *   (decide again over a fresh read); `inflight` with the other occurrence's mark
   */
  async claimTick(sessionId: string, kind: LoopKind, input: ClaimTickInput): Promise<ClaimTickResult> {
    const k = this.keys;
    holdWritesThisTurn(this.redis); // step 3 of `readGate`'s contract
    const [status, ...rest] = (await runLuaScript(
      this.redis,
      CLAIM_TICK,
      [
        k.schedule(sessionId, kind),
        k.scheduleInflight(sessionId, kind),
        k.goal(sessionId),
        k.pendingInput(sessionId),
        k.turnLock(sessionId),
        k.events(sessionId),
        k.transcript(sessionId),
        k.turnJournal(sessionId, input.mark.occurrenceId),
      ],
      [
        String(input.expectedVersion),
        JSON.stringify(input.mark),
        input.ttlMs,
        input.mark.occurrenceId,
        input.goalVersion === null ? '' : String(input.goalVersion),
        String(input.pendingCount),
        input.lock.holder,
        input.lock.ttlMs,
        this.eventsMaxLen,
        JSON.stringify(input.started),
        input.readTranscript ? '1' : '0',
      ],
    )) as [string, ...string[]];
    if (status === 'ok') {
      const [eventId, journalEntries, ...messages] = rest;
      return {
        status: 'ok',
        eventId: eventId!,
        transcript: messages.map((m) => JSON.parse(m) as TranscriptMessage),
        journalEntries: Number(journalEntries),
      };
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
}
