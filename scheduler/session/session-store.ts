/**
 * Session data in Redis: the transcript (a capped list), the event stream that
 * clients attach to, and the atomic commit of a finished turn.
 *
 * Exactly-once delivery: a turn is committed under its occurrence id by one Lua
 * script (`../store/redis/scripts/commit-turn-7.lua`) that checks the session's set of
 * committed occurrences, appends to the transcript, adds the reply to the event
 * stream, writes the loop's or goal's new state over the version it was
 * computed from and deletes the turn's journal. A retried or duplicated occurrence finds itself in the set and
 * commits nothing, so a reply is delivered once.
 *
 * Bounded memory: the committed set is one sorted set per session that keeps
 * only the occurrences committed within `worker.occurrence_window_seconds`
 * (default 1 h). That window is far longer than a committed job can come back
 * (a stalled job is re-run within `lock_duration_ms + stalled_interval_ms`),
 * and loop ticks and cron occurrences are also refused by their records
 * (last occurrence applied, coalescing) however late they come back.
 */
import { ReplicaAck } from '../store/redis/replica-ack.ts';
import type { RedisClient } from '../store/redis/connection-factory.ts';
import type { Keys } from '../store/keys.ts';
import { luaScript, runLuaScript } from '../store/redis/lua-script.ts';

/** One transcript message. `at` is epoch ms. */
export interface TranscriptMessage {
  /** `tool`: the result of a tool call the assistant message before it asked for. */
  role: 'user' | 'assistant' | 'tool';
  content: string;
  at: number;
  /** What produced it: `message`, `tick`, `heartbeat`, `goal`, `cron`, `v1`. */
  source: string;
  /** On an assistant message: the tool calls it asked for (`arguments` is the model's JSON text). */
  tool_calls?: Array<{ id: string; name: string; arguments: string }>;
  /** On a tool message: the call it answers, and the tool's name. */
  tool_call_id?: string;
  name?: string;
  /**
   * Provenance: the surface whose input produced the message (`cli`, `chat`, `telegram`, `api`, …).
   * A turn may use only the tools every surface in its context may use (docs/TOOLS.md, "Provenance").
   * Absent on messages written before it was recorded.
   */
  surface?: string;
  /** On a compaction summary: the surfaces of the messages it stands for. */
  surfaces?: string[];
  /** On a compaction summary: it stands for a tool's output (`holdsToolOutput`, worker/context/transcript-messages.ts). */
  tool_output?: true;
}

/** One event of a session stream. `id` is the Redis stream id. */
export interface SessionEvent {
  id: string;
  type: string;
  data: Record<string, unknown>;
}

const COMMIT_TURN = luaScript('commit-turn-7.lua');

/** Result of `commitTurn`. */
export type CommitResult = { status: 'committed'; eventId: string } | { status: 'duplicate' } | { status: 'conflict' };

