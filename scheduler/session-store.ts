/**
 * Session data in Redis: the transcript (a capped list), the event stream that
 * clients attach to, and the atomic commit of a finished turn.
 *
 * Exactly-once delivery: a turn is committed under its occurrence id by one Lua
 * script that checks the occurrence marker, appends to the transcript, adds the
 * reply to the event stream and writes the loop's or goal's new state
 * over the version it was computed from. A retried or duplicated occurrence
 * finds the marker and commits nothing, so a reply is delivered once.
 */
import type { RedisClient } from './redis/connection-factory.ts';
import type { Keys } from './keys.ts';

/** One transcript message. `at` is epoch ms. */
export interface TranscriptMessage {
  role: 'user' | 'assistant';
  content: string;
  at: number;
  /** What produced it: `message`, `tick`, `heartbeat`, `goal`, `cron`, `v1`. */
  source: string;
}

/** One event of a session stream. `id` is the Redis stream id. */
export interface SessionEvent {
  id: string;
  type: string;
  data: Record<string, unknown>;
}

/** Stream entries kept per session (approximate trim). */
export const EVENTS_MAX_LEN = 10_000;
/** How long an occurrence marker is kept (seconds): far longer than any retry. */
export const OCCURRENCE_TTL_SECONDS = 7 * 24 * 3600;

const COMMIT_LUA = `
-- KEYS[1] occurrence marker, KEYS[2] transcript, KEYS[3] events, KEYS[4] versioned record (optional)
-- ARGV[1] marker value, ARGV[2] marker ttl s, ARGV[3] transcript cap, ARGV[4] events maxlen,
-- ARGV[5] event type, ARGV[6] event data, ARGV[7] expected record version ('' = none),
-- ARGV[8] new record json, ARGV[9..] transcript messages
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, redis.call('GET', KEYS[1])} end
if ARGV[7] ~= '' then
  local cur = redis.call('GET', KEYS[4])
  if not cur then return {-1, ''} end
  local v = cjson.decode(cur)['version']
  if tostring(v) ~= ARGV[7] then return {-1, ''} end
  redis.call('SET', KEYS[4], ARGV[8])
end
for i = 9, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
if #ARGV >= 9 then redis.call('LTRIM', KEYS[2], -tonumber(ARGV[3]), -1) end
local id = redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'type', ARGV[5], 'data', ARGV[6])
redis.call('SET', KEYS[1], id, 'EX', tonumber(ARGV[2]))
return {1, id}
`;

/** Result of `commitTurn`. */
export type CommitResult =
  | { status: 'committed'; eventId: string }
  | { status: 'duplicate'; eventId: string }
  | { status: 'conflict' };

/** Transcript, event stream and turn commit of sessions. */
export class SessionStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly transcriptMax = 200,
  ) {}

  /** The session's transcript, oldest first. */
  async transcript(sessionId: string): Promise<TranscriptMessage[]> {
    const raw = await this.redis.lrange(this.keys.transcript(sessionId), 0, -1);
    return raw.map((r) => JSON.parse(r) as TranscriptMessage);
  }

  /** Append an event that is not part of a turn commit (status notes, tick started). @returns its stream id */
  async appendEvent(sessionId: string, type: string, data: Record<string, unknown>): Promise<string> {
    const id = await this.redis.xadd(
      this.keys.events(sessionId), 'MAXLEN', '~', String(EVENTS_MAX_LEN), '*', 'type', type, 'data', JSON.stringify(data),
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
    },
  ): Promise<CommitResult> {
    const keys = [
      this.keys.occurrenceDone(input.occurrenceId),
      this.keys.transcript(sessionId),
      this.keys.events(sessionId),
      input.record?.key ?? this.keys.occurrenceDone(input.occurrenceId),
    ];
    const args = [
      '1', String(OCCURRENCE_TTL_SECONDS), String(this.transcriptMax), String(EVENTS_MAX_LEN),
      input.event.type, JSON.stringify(input.event.data),
      input.record ? String(input.record.expectedVersion) : '', input.record?.json ?? '',
      ...input.messages.map((m) => JSON.stringify(m)),
    ];
    const [code, id] = (await this.redis.eval(COMMIT_LUA, keys.length, ...keys, ...args)) as [number, string];
    if (code === 1) return { status: 'committed', eventId: id };
    if (code === 0) return { status: 'duplicate', eventId: id };
    return { status: 'conflict' };
  }

  /** Whether an occurrence has been committed. */
  async isCommitted(occurrenceId: string): Promise<boolean> {
    return (await this.redis.exists(this.keys.occurrenceDone(occurrenceId))) === 1;
  }

  /**
   * Read events after `afterId` (exclusive; `0` = from the start).
   * @param options.blockMs - wait up to this long for new events (needs a connection of its own)
   */
  async readEvents(
    sessionId: string,
    afterId: string,
    options: { count?: number; blockMs?: number } = {},
  ): Promise<SessionEvent[]> {
    const key = this.keys.events(sessionId);
    const count = String(options.count ?? 500);
    const res =
      options.blockMs !== undefined
        ? await this.redis.xread('COUNT', count, 'BLOCK', String(options.blockMs), 'STREAMS', key, afterId)
        : await this.redis.xread('COUNT', count, 'STREAMS', key, afterId);
    if (!res) return [];
    return res[0]![1].map(([id, fields]) => toEvent(id, fields));
  }

  /** The newest `count` events, oldest first. */
  async recentEvents(sessionId: string, count: number): Promise<SessionEvent[]> {
    const res = await this.redis.xrevrange(this.keys.events(sessionId), '+', '-', 'COUNT', count);
    return res.reverse().map(([id, fields]) => toEvent(id, fields));
  }

  /** The id of the newest event, or `0` when the stream is empty. */
  async lastEventId(sessionId: string): Promise<string> {
    const res = await this.redis.xrevrange(this.keys.events(sessionId), '+', '-', 'COUNT', 1);
    return res[0]?.[0] ?? '0';
  }
}

function toEvent(id: string, fields: string[]): SessionEvent {
  const map: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) map[fields[i]!] = fields[i + 1]!;
  let data: Record<string, unknown> = {};
  try {
    data = JSON.parse(map.data ?? '{}') as Record<string, unknown>;
  } catch {
    data = { raw: map.data };
  }
  return { id, type: map.type ?? 'unknown', data };
}
