/**
 * A local HTTP server speaking the Telegram Bot API, for tests with the real
 * grammY client (`telegram.api_root` / `TELEGRAM_API_ROOT` points at it).
 *
 * Behaviour kept from the real API:
 * - `getUpdates` with `offset` (every update below it is confirmed and dropped),
 *   `limit` and long-poll `timeout` (seconds); pending updates are delivered
 *   again until confirmed.
 * - Two overlapping `getUpdates` on one token: the older request is terminated
 *   with `409 Conflict: terminated by other getUpdates request`.
 * - `sendMessage` rejects empty and over-4096-character texts (400) and can be
 *   told to answer `429 Too Many Requests` with `parameters.retry_after`.
 * - `sendMessage` to a chat can be refused for good (`refuseChat`: 403 "bot was
 *   blocked by the user", 400 "chat not found"), and the next sends can fail
 *   with any code (`failNextSends`: 502 for transient failures).
 * - `getMe` can be told to fail (401) for adapter-load tests.
 * - `sendMessage` and `sendChatAction` with `message_thread_id: 1` (a forum's
 *   General topic) answer 400 "Bad Request: message thread not found", as the
 *   real API does (telegram-bot-api#798).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { asyncListener } from './http.ts';

export interface FakeUpdate {
  update_id: number;
  message: {
    message_id: number;
    date: number;
    chat: { id: number; type: string };
    from: { id: number; is_bot: boolean; first_name: string };
    text?: string;
    message_thread_id?: number;
    is_topic_message?: boolean;
  };
}

export interface SentMessage {
  chat_id: string;
  text: string;
  message_thread_id?: number;
  message_id: number;
  /** Formatting entities sent with the text. */
  entities?: Array<{ type: string; offset: number; length: number; url?: string; language?: string }>;
}

interface ActivePoll {
  res: ServerResponse;
  timer: NodeJS.Timeout;
  limit: number;
}

export interface FakeTelegram {
  /** The api root for grammY (`http://127.0.0.1:<port>`). */
  apiRoot: string;
  /** Unconfirmed updates. */
  readonly pending: FakeUpdate[];
  /** Highest offset confirmed so far. */
  readonly confirmedOffset: number;
  /** Messages the bot sent, in order. */
  readonly sent: SentMessage[];
  /** `getUpdates` requests received. */
  readonly pollCount: number;
  /** 409 answers given. */
  readonly conflicts: number;
  /** 429 answers given. */
  readonly rateLimited: number;
  /** sendMessage requests received (answered or not). */
  readonly sendCalls: number;
  /** How often each update id was delivered. */
  readonly deliveries: Map<number, number>;
  /** True while a long poll is held open. */
  readonly polling: boolean;
  /** Queue a text message from a user; returns its update id. */
  pushMessage(m: { fromId: number; chatId?: number; text: string; threadId?: number }): number;
  /** The next `n` sendMessage calls answer 429 with `retry_after` seconds. */
  rateLimitNext(n: number, retryAfterSeconds: number): void;
  /** The next `n` getUpdates calls answer 429 with `retry_after` seconds. */
  rateLimitPollsNext(n: number, retryAfterSeconds: number): void;
  /** When each getUpdates request arrived (ms since the epoch), in order. */
  readonly pollTimes: number[];
  /** The next `n` getMe calls answer 401. */
  failGetMe(n: number): void;
  /** Every sendMessage to `chatId` answers `code` with `description` (e.g. 403 "Forbidden: bot was blocked by the user"). */
  refuseChat(chatId: string, code: number, description: string): void;
  /** The next `n` sendMessage calls answer `code` with `description`. */
  failNextSends(n: number, code: number, description: string): void;
  /** sendMessage calls answered with an error (refused or failed), by chat id. */
  readonly refusedSends: Map<string, number>;
  /** Called before a sendMessage is answered (may delay it); `n` counts sendMessage calls from 1. */
  beforeSend?: (payload: Record<string, unknown>, n: number) => Promise<void> | void;
  /**
   * Called after a sendMessage was accepted (recorded in `sent`) and before it is
   * answered: what a crash of the bot between Telegram's acceptance and its answer sees.
   */
  afterAccept?: (message: SentMessage, n: number) => Promise<void> | void;
  /** Called once an update batch was written to a getUpdates response. */
  onUpdatesServed?: (updates: FakeUpdate[]) => void;
  /** The next `n` sendMessage calls that carry entities answer 400 "can't parse entities". */
  refuseEntitiesNext(n: number): void;
  /** deleteWebhook, setMyCommands and sendChatAction calls, in order, with their bodies. */
  readonly calls: Array<{ method: string; body: Record<string, unknown> }>;
  /** Queue a message update with other content than text (e.g. `{ photo: [...] }`). */
  pushNonText(m: { fromId: number; chatId?: number; content: Record<string, unknown> }): number;
  close(): Promise<void>;
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const raw = Buffer.concat(chunks).toString('utf8');
  if (!raw) return {};
  const type = req.headers['content-type'] ?? '';
  if (type.includes('application/json')) return JSON.parse(raw) as Record<string, unknown>;
  return Object.fromEntries(new URLSearchParams(raw));
}

