/**
 * A local server speaking Slack's real protocols, for the real `@slack/web-api`
 * and `@slack/socket-mode` clients of the gateway:
 *
 * - the Web API (`POST /api/<method>`, form-encoded or JSON bodies, `Authorization:
 *   Bearer`): `auth.test`, `chat.postMessage` (recorded in order, `ts` ids), and
 *   `apps.connections.open` (app token only), which hands out this server's WebSocket URL;
 *   a scripted 429 with `Retry-After` for the next `chat.postMessage` calls;
 * - Socket Mode over that WebSocket: `hello` on connect, envelopes
 *   (`{envelope_id, type, payload, accepts_response_payload, retry_attempt, retry_reason}`)
 *   pushed by the test, and the client's acks (`{envelope_id, payload}`) recorded;
 * - and, the other way, Slack's signed Events API requests (`signedRequest`):
 *   `X-Slack-Signature: v0=HMAC-SHA256(secret, "v0:<ts>:<body>")`, `X-Slack-Request-Timestamp`.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { asyncListener } from './http.ts';
import { WebSocketServer, type WebSocket } from 'ws';

export const SLACK_BOT_TOKEN = 'xoxb-test-bot-token';
export const SLACK_APP_TOKEN = 'xapp-test-app-token';
export const SLACK_SIGNING_SECRET = 'test-signing-secret';
export const SLACK_BOT_USER = 'UBOT0001';
export const SLACK_ALLOWED_USER = 'UALLOW01';

/** A message the gateway posted. */
export interface PostedMessage {
  channel: string;
  text: string;
  thread_ts?: string;
  ts: string;
  at: number;
}

/** One Web API call, as received. */
export interface ApiCall {
  method: string;
  at: number;
  status: number;
}

export interface FakeSlack {
  /** Web API root for `SLACK_API_URL` (`http://127.0.0.1:<port>/api/`). */
  readonly apiUrl: string;
  readonly posted: PostedMessage[];
  readonly calls: ApiCall[];
  /** Socket Mode acks received, in order. */
  readonly acks: Array<{ envelope_id: string; payload?: Record<string, unknown>; at: number }>;
  /** The next `n` chat.postMessage calls are answered 429 with `Retry-After: retryAfterSeconds`. */
  rateLimitNext(n: number, retryAfterSeconds: number): void;
  /** Open Socket Mode connections. */
  readonly sockets: number;
  /** Push a Socket Mode envelope to every open connection; resolves with its envelope id. */
  pushEnvelope(type: 'events_api' | 'slash_commands', payload: unknown): string;
  close(): Promise<void>;
}

/** A string field of a request body, or '' (form fields are always strings; JSON ones may not be). */
const text = (v: unknown): string => (typeof v === 'string' ? v : '');

async function readBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const raw = Buffer.concat(chunks).toString('utf8');
  if ((req.headers['content-type'] ?? '').startsWith('application/json')) return raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
  return Object.fromEntries(new URLSearchParams(raw));
}

