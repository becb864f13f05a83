/**
 * A message typed in the console (`/ui`) or sent with `POST /api/sessions/:id/messages`: that
 * session's user input exactly like a Telegram message — queued in the session's inbox ahead of
 * its ticks (scheduler/session/inbox.ts), slash commands applied by the worker (`/loop 10m …`,
 * `/goal …`, `/stop`), the reply on the session's event stream.
 *
 * It is chat input on surface `web`: it can never create a command turn (the worker's slash
 * commands refuse `--run`, `--command`, `--script` from chat), and its turns get only the tools
 * `tools.allow_from` grants `web` (docs/TOOLS.md). The MCP server's `send` (gateway/mcp/) queues
 * the same way on surface `mcp`, and a signed webhook (gateway/hooks/) on surface `webhook`.
 */
import { randomUUID } from 'node:crypto';
import { ScheduleInputError } from '../scheduler/errors/schedule-input-error.ts';
import { enqueueInput, inputOccurrenceId } from '../scheduler/session/inbox.ts';
import { assertSessionId } from '../scheduler/session/session-id.ts';
import type { SessionStore } from '../scheduler/session/session-store.ts';
import type { Keys } from '../scheduler/store/keys.ts';
import type { HermesQueues } from '../scheduler/store/queues.ts';
import type { RedisClient } from '../scheduler/store/redis/connection-factory.ts';
import type { MessagingRoute } from '../scheduler/delivery/delivery-target.ts';

/** What `sendWebMessage` uses. */
export interface WebInputDeps {
  redis: RedisClient;
  keys: Keys;
  queues: HermesQueues;
  sessions: SessionStore;
  /** `agent.max_prompt_chars` */
  maxChars: number;
}

/** The surfaces a message queued here comes from. */
export type InputSurface = 'web' | 'mcp' | 'webhook';

/** A queued web message. */
export interface WebMessage {
  /** The message id (`web-…`, `mcp-…`): the inbox dedupes a message sent again under the same id. */
  id: string;
  sessionId: string;
  /** Its reply's (or command notice's) `occurrenceId` on the event stream. */
  occurrenceId: string;
  /** The `user` event that shows the message to every client of the stream; read the reply after it. */
  eventId: string;
}

/** What a client may give as its own message id (then `web-<id>`). */
const CLIENT_ID = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Queue `text` as user input of `sessionId` on surface `web` (or `input.surface`). The message is
 * first added to the session's event stream as a `user` event (so every attached client shows it,
 * before its reply), then queued; resolves once Redis confirmed both.
 * @param clientId - an id of the caller's own, so a retried request is answered once
 * @param route - the platform chat the reply also goes to (none: the session's stream only)
 * @throws ScheduleInputError for a bad session id, an empty or over-long text, or a bad `clientId`
 */
export async function sendWebMessage(
  deps: WebInputDeps,
  input: { sessionId: string; text: string; clientId?: string; surface?: InputSurface; route?: MessagingRoute },
): Promise<WebMessage> {
  const surface = input.surface ?? 'web';
  const sessionId = assertSessionId(input.sessionId);
  if (input.text.trim() === '') throw new ScheduleInputError('The message is empty.', { field: 'text' });
  if (input.text.length > deps.maxChars) {
    throw new ScheduleInputError(`The message is ${input.text.length} characters; the limit is ${deps.maxChars}.`, { field: 'text' });
  }
  if (input.clientId !== undefined && !CLIENT_ID.test(input.clientId)) {
    throw new ScheduleInputError('message_id must be 1–64 letters, digits, _ or -.', { field: 'message_id' });
  }
  const id = `${surface}-${input.clientId ?? randomUUID()}`;
  const occurrenceId = inputOccurrenceId(sessionId, id);
  const eventId = await deps.sessions.appendEvent(sessionId, 'user', { text: input.text, surface, messageId: id, occurrenceId });
  await enqueueInput(
    { redis: deps.redis, keys: deps.keys, queues: deps.queues, maxChars: deps.maxChars },
    { sessionId, text: input.text, messageId: id, origin: { surface, ...(input.route ? { route: input.route } : {}) } },
  );
  return { id, sessionId, occurrenceId, eventId };
}