function reply(res: ServerResponse, body: unknown, status = 200): void {
  if (res.writableEnded || res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function fail(res: ServerResponse, code: number, description: string, parameters?: Record<string, unknown>): void {
  reply(res, { ok: false, error_code: code, description, ...(parameters ? { parameters } : {}) }, code);
}

/** Start the fake Bot API on a free loopback port. One bot (any token works). */
export async function startFakeTelegram(): Promise<FakeTelegram> {
  let nextUpdateId = 1000;
  let nextMessageId = 1;
  let pending: FakeUpdate[] = [];
  let confirmedOffset = 0;
  const sent: SentMessage[] = [];
  let pollCount = 0;
  let conflicts = 0;
  let rateLimited = 0;
  let sendCalls = 0;
  let rateLimit = { remaining: 0, retryAfter: 1 };
  let pollRateLimit = { remaining: 0, retryAfter: 1 };
  const pollTimes: number[] = [];
  let getMeFailures = 0;
  const calls: Array<{ method: string; body: Record<string, unknown> }> = [];
  let entityRefusals = 0;
  const refusedChats = new Map<string, { code: number; description: string }>();
  const refusedSends = new Map<string, number>();
  let sendFailures = { remaining: 0, code: 502, description: 'Bad Gateway' };
  const deliveries = new Map<number, number>();
  let active: ActivePoll | null = null;

  const deliver = (res: ServerResponse, updates: FakeUpdate[]) => {
    for (const u of updates) deliveries.set(u.update_id, (deliveries.get(u.update_id) ?? 0) + 1);
    reply(res, { ok: true, result: updates });
    if (updates.length > 0) res.once('finish', () => fake.onUpdatesServed?.(updates));
  };

  const wake = () => {
    if (!active || pending.length === 0) return;
    const poll = active;
    active = null;
    clearTimeout(poll.timer);
    deliver(poll.res, pending.slice(0, poll.limit));
  };

  const server: Server = createServer(
    asyncListener(async (req, res) => {
      const m = /^\/bot([^/]+)\/([A-Za-z]+)/.exec(req.url ?? '');
      if (!m) return fail(res, 404, 'Not Found');
      const method = m[2]!;
      const body = await readJson(req);
      const botId = Number(m[1]!.split(':')[0]) || 1;
      switch (method) {
        case 'getMe':
          if (getMeFailures > 0) {
            getMeFailures--;
            return fail(res, 401, 'Unauthorized');
          }
          return reply(res, { ok: true, result: { id: botId, is_bot: true, first_name: 'Hermes Test', username: 'hermes_test_bot' } });
        case 'deleteWebhook':
        case 'setMyCommands':
        case 'sendChatAction':
          calls.push({ method, body });
          if (method === 'sendChatAction' && Number(body.message_thread_id) === 1)
            return fail(res, 400, 'Bad Request: message thread not found');
          return reply(res, { ok: true, result: true });
        case 'getUpdates': {
          pollCount++;
          pollTimes.push(Date.now());
          if (pollRateLimit.remaining > 0) {
            pollRateLimit.remaining--;
            rateLimited++;
            return fail(res, 429, `Too Many Requests: retry after ${pollRateLimit.retryAfter}`, { retry_after: pollRateLimit.retryAfter });
          }
          const offset = body.offset === undefined ? undefined : Number(body.offset);
          if (offset !== undefined && offset > confirmedOffset) {
            confirmedOffset = offset;
            pending = pending.filter((u) => u.update_id >= offset);
          }
          if (active) {
            const old = active;
            active = null;
            clearTimeout(old.timer);
            conflicts++;
            fail(old.res, 409, 'Conflict: terminated by other getUpdates request; make sure that only one bot instance is running');
          }
          const limit = Math.min(100, Number(body.limit ?? 100) || 100);
          const timeout = Number(body.timeout ?? 0);
          if (pending.length > 0 || timeout <= 0) return deliver(res, pending.slice(0, limit));
          const poll: ActivePoll = {
            res,
            limit,
            timer: setTimeout(() => {
              if (active === poll) active = null;
              deliver(res, []);
            }, timeout * 1000),
          };
          active = poll;
          res.on('close', () => {
            if (active === poll) {
              active = null;
              clearTimeout(poll.timer);
            }
          });
          return;
        }
        case 'sendMessage': {
          sendCalls++;
          const n = sendCalls;
          const text = typeof body.text === 'string' ? body.text : '';
          if (text.length === 0) return fail(res, 400, 'Bad Request: message text is empty');
          if (text.length > 4096) return fail(res, 400, 'Bad Request: message is too long');
          if (Number(body.message_thread_id) === 1) {
            refusedSends.set(String(body.chat_id), (refusedSends.get(String(body.chat_id)) ?? 0) + 1);
            return fail(res, 400, 'Bad Request: message thread not found');
          }
          const refusal = refusedChats.get(String(body.chat_id));
          if (refusal || sendFailures.remaining > 0) {
            const answer = refusal ?? sendFailures;
            if (!refusal) sendFailures.remaining--;
            refusedSends.set(String(body.chat_id), (refusedSends.get(String(body.chat_id)) ?? 0) + 1);
            return fail(res, answer.code, answer.description);
          }
          if (rateLimit.remaining > 0) {
            rateLimit.remaining--;
            rateLimited++;
            return fail(res, 429, `Too Many Requests: retry after ${rateLimit.retryAfter}`, { retry_after: rateLimit.retryAfter });
          }
          if (entityRefusals > 0 && Array.isArray(body.entities)) {
            entityRefusals--;
            return fail(res, 400, "Bad Request: can't parse entities: unsupported entity");
          }
          await fake.beforeSend?.(body, n);
          if (res.destroyed) return;
          const message: SentMessage = {
            chat_id: String(body.chat_id),
            text,
            message_id: nextMessageId++,
            ...(Array.isArray(body.entities) ? { entities: body.entities as SentMessage['entities'] } : {}),
            ...(body.message_thread_id !== undefined ? { message_thread_id: Number(body.message_thread_id) } : {}),
          };
          sent.push(message);
          await fake.afterAccept?.(message, n);
          return reply(res, {
            ok: true,
            result: {
              message_id: message.message_id,
              date: Math.floor(Date.now() / 1000),
              chat: { id: Number(body.chat_id), type: 'private' },
              text,
            },
          });
        }
        default:
          return fail(res, 404, `Not Found: method ${method} is not faked`);
      }
    }),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const apiRoot = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const fake: FakeTelegram = {
    apiRoot,
    get pending() {
      return pending;
    },
    get confirmedOffset() {
      return confirmedOffset;
    },
    sent,
    get pollCount() {
      return pollCount;
    },
    get conflicts() {
      return conflicts;
    },
    get rateLimited() {
      return rateLimited;
    },
    get sendCalls() {
      return sendCalls;
    },
    deliveries,
    get polling() {
      return active !== null;
    },
    calls,
    refuseEntitiesNext(n) {
      entityRefusals = n;
    },
    pushNonText({ fromId, chatId, content }) {
      const update_id = nextUpdateId++;
      pending.push({
        update_id,
        message: {
          message_id: update_id * 10,
          date: Math.floor(Date.now() / 1000),
          chat: { id: chatId ?? fromId, type: 'private' },
          from: { id: fromId, is_bot: false, first_name: `user${fromId}` },
          ...content,
        },
      });
      wake();
      return update_id;
    },
    pushMessage({ fromId, chatId, text, threadId }) {
      const update_id = nextUpdateId++;
      pending.push({
        update_id,
        message: {
          message_id: update_id * 10,
          date: Math.floor(Date.now() / 1000),
          chat: { id: chatId ?? fromId, type: chatId && chatId < 0 ? 'supergroup' : 'private' },
          from: { id: fromId, is_bot: false, first_name: `user${fromId}` },
          text,
          ...(threadId !== undefined ? { message_thread_id: threadId, is_topic_message: true } : {}),
        },
      });
      wake();
      return update_id;
    },
    rateLimitNext(n, retryAfterSeconds) {
      rateLimit = { remaining: n, retryAfter: retryAfterSeconds };
    },
    rateLimitPollsNext(n, retryAfterSeconds) {
      pollRateLimit = { remaining: n, retryAfter: retryAfterSeconds };
    },
    pollTimes,
    failGetMe(n) {
      getMeFailures = n;
    },
    refuseChat(chatId, code, description) {
      refusedChats.set(chatId, { code, description });
    },
    failNextSends(n, code, description) {
      sendFailures = { remaining: n, code, description };
    },
    refusedSends,
    close: () =>
      new Promise<void>((r) => {
        if (active) clearTimeout(active.timer);
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  return fake;
}
