/**
 * A local Discord: the REST API (v10, under `<root>/v10`) and the gateway
 * WebSocket, speaking Discord's own protocol so the real `@discordjs/rest` and
 * `@discordjs/ws` clients are exercised.
 *
 * Gateway: HELLO on connect, heartbeats answered with HEARTBEAT_ACK, IDENTIFY
 * (token checked; a bad one is closed with 4004) answered with READY, RESUME
 * answered by replaying every dispatch of the session after the named sequence
 * and then RESUMED (an unknown session gets INVALID_SESSION false). Dispatches
 * are numbered per session and kept, so those sent while no connection is
 * attached (after `drop()`) are replayed on RESUME, as Discord does.
 *
 * REST: `GET /users/@me`, `GET /applications/@me`, `PUT /applications/{id}/commands`,
 * `GET /gateway/bot`, `GET /channels/{id}`, `POST /channels/{id}/messages`
 * (scripted 429s with `Retry-After` and bucket headers), and
 * `POST /interactions/{id}/{token}/callback`.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';

export const DISCORD_BOT_TOKEN = 'MTAwMDAwMDAwMDAwMDAwMDAx.FakeDiscordBotTokenForTests';
export const DISCORD_BOT_ID = '1000000000000000001';
export const DISCORD_APP_ID = '1000000000000000002';
export const DISCORD_ALLOWED_USER = '2000000000000000001';

/** A message the bot posted. */
export interface PostedMessage {
  id: string;
  channel_id: string;
  content: string;
  at: number;
  body: Record<string, unknown>;
}

/** One gateway session as the server keeps it. */
interface Session {
  id: string;
  seq: number;
  events: Array<{ s: number; t: string; d: unknown }>;
  socket: WebSocket | undefined;
}

export interface FakeDiscord {
  /** REST root for `DISCORD_API_URL` (without the version). */
  readonly apiRoot: string;
  readonly posted: PostedMessage[];
  /** Interaction callbacks the bot sent, in order. */
  readonly callbacks: Array<{ interactionId: string; body: Record<string, unknown> }>;
  /** The last application commands registered. */
  readonly commands: Array<Record<string, unknown>>;
  /** Gateway connections opened, IDENTIFYs and RESUMEs received. */
  readonly counts: { connections: number; identifies: number; resumes: number; heartbeats: number };
  /** Gateway connections open now. */
  openConnections(): number;
  /** Whether a session is ready or resumed on an open connection. */
  live(): boolean;
  /** Send a MESSAGE_CREATE on the current session (buffered for replay when no connection is attached). @returns the message id */
  message(input: { authorId: string; content: string; channelId?: string; guildId?: string; mentionsBot?: boolean }): string;
  /** Send an INTERACTION_CREATE of an application command. @returns the interaction id */
  command(input: {
    userId: string;
    name: string;
    options?: Record<string, string>;
    channelId?: string;
    channelType?: number;
    parentId?: string;
    guildId?: string;
  }): string;
  /** Dispatch an event again with a new sequence (as after a re-identify), e.g. a message already seen. */
  redispatch(messageId: string): void;
  /** Kill the current connection without a close frame (a network drop). */
  drop(): void;
  /** Answer the next `count` message posts with 429 and `Retry-After: retryAfterSeconds`. */
  rateLimitNext(count: number, retryAfterSeconds: number): void;
  /** Known channels for `GET /channels/{id}` (default: a guild text channel). */
  channel(id: string, type: number, parentId?: string): void;
  /** Times of the 429 answers given. */
  readonly limitedAt: number[];
  close(): Promise<void>;
}

let nextSnowflake = 1_300_000_000_000_000_000n;
const snowflake = () => String(nextSnowflake++);

function user(id: string, bot = false) {
  return {
    id,
    username: bot ? 'hermes' : `user${id.slice(-4)}`,
    discriminator: '0',
    global_name: null,
    avatar: null,
    ...(bot ? { bot: true } : {}),
  };
}