/** Transcript, event stream and turn commit of sessions. */
export class SessionStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    /** Messages kept per transcript (`worker.transcript_max_messages`). */
    private readonly transcriptMax: number,
    /** How long a committed occurrence is remembered, ms (`worker.occurrence_window_seconds`). */
    private readonly occurrenceWindowMs: number,
    /** Entries kept per session event stream (`worker.events_max_entries`; approximate trim). */
    private readonly eventsMaxLen: number,
    /** Replicas a commit waits for (`redis.wait_replicas`). */
    private readonly replicaAck: ReplicaAck = ReplicaAck.none,
  ) {}

  /** The session's transcript, oldest first. */
  async transcript(sessionId: string): Promise<TranscriptMessage[]> {
    const raw = await this.redis.lrange(this.keys.transcript(sessionId), 0, -1);
    return raw.map((r) => JSON.parse(r) as TranscriptMessage);
  }

  /**
   * One page of the transcript, oldest first: the `limit` messages before index `before`
   * (default: the end). Indexes count from the oldest message kept (the list is capped at
   * `worker.transcript_max_messages`, so they shift as old messages are dropped).
   */
  async transcriptPage(
    sessionId: string,
    options: { before?: number; limit: number },
  ): Promise<{ total: number; start: number; messages: TranscriptMessage[] }> {
    const key = this.keys.transcript(sessionId);
    const total = await this.redis.llen(key);
    const end = Math.min(options.before ?? total, total);
    const start = Math.max(0, end - options.limit);
    const raw = end > start ? await this.redis.lrange(key, start, end - 1) : [];
    return { total, start, messages: raw.map((r) => JSON.parse(r) as TranscriptMessage) };
  }

  /** Append an event that is not part of a turn commit (status notes, tick started). @returns its stream id */
  async appendEvent(sessionId: string, type: string, data: Record<string, unknown>): Promise<string> {
    const id = await this.redis.xadd(
      this.keys.events(sessionId),
      'MAXLEN',
      '~',
      String(this.eventsMaxLen),
      '*',
      'type',
      type,
      'data',
      JSON.stringify(data),
    );
    return id!;
  }

  /**
   * Commit a finished turn once per occurrence.
   *
   * @param input.occurrenceId - unique id of the work item (tick occurrence, message id)
   * @param input.messages - transcript messages to append (input, then reply)
   * @param input.event - the event clients see (usually `reply`)
   * @param input.record - a versioned JSON record that changes with the turn (a loop's or a goal's state):
   *   its key, the version it was read at, and its new JSON
   * @returns `committed` with the event id; `duplicate` when this occurrence was committed before;
   *   `conflict` when the record changed since it was read (re-read and retry)
   */
  async commitTurn(
    sessionId: string,
    input: {
      occurrenceId: string;
      messages: TranscriptMessage[];
      event: { type: string; data: Record<string, unknown> };
      record?: { key: string; expectedVersion: number; json: string };
      /** An in-flight mark (JSON with `occurrenceId`) released in the same step when it is this occurrence's. */
      inflightKey?: string;
      /** The session's turn lock, released in the same step when the commit holds and the lock is still `holder`'s. */
      turnLock?: { key: string; holder: string };
      /**
       * A compacted transcript (docs/CONTEXT.md) that replaces the stored one before `messages` are
       * appended — only when the stored one is still as it was read (`readLength` messages, the last
       * of them `readLast`); otherwise it is dropped and the messages are appended as usual.
       */
      replaceTranscript?: { messages: TranscriptMessage[]; readLength: number; readLast: TranscriptMessage | undefined };
      /** The occurrence's turn journal (`TurnJournalStore.key`), deleted in the same step. */
      journalKey?: string;
    },
  ): Promise<CommitResult> {
    const committed = this.keys.sessionCommitted(sessionId);
    const keys = [
      committed,
      this.keys.transcript(sessionId),
      this.keys.events(sessionId),
      input.record?.key ?? committed,
      input.inflightKey ?? committed,
      input.turnLock?.key ?? committed,
      input.journalKey ?? committed,
    ];
    const args = [
      input.occurrenceId,
      Date.now(),
      this.occurrenceWindowMs,
      this.transcriptMax,
      this.eventsMaxLen,
      input.event.type,
      JSON.stringify(input.event.data),
      input.record ? String(input.record.expectedVersion) : '',
      input.record?.json ?? '',
      input.inflightKey ? input.occurrenceId : '',
      input.turnLock?.holder ?? '',
      ...replacementArgs(input.replaceTranscript),
      ...input.messages.map((m) => JSON.stringify(m)),
    ];
    const [code, id] = (await runLuaScript(this.redis, COMMIT_TURN, keys, args)) as [number, string];
    if (code === 1) {
      await this.replicaAck.after(this.redis, committed);
      return { status: 'committed', eventId: id };
    }
    if (code === 0) return { status: 'duplicate' };
    return { status: 'conflict' };
  }

  /** Whether an occurrence of the session was committed (within the remembered window). */
  async isCommitted(sessionId: string, occurrenceId: string): Promise<boolean> {
    return (await this.redis.zscore(this.keys.sessionCommitted(sessionId), occurrenceId)) !== null;
  }

  /**
   * Read events after `afterId` (exclusive; `0` = from the start).
   * @param options.blockMs - wait up to this long for new events (needs a connection of its own)
   */
  async readEvents(sessionId: string, afterId: string, options: { count?: number; blockMs?: number } = {}): Promise<SessionEvent[]> {
    const key = this.keys.events(sessionId);
    const count = String(options.count ?? 500);
    const res =
      options.blockMs !== undefined
        ? await this.redis.xread('COUNT', count, 'BLOCK', String(options.blockMs), 'STREAMS', key, afterId)
        : await this.redis.xread('COUNT', count, 'STREAMS', key, afterId);
    if (!res) return [];
    return res[0]![1].map(([id, fields]) => parseStreamEntry(id, fields));
  }

  /** The newest `count` events, oldest first. */
  async recentEvents(sessionId: string, count: number): Promise<SessionEvent[]> {
    const res = await this.redis.xrevrange(this.keys.events(sessionId), '+', '-', 'COUNT', count);
    return res.reverse().map(([id, fields]) => parseStreamEntry(id, fields));
  }

  /** The id of the newest event, or `0` when the stream is empty. */
  async lastEventId(sessionId: string): Promise<string> {
    const res = await this.redis.xrevrange(this.keys.events(sessionId), '+', '-', 'COUNT', 1);
    return res[0]?.[0] ?? '0';
  }
}

/** ARGV 12–14+R of `commit-turn-7.lua`: the compacted transcript and what it was read as. */
function replacementArgs(
  r: { messages: TranscriptMessage[]; readLength: number; readLast: TranscriptMessage | undefined } | undefined,
): string[] {
  if (!r) return ['0', '', ''];
  return [
    String(r.messages.length),
    String(r.readLength),
    r.readLast ? JSON.stringify(r.readLast) : '',
    ...r.messages.map((m) => JSON.stringify(m)),
  ];
}

/** An event from a raw stream entry (`type` and JSON `data` fields); session and run streams share the shape. */
export function parseStreamEntry(id: string, fields: string[]): SessionEvent {
  const map: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) map[fields[i]!] = fields[i + 1]!;
  let data: Record<string, unknown>;
  try {
    data = JSON.parse(map.data ?? '{}') as Record<string, unknown>;
  } catch {
    data = { raw: map.data };
  }
  return { id, type: map.type ?? 'unknown', data };
}
