/**
 * A local server that speaks the OpenAI Chat Completions protocol
 * (`POST /v1/chat/completions`, JSON and `stream: true` SSE; `GET /v1/models`),
 * so the real `openai` client is exercised. Replies are scripted by the test.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the server received. */
export interface RecordedRequest {
  model: string;
  messages: Array<{ role: string; content: string }>;
  stream: boolean;
  at: number;
}

/** How to answer a request: reply text, an HTTP error, or a delay first. */
export type ScriptedReply = string | { status: number; message: string } | { delayMs: number; text: string };

export interface FakeOpenAI {
  /** Base URL for the `openai` client, e.g. `http://127.0.0.1:1234/v1`. */
  baseUrl: string;
  requests: RecordedRequest[];
  /** Requests received whose answer has not been sent yet. */
  readonly pending: number;
  /** Set how requests are answered; the function gets the request and its index. */
  respond(fn: (req: RecordedRequest, index: number) => ScriptedReply): void;
  close(): Promise<void>;
}

async function body(req: IncomingMessage): Promise<string> {
  let data = '';
  for await (const chunk of req) data += chunk;
  return data;
}

/** Start the fake model on a free loopback port. Default reply: `ok`. */
export async function startFakeOpenAI(): Promise<FakeOpenAI> {
  const requests: RecordedRequest[] = [];
  let pending = 0;
  let responder: (req: RecordedRequest, index: number) => ScriptedReply = () => 'ok';
  const server: Server = createServer(async (req, res) => {
    if (req.method === 'GET' && req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'fake-model', object: 'model', created: 0, owned_by: 'test' }] }));
      return;
    }
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.writeHead(404).end();
      return;
    }
    const parsed = JSON.parse(await body(req)) as { model: string; messages: RecordedRequest['messages']; stream?: boolean };
    const rec: RecordedRequest = { model: parsed.model, messages: parsed.messages, stream: Boolean(parsed.stream), at: Date.now() };
    const index = requests.push(rec) - 1;
    let reply = responder(rec, index);
    if (typeof reply === 'object' && 'delayMs' in reply) {
      const { delayMs, text } = reply;
      pending++;
      await new Promise((r) => setTimeout(r, delayMs));
      pending--;
      reply = text;
    }
    if (typeof reply === 'object') {
      res.writeHead(reply.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: reply.message, type: 'server_error', code: null } }));
      return;
    }
    const id = `chatcmpl-${index}`;
    const created = Math.floor(Date.now() / 1000);
    if (rec.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const words = reply.length ? reply.match(/\S+\s*/g) ?? [reply] : [''];
      for (const w of words) {
        res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: rec.model, choices: [{ index: 0, delta: { content: w }, finish_reason: null }] })}\n\n`);
      }
      res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: rec.model, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`);
      res.end('data: [DONE]\n\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({
      id, object: 'chat.completion', created, model: rec.model,
      choices: [{ index: 0, message: { role: 'assistant', content: reply }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
    }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    get pending() {
      return pending;
    },
    respond(fn) {
      responder = fn;
    },
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}