/** Start the server on a free loopback port. */
export async function startFakeDiscord(options: { heartbeatIntervalMs?: number } = {}): Promise<FakeDiscord> {
  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? 1000;
  const posted: PostedMessage[] = [];
  const callbacks: FakeDiscord['callbacks'] = [];
  let commands: Array<Record<string, unknown>> = [];
  const counts = { connections: 0, identifies: 0, resumes: 0, heartbeats: 0 };
  const sessions = new Map<string, Session>();
  const sockets = new Set<WebSocket>();
  const channels = new Map<string, { id: string; type: number; parent_id?: string }>();
  const sentPayloads = new Map<string, { t: string; d: unknown }>();
  const limitedAt: number[] = [];
  let limits: { count: number; retryAfter: number } = { count: 0, retryAfter: 0 };
  let current: Session | undefined;
  let base = '';

  const send = (ws: WebSocket, payload: unknown) => {
    if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(payload));
  };

  const dispatch = (t: string, d: unknown) => {
    const session = current;
    if (!session) throw new Error('no gateway session yet');
    const s = ++session.seq;
    session.events.push({ s, t, d });
    if (session.socket) send(session.socket, { op: 0, t, s, d });
  };

  const wss = new WebSocketServer({ noServer: true });
  wss.on('connection', (ws) => {
    counts.connections++;
    sockets.add(ws);
    ws.on('close', () => {
      sockets.delete(ws);
      for (const s of sessions.values()) if (s.socket === ws) s.socket = undefined;
    });
    send(ws, { op: 10, d: { heartbeat_interval: heartbeatIntervalMs } });
    ws.on('message', (raw) => {
      const msg = JSON.parse((raw as Buffer).toString('utf8')) as { op: number; d: any };
      switch (msg.op) {
        case 1:
          counts.heartbeats++;
          send(ws, { op: 11 });
          break;
        case 2: {
          counts.identifies++;
          if (msg.d.token !== DISCORD_BOT_TOKEN) {
            ws.close(4004, 'Authentication failed.');
            return;
          }
          const session: Session = { id: `s-${snowflake()}`, seq: 0, events: [], socket: ws };
          sessions.set(session.id, session);
          current = session;
          dispatch('READY', {
            v: 10,
            user: user(DISCORD_BOT_ID, true),
            guilds: [],
            session_id: session.id,
            resume_gateway_url: `${base.replace('http', 'ws')}/gateway`,
            shard: [0, 1],
            application: { id: DISCORD_APP_ID, flags: 0 },
          });
          break;
        }
        case 6: {
          counts.resumes++;
          const session = sessions.get(msg.d.session_id);
          if (!session || msg.d.token !== DISCORD_BOT_TOKEN) {
            send(ws, { op: 9, d: false });
            return;
          }
          session.socket = ws;
          current = session;
          for (const e of session.events) if (e.s > msg.d.seq && e.t !== 'READY') send(ws, { op: 0, ...e });
          dispatch('RESUMED', {});
          break;
        }
        default:
          break;
      }
    });
  });

  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(body === undefined ? undefined : JSON.stringify(body));
  };

  const readBody = async (req: IncomingMessage): Promise<any> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString();
    return text ? JSON.parse(text) : {};
  };

  const server = createServer((req, res) => {
    void (async () => {
      if (req.headers.authorization !== `Bot ${DISCORD_BOT_TOKEN}` && !req.url!.includes('/interactions/')) {
        return json(res, 401, { message: '401: Unauthorized', code: 0 });
      }
      const path = decodeURIComponent(new URL(req.url!, base).pathname).replace(/^\/api\/v10/, '');
      const method = req.method!;
      let m: RegExpExecArray | null;
      if (method === 'GET' && path === '/users/@me') return json(res, 200, user(DISCORD_BOT_ID, true));
      if (method === 'GET' && path === '/applications/@me')
        return json(res, 200, { id: DISCORD_APP_ID, name: 'hermes', bot: user(DISCORD_BOT_ID, true) });
      if (method === 'GET' && path === '/gateway/bot') {
        return json(res, 200, {
          url: `${base.replace('http', 'ws')}/gateway`,
          shards: 1,
          session_start_limit: { total: 1000, remaining: 1000, reset_after: 60_000, max_concurrency: 1 },
        });
      }
      if (method === 'PUT' && (m = /^\/applications\/(\d+)\/commands$/.exec(path))) {
        commands = ((await readBody(req)) as Array<Record<string, unknown>>).map((c) => ({ ...c, id: snowflake(), application_id: m![1] }));
        return json(res, 200, commands);
      }
      if (method === 'GET' && (m = /^\/channels\/(\d+)$/.exec(path))) {
        return json(res, 200, channels.get(m[1]!) ?? { id: m[1], type: 0, guild_id: '3000000000000000001' });
      }
      if (method === 'POST' && (m = /^\/channels\/(\d+)\/messages$/.exec(path))) {
        const body = await readBody(req);
        const bucket = { 'x-ratelimit-bucket': `messages-${m[1]}`, 'x-ratelimit-limit': '5' };
        if (limits.count > 0) {
          limits.count--;
          limitedAt.push(Date.now());
          return json(
            res,
            429,
            { message: 'You are being rate limited.', retry_after: limits.retryAfter, global: false },
            {
              ...bucket,
              'retry-after': String(limits.retryAfter),
              'x-ratelimit-remaining': '0',
              'x-ratelimit-reset-after': String(limits.retryAfter),
              'x-ratelimit-scope': 'user',
            },
          );
        }
        const message: PostedMessage = { id: snowflake(), channel_id: m[1]!, content: String(body.content), at: Date.now(), body };
        posted.push(message);
        return json(
          res,
          200,
          { id: message.id, channel_id: message.channel_id, content: message.content, author: user(DISCORD_BOT_ID, true), type: 0 },
          {
            ...bucket,
            'x-ratelimit-remaining': '4',
            'x-ratelimit-reset-after': '1',
          },
        );
      }
      if (method === 'POST' && (m = /^\/interactions\/(\d+)\/[^/]+\/callback$/.exec(path))) {
        const id = m[1]!;
        if (callbacks.some((c) => c.interactionId === id))
          return json(res, 400, { message: 'Interaction has already been acknowledged.', code: 40060 });
        callbacks.push({ interactionId: id, body: await readBody(req) });
        res.writeHead(204);
        return res.end();
      }
      return json(res, 404, { message: '404: Not Found', code: 0 });
    })().catch((err: Error) => json(res, 500, { message: err.message, code: 0 }));
  });
  server.on('upgrade', (req, socket, head) => {
    if (!req.url?.startsWith('/gateway')) return socket.destroy();
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    apiRoot: `${base}/api`,
    posted,
    callbacks,
    counts,
    limitedAt,
    get commands() {
      return commands;
    },
    openConnections: () => sockets.size,
    live: () => current?.socket !== undefined && current.events.some((e) => e.t === 'READY' || e.t === 'RESUMED'),
    message({ authorId, content, channelId, guildId, mentionsBot }) {
      const id = snowflake();
      const d = {
        id,
        channel_id: channelId ?? `4${authorId.slice(1)}`,
        ...(guildId ? { guild_id: guildId } : {}),
        author: user(authorId),
        content,
        timestamp: new Date().toISOString(),
        edited_timestamp: null,
        tts: false,
        mention_everyone: false,
        mentions: mentionsBot ? [user(DISCORD_BOT_ID, true)] : [],
        mention_roles: [],
        attachments: [],
        embeds: [],
        pinned: false,
        type: 0,
      };
      sentPayloads.set(id, { t: 'MESSAGE_CREATE', d });
      dispatch('MESSAGE_CREATE', d);
      return id;
    },
    command({ userId, name, options = {}, channelId, channelType, parentId, guildId }) {
      const id = snowflake();
      const channel = { id: channelId ?? `4${userId.slice(1)}`, type: channelType ?? 1, ...(parentId ? { parent_id: parentId } : {}) };
      const d = {
        id,
        application_id: DISCORD_APP_ID,
        type: 2,
        token: `itoken-${id}`,
        version: 1,
        data: { id: snowflake(), name, type: 1, options: Object.entries(options).map(([n, value]) => ({ name: n, type: 3, value })) },
        channel,
        channel_id: channel.id,
        ...(guildId ? { guild_id: guildId, member: { user: user(userId), roles: [] } } : { user: user(userId) }),
        app_permissions: '0',
        locale: 'en-US',
        entitlements: [],
        authorizing_integration_owners: {},
        context: guildId ? 0 : 1,
      };
      dispatch('INTERACTION_CREATE', d);
      return id;
    },
    redispatch(messageId) {
      const e = sentPayloads.get(messageId);
      if (!e) throw new Error(`no message ${messageId}`);
      dispatch(e.t, e.d);
    },
    drop() {
      const socket = current?.socket;
      if (current) current.socket = undefined;
      socket?.terminate();
    },
    rateLimitNext(count, retryAfterSeconds) {
      limits = { count, retryAfter: retryAfterSeconds };
    },
    channel(id, type, parentId) {
      channels.set(id, { id, type, ...(parentId ? { parent_id: parentId } : {}) });
    },
    async close() {
      for (const ws of sockets) ws.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