/** Start the fake. */
export async function startFakeSlack(): Promise<FakeSlack> {
  const posted: PostedMessage[] = [];
  const calls: ApiCall[] = [];
  const acks: FakeSlack['acks'] = [];
  let limited = { n: 0, retryAfter: 0 };
  let seq = 0;
  const server: Server = createServer(
    asyncListener(async (req, res) => {
      const method = (req.url ?? '').replace(/^\/api\//, '').split('?')[0]!;
      const body = await readBody(req);
      const token = (req.headers.authorization ?? '').replace(/^Bearer /, '') || text(body.token);
      const answer = (status: number, json: unknown, headers: Record<string, string> = {}) => {
        calls.push({ method, at: Date.now(), status });
        res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(json));
      };
      if (method === 'apps.connections.open') {
        if (token !== SLACK_APP_TOKEN) return answer(200, { ok: false, error: 'invalid_auth' });
        return answer(200, { ok: true, url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}/socket` });
      }
      if (token !== SLACK_BOT_TOKEN) return answer(200, { ok: false, error: 'invalid_auth' });
      if (method === 'auth.test')
        return answer(200, {
          ok: true,
          url: 'https://test.slack.com/',
          team: 'Test',
          team_id: 'T0001',
          user: 'hermes',
          user_id: SLACK_BOT_USER,
          bot_id: 'B0001',
        });
      if (method === 'chat.postMessage') {
        if (limited.n > 0) {
          limited.n--;
          return answer(429, { ok: false, error: 'ratelimited' }, { 'retry-after': String(limited.retryAfter) });
        }
        const channel = text(body.channel);
        if (!/^[CDG]/.test(channel)) return answer(200, { ok: false, error: 'channel_not_found' });
        const ts = `${Math.floor(Date.now() / 1000)}.${String(++seq).padStart(6, '0')}`;
        posted.push({
          channel,
          text: text(body.text),
          ...(text(body.thread_ts) ? { thread_ts: text(body.thread_ts) } : {}),
          ts,
          at: Date.now(),
        });
        return answer(200, { ok: true, channel, ts, message: { text: body.text, ts } });
      }
      return answer(200, { ok: false, error: 'unknown_method' });
    }),
  );
  const wss = new WebSocketServer({ noServer: true });
  const open = new Set<WebSocket>();
  server.on('upgrade', (req, socket, head) => {
    if (!req.url?.startsWith('/socket')) return socket.destroy();
    wss.handleUpgrade(req, socket, head, (ws) => {
      open.add(ws);
      ws.on('close', () => open.delete(ws));
      ws.on('message', (data) => {
        const msg = JSON.parse((data as Buffer).toString('utf8')) as { envelope_id: string; payload?: Record<string, unknown> };
        if (msg.envelope_id)
          acks.push({
            envelope_id: msg.envelope_id,
            ...(msg.payload && Object.keys(msg.payload).length ? { payload: msg.payload } : {}),
            at: Date.now(),
          });
      });
      ws.send(
        JSON.stringify({
          type: 'hello',
          num_connections: open.size,
          debug_info: { host: 'fake', approximate_connection_time: 3600 },
          connection_info: { app_id: 'A0001' },
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    apiUrl: `http://127.0.0.1:${port}/api/`,
    posted,
    calls,
    acks,
    get sockets() {
      return open.size;
    },
    rateLimitNext(n, retryAfterSeconds) {
      limited = { n, retryAfter: retryAfterSeconds };
    },
    pushEnvelope(type, payload) {
      const envelope_id = randomUUID();
      const msg = JSON.stringify({
        envelope_id,
        type,
        payload,
        accepts_response_payload: type === 'slash_commands',
        retry_attempt: 0,
        retry_reason: '',
      });
      for (const ws of open) ws.send(msg);
      return envelope_id;
    },
    async close() {
      for (const ws of open) ws.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** Slack's v0 signature of a request body at `timestampSec`. */
export function slackSignature(body: string, timestampSec: number, secret = SLACK_SIGNING_SECRET): string {
  return `v0=${createHmac('sha256', secret).update(`v0:${timestampSec}:${body}`).digest('hex')}`;
}

/** POST `body` to `url` as Slack does: signed, JSON or form-encoded. */
export async function signedRequest(
  url: string,
  body: string,
  options: { contentType?: string; timestampSec?: number; secret?: string; signature?: string; headers?: Record<string, string> } = {},
): Promise<Response> {
  const ts = options.timestampSec ?? Math.floor(Date.now() / 1000);
  return await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': options.contentType ?? 'application/json',
      'x-slack-request-timestamp': String(ts),
      'x-slack-signature': options.signature ?? slackSignature(body, ts, options.secret),
      ...options.headers,
    },
    body,
  });
}

/** An Events API `event_callback` carrying a direct message. */
export function dmEvent(
  text: string,
  options: { user?: string; channel?: string; eventId?: string; threadTs?: string } = {},
): Record<string, unknown> {
  const ts = `${Math.floor(Date.now() / 1000)}.${String(Math.floor(Math.random() * 1e6)).padStart(6, '0')}`;
  return {
    token: 'legacy-verification-token',
    team_id: 'T0001',
    api_app_id: 'A0001',
    type: 'event_callback',
    event_id: options.eventId ?? `Ev${randomUUID().replaceAll('-', '').slice(0, 10).toUpperCase()}`,
    event_time: Math.floor(Date.now() / 1000),
    event: {
      type: 'message',
      channel_type: 'im',
      channel: options.channel ?? 'D0000001',
      user: options.user ?? SLACK_ALLOWED_USER,
      text,
      ts,
      event_ts: ts,
      ...(options.threadTs ? { thread_ts: options.threadTs } : {}),
    },
  };
}

/** The form body of a `/hermes` slash command. */
export function slashCommandForm(text: string, options: { user?: string; channel?: string } = {}): string {
  return new URLSearchParams({
    token: 'legacy',
    team_id: 'T0001',
    team_domain: 'test',
    channel_id: options.channel ?? 'C0000001',
    channel_name: 'general',
    user_id: options.user ?? SLACK_ALLOWED_USER,
    user_name: 'someone',
    command: '/hermes',
    text,
    api_app_id: 'A0001',
    response_url: 'http://127.0.0.1:1/unused',
    trigger_id: `${Date.now()}.${Math.floor(Math.random() * 1e9)}`,
  }).toString();
}
