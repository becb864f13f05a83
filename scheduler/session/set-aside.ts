/**
 * Set-aside input: a message or slash command whose handling kept failing, taken out of its
 * session's way (the rule: worker/chat/input-failure.ts; docs/RELIABILITY.md, "Session input runs in
 * order, and a bad input is set aside").
 *
 * Setting an input aside is one step (`set-aside-input-5.lua`): its occurrence is marked committed
 * (a re-send of the same message changes nothing, as for an answered one), it leaves the pending-input
 * set (so the session's next input runs), an `input.set_aside` event goes on the session's stream, and
 * the input with its error is kept in the session's set-aside list: the newest {@link SET_ASIDE_KEPT},
 * for `worker.set_aside_retention_seconds` after the newest. `hermes status`, the console's session page
 * and `GET /api/sessions/:id/set-aside` read it.
 */
import type { Keys } from '../store/keys.ts';
import { luaScript, runLuaScript } from '../store/redis/lua-script.ts';
import type { RedisClient } from '../store/redis/connection-factory.ts';
import type { Origin } from './origin.ts';

/** Entries a session's set-aside list keeps (the newest). */
export const SET_ASIDE_KEPT = 50;

/** One input set aside, as its list keeps it. Times are epoch ms. */
export interface SetAsideInput {
  sessionId: string;
  /** The input's occurrence id (`inputOccurrenceId`): its commit marker. */
  occurrenceId: string;
  /** The message id it was sent with (the platform's, or generated). */
  messageId: string;
  /** The message or slash command as it was sent. */
  text: string;
  /** The surface it came from. */
  surface: Origin['surface'];
  receivedAt: number;
  setAsideAt: number;
  /** Tries made before it was set aside. */
  attempts: number;
  /** The last try's error, as thrown. */
  error: string;
}

/** What setting an input aside writes besides its entry: the event clients see (`input.set_aside`). */
export interface SetAsideLimits {
  /** How long a committed occurrence is remembered, ms (`worker.occurrence_window_seconds`). */
  occurrenceWindowMs: number;
  /** Entries kept per session event stream (`worker.events_max_entries`). */
  eventsMaxLen: number;
  /** How long the set-aside list is kept after its newest entry, ms (`worker.set_aside_retention_seconds`). */
  retentionMs: number;
}

const SET_ASIDE_INPUT = luaScript('set-aside-input-5.lua');

/**
 * Set `input` aside, with `event` as the data of its `input.set_aside` event.
 * @returns `set-aside` with the event's stream id; `duplicate` when its occurrence was committed before
 *   (it only left the pending-input set)
 */
export async function setAsideInput(
  redis: RedisClient,
  keys: Keys,
  input: SetAsideInput,
  event: Record<string, unknown>,
  limits: SetAsideLimits,
): Promise<{ status: 'set-aside'; eventId: string } | { status: 'duplicate' }> {
  const k = keys.forSession(input.sessionId);
  const [code, id] = (await runLuaScript(
    redis,
    SET_ASIDE_INPUT,
    [
      k.sessionCommitted(input.sessionId),
      k.events(input.sessionId),
      k.setAsideInput(input.sessionId),
      k.pendingInput(input.sessionId),
      k.setAsideSessions,
    ],
    [
      input.occurrenceId,
      input.setAsideAt,
      limits.occurrenceWindowMs,
      limits.eventsMaxLen,
      JSON.stringify(event),
      JSON.stringify(input),
      SET_ASIDE_KEPT,
      limits.retentionMs,
      input.sessionId,
    ],
  )) as [number, string];
  return code === 1 ? { status: 'set-aside', eventId: id } : { status: 'duplicate' };
}

/** A session's set-aside input, newest first. */
export async function setAsideInputs(redis: RedisClient, keys: Keys, sessionId: string): Promise<SetAsideInput[]> {
  const raw = await redis.lrange(keys.forSession(sessionId).setAsideInput(sessionId), 0, -1);
  return raw.map((r) => JSON.parse(r) as SetAsideInput);
}

/**
 * The newest set-aside input across sessions, newest first: of the `limit` sessions whose newest entry is the
 * most recent (each shard's `Keys.setAsideSessions`), at most `limit` entries; `limit` undefined: every one.
 * Sessions whose list expired (`retentionMs` after its newest entry) leave the index here.
 *
 * A store written before the index existed has none: the first read makes it once from the session index
 * (reading each session's newest entry) and marks it made (`Keys.setAsideSessionsBuilt`).
 * @returns the entries, and whether more sessions have some
 */
export async function newestSetAsideInputs(
  redis: RedisClient,
  keys: Keys,
  options: { limit?: number; retentionMs: number; now?: number },
): Promise<{ inputs: SetAsideInput[]; more: boolean }> {
  const now = options.now ?? Date.now();
  const count = options.limit ?? -1;
  const out: SetAsideInput[] = [];
  let more = false;
  for (const k of keys.shards()) {
    await ensureSetAsideIndex(redis, k);
    await redis.zremrangebyscore(k.setAsideSessions, '-inf', `(${now - options.retentionMs}`);
    const sessions = await redis.zrevrange(k.setAsideSessions, 0, count < 0 ? -1 : count);
    if (count >= 0 && sessions.length > count) {
      more = true;
      sessions.length = count;
    }
    if (sessions.length === 0) continue;
    const pipeline = redis.pipeline();
    for (const id of sessions) pipeline.lrange(k.setAsideInput(id), 0, count < 0 ? -1 : count - 1);
    for (const [, raw] of (await pipeline.exec()) ?? []) {
      for (const r of (raw as string[] | null) ?? []) out.push(JSON.parse(r) as SetAsideInput);
    }
  }
  const sorted = out.sort((a, b) => b.setAsideAt - a.setAsideAt);
  if (count >= 0 && sorted.length > count) {
    more = true;
    sorted.length = count;
  }
  return { inputs: sorted, more };
}

/** Make the shard's index of sessions with set-aside input from its session index, once. */
async function ensureSetAsideIndex(redis: RedisClient, k: Keys): Promise<void> {
  if ((await redis.exists(k.setAsideSessionsBuilt)) === 1) return;
  const sessions = await redis.smembers(k.sessionIndex);
  for (let i = 0; i < sessions.length; i += 1000) {
    const chunk = sessions.slice(i, i + 1000);
    const pipeline = redis.pipeline();
    for (const id of chunk) pipeline.lindex(k.setAsideInput(id), 0);
    const replies = (await pipeline.exec()) ?? [];
    const pairs: Array<number | string> = [];
    replies.forEach(([, raw], n) => {
      if (typeof raw === 'string') pairs.push((JSON.parse(raw) as SetAsideInput).setAsideAt, chunk[n]!);
    });
    if (pairs.length > 0) await redis.zadd(k.setAsideSessions, ...pairs);
  }
  await redis.set(k.setAsideSessionsBuilt, '1');
}

/** A set-aside input as `/api` and `hermes status --json` give it (times epoch ms). */
export function setAsideView(input: SetAsideInput) {
  return {
    session_id: input.sessionId,
    occurrence_id: input.occurrenceId,
    message_id: input.messageId,
    text: input.text,
    surface: input.surface,
    received_at: input.receivedAt,
    set_aside_at: input.setAsideAt,
    attempts: input.attempts,
    error: input.error,
  };
}
