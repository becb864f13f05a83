/** Small HTTP helpers for gateway tests (plain fetch over loopback) and the tests' fake servers. */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type RequestListener, type ServerResponse } from 'node:http';
import { readApiKeyFile } from '../../scheduler/config/api-key.ts';
import type { CleanUp } from './cleanup.ts';

/** One parsed server-sent event. */
export interface SseFrame {
  id?: string;
  event?: string;
  data: string;
}

/** Parse a complete SSE body into frames (comments dropped). */
export function parseSse(text: string): SseFrame[] {
  const frames: SseFrame[] = [];
  for (const block of text.split(/\n\n/)) {
    const frame: SseFrame = { data: '' };
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':') || line === '') continue;
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
      if (field === 'id') frame.id = value;
      else if (field === 'event') frame.event = value;
      else if (field === 'data') data.push(value);
    }
    if (data.length > 0 || frame.event) {
      frame.data = data.join('\n');
      frames.push(frame);
    }
  }
  return frames;
}

/**
 * Read an SSE response until `until` returns true for a frame, or the stream ends.
 * Aborts the request afterwards.
 */
export async function readSseUntil(res: Response, until: (f: SseFrame) => boolean, controller?: AbortController): Promise<SseFrame[]> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  const frames: SseFrame[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, cut + 2);
        buf = buf.slice(cut + 2);
        for (const f of parseSse(block)) {
          frames.push(f);
          if (until(f)) return frames;
        }
      }
    }
  } finally {
    controller?.abort();
    reader.releaseLock();
  }
  return frames;
}

export { waitFor } from './wait-for.ts';

/**
 * `Authorization: Bearer <key>` with the key a gateway without `API_SERVER_KEY` made in its home
 * (`$HERMES_HOME/api.key`, scheduler/config/api-key.ts).
 * @throws Error when the home has no key file (no gateway started there yet)
 */
export function homeKeyAuth(home: string): { authorization: string } {
  const key = readApiKeyFile(home);
  if (key === undefined) throw new Error(`no API key file in ${home}`);
  return { authorization: `Bearer ${key}` };
}

/** The JSON body of a response (awaits the response first when given a promise). */
export async function readJson(res: Response | Promise<Response>): Promise<any> {
  return (await res).json();
}

/**
 * A `node:http` request listener running an async handler. A handler that rejects is a fake server's
 * bug: its client gets a 500 at once instead of waiting for its own timeout, and the error is thrown
 * again outside the promise, so vitest reports it and fails the run as before.
 */
export function asyncListener(handler: (req: IncomingMessage, res: ServerResponse) => Promise<unknown>): RequestListener {
  return (req, res) => {
    handler(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(err));
      queueMicrotask(() => {
        throw err;
      });
    });
  };
}

/** A request a webhook receiver got. */
export interface ReceivedPost {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A local webhook receiver (`startWebhookReceiver`). */
export interface WebhookReceiver {
  /** The paths requested, in order. */
  hits: string[];
  /** Every request whole, in order. */
  posts: ReceivedPost[];
  port: number;
}

/**
 * A local webhook receiver on 127.0.0.1 recording what it got; `answer` decides each answer's status and
 * headers (default 204). Closed through `cleanups`.
 */
export async function startWebhookReceiver(
  cleanups: CleanUp[],
  answer: (req: IncomingMessage) => { status: number; headers?: Record<string, string> } = () => ({ status: 204 }),
): Promise<WebhookReceiver> {
  const hits: string[] = [];
  const posts: ReceivedPost[] = [];
  const server = createServer((req, res) => {
    hits.push(req.url ?? '');
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      posts.push({ path: req.url ?? '', headers: req.headers, body });
      const a = answer(req);
      res.writeHead(a.status, a.headers).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  return { hits, posts, port: (server.address() as { port: number }).port };
}
