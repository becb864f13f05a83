/**
 * Session input: user messages and slash commands from chat, Telegram or the
 * CLI become jobs of the `inbox` queue that any worker runs as turns.
 *
 * Priority (docs/DESIGN.md §3): real user input first, then goal continuations, then
 * loop/heartbeat ticks. Inbox jobs carry BullMQ priorities (user 1, goal 2) and
 * every queued user message is registered in the session's pending-input set
 * (ordered by arrival) until it is processed; ticks and goal continuations wait
 * while it is not empty, and messages of one session run in arrival order.
 */
import type { RedisClient } from '../store/redis/connection-factory.ts';
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import { bullJobId, compositeId, type Keys } from '../store/keys.ts';
import type { HermesQueues } from '../store/queues.ts';
import type { Origin } from './origin.ts';
import { assertSessionId } from './session-id.ts';
import { luaScript, runLuaScript } from '../store/redis/lua-script.ts';
import { ATTR, SPAN, tracing, type TraceCarrier } from '../telemetry/tracing.ts';

/** BullMQ priorities of inbox jobs (lower runs first). */
export const INBOX_PRIORITY = { user: 1, goal: 2 } as const;

/** Pending-input entries older than this are ignored by ticks (a lost job cannot block a session forever). */
export const PENDING_INPUT_STALE_MS = 10 * 60_000;

/** Data of an inbox job. */
export interface InboxJobData {
  type: 'user-input' | 'goal-continuation';
  sessionId: string;
  /** Message text or slash command. Empty for goal continuations. */
  text: string;
  /** Unique per message (platform message id, or generated); dedupes re-sends. */
  messageId: string;
  origin: Origin;
  /** Epoch ms the input arrived. */
  receivedAt: number;
  /** Goal continuations: the goal and the turn number this job runs. */
  goalId?: string;
  goalTurn?: number;
  /** User input: tries whose handling threw so far (`worker.input_attempts`; worker/chat/input-failure.ts). */
  failedTries?: number;
  /** User input: the trace of its receipt, which the worker's turn continues (docs/OPERATIONS.md, "Traces"). */
  trace?: TraceCarrier;
}

/**
 * Register a pending input in arrival order. Score = received ms × 1000 plus a
 * per-session sequence (mod 1000), so inputs of the same millisecond keep the
 * order in which they were registered.
 */
const REGISTER_PENDING_INPUT = luaScript('register-pending-input-4.lua');

/** BullMQ job id of an input (dedupes the same message sent twice). */
export function inboxJobId(sessionId: string, messageId: string): string {
  return bullJobId('input', sessionId, messageId);
}

/** Occurrence id of an input: its commit marker and its entry in the pending-input set. */
export function inputOccurrenceId(sessionId: string, messageId: string): string {
  return compositeId('input', sessionId, messageId);
}

/**
 * The BullMQ job id of the input whose occurrence id is `occurrenceId` (an entry of the pending-input
 * set): both are the same parts through `keyPart`, which never holds `:` or `|`, joined by `:`
 * (`compositeId`) or `|` (`bullJobId`).
 */
export function inputJobIdOf(occurrenceId: string): string {
  return occurrenceId.split(':').join('|');
}

/**
 * Queue one user message or slash command for a session, in the span of its receipt: the root of the
 * message's trace, which the job's data carries on to the worker's turn.
 * Registers it as pending input first, so a tick due at the same moment waits.
 * @throws ScheduleInputError for a bad session id or an over-long message
 */
export async function enqueueInput(
  deps: { redis: RedisClient; keys: Keys; queues: HermesQueues; maxChars: number },
  input: { sessionId: string; text: string; messageId: string; origin: Origin; receivedAt?: number },
): Promise<string> {
  const attributes = {
    [ATTR.sessionId]: input.sessionId,
    [ATTR.surface]: input.origin.surface,
    [ATTR.occurrenceId]: inputOccurrenceId(input.sessionId, input.messageId),
  };
  return await tracing().span(SPAN.receive, attributes, () => queueInput(deps, input));
}

async function queueInput(
  deps: { redis: RedisClient; keys: Keys; queues: HermesQueues; maxChars: number },
  input: { sessionId: string; text: string; messageId: string; origin: Origin; receivedAt?: number },
): Promise<string> {
  assertSessionId(input.sessionId);
  if (input.text.length > deps.maxChars) {
    throw new ScheduleInputError(`The message is ${input.text.length} characters; the limit is ${deps.maxChars}.`, { field: 'text' });
  }
  const jobId = inboxJobId(input.sessionId, input.messageId);
  const occurrenceId = inputOccurrenceId(input.sessionId, input.messageId);
  const receivedAt = input.receivedAt ?? Date.now();
  // The session's shard: its pending set, sequence and index share one slot with its inbox queue.
  const k = deps.keys.forSession(input.sessionId);
  // A re-sent message that was already answered changes nothing.
  if ((await deps.redis.zscore(k.sessionCommitted(input.sessionId), occurrenceId)) !== null) return jobId;
  await runLuaScript(
    deps.redis,
    REGISTER_PENDING_INPUT,
    [k.pendingInput(input.sessionId), k.inputSequence(input.sessionId), k.sessionIndex, k.sessionOrder],
    [String(receivedAt), occurrenceId, input.sessionId],
  );
  const data: InboxJobData = {
    type: 'user-input',
    sessionId: input.sessionId,
    text: input.text,
    messageId: input.messageId,
    origin: input.origin,
    receivedAt,
  };
  const trace = tracing().carrier();
  if (trace) data.trace = trace;
  await deps.queues.forSession(input.sessionId).inbox.add('user-input', data, { jobId, priority: INBOX_PRIORITY.user });
  return jobId;
}

/**
 * Pending user input of a session, oldest first (occurrence ids). Stale
 * entries are ignored, and entries whose input was already committed (a
 * duplicate that raced its original) are removed.
 */
export async function pendingInput(redis: RedisClient, keys: Keys, sessionId: string, now = Date.now()): Promise<string[]> {
  const pending = await redis.zrangebyscore(keys.pendingInput(sessionId), (now - PENDING_INPUT_STALE_MS) * 1000, '+inf');
  if (pending.length === 0) return pending;
  const pipeline = redis.pipeline();
  for (const occ of pending) pipeline.zscore(keys.sessionCommitted(sessionId), occ);
  const done = ((await pipeline.exec()) ?? []).map(([, v]) => v !== null);
  const committed = pending.filter((_, i) => done[i]);
  if (committed.length > 0) await redis.zrem(keys.pendingInput(sessionId), ...committed);
  return pending.filter((_, i) => !done[i]);
}

/** Mark an input processed. */
export async function clearPendingInput(redis: RedisClient, keys: Keys, sessionId: string, occurrenceId: string): Promise<void> {
  await redis.zrem(keys.pendingInput(sessionId), occurrenceId);
}
