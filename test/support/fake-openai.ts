/**
 * A local server that speaks the OpenAI Chat Completions protocol
 * (`POST /v1/chat/completions`, JSON and `stream: true` SSE; `GET /v1/models`),
 * so the real `openai` client is exercised. Replies are scripted by the test:
 * text, an HTTP error, a delay, or tool calls (`finish_reason: tool_calls`;
 * streamed as `delta.tool_calls` pieces, arguments split across chunks).
 * Streamed text goes out one word per chunk; `stream_options.include_usage`
 * adds a final usage chunk with empty `choices`.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the server received. */
export interface RecordedRequest {
  model: string;
  messages: Array<{ role: string; content: string; tool_call_id?: string; tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }> }>;
  stream: boolean;
  /** Names of the function tools offered. */
  tools: string[];
  tool_choice?: unknown;
  at: number;
  /** When the last content word of a streamed answer was written. */
  streamEndedAt?: number;
}

/** A tool call the scripted model makes; `arguments` as an object is sent as JSON. */
export interface ScriptedToolCall {
  name: string;
  arguments?: Record<string, unknown> | string;
  id?: string;
}

/** How to answer a request: reply text, an HTTP error, a delay first, or tool calls. */
export type ScriptedReply =
  | string
  | { status: number; message: string }
  | { delayMs: number; text: string }
  | { toolCalls: ScriptedToolCall[]; text?: string }
  /** Streamed requests get one word every `wordDelayMs` (a JSON answer is sent at once). */
  | { text: string; wordDelayMs: number };

let callCounter = 0;

/** The text of the last user message of a request ('' when there is none). */
export function lastUserText(req: RecordedRequest): string {
  return [...req.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
}

/** The last message of a request when it is a tool result, else undefined. */
export function lastToolResult(req: RecordedRequest): string | undefined {
  const last = req.messages[req.messages.length - 1];
  return last?.role === 'tool' ? last.content : undefined;
}

/** `echo: <content of the last message>`: a reply a test can trace back to its own request. */
export function echoLast(req: RecordedRequest): string {
  return `echo: ${req.messages[req.messages.length - 1]?.content ?? ''}`;
}

export interface FakeOpenAI {
  /** Base URL for the `openai` client, e.g. `http://127.0.0.1:1234/v1`. */
  baseUrl: string;
  requests: RecordedRequest[];
  /** Requests received whose answer has not been sent yet. */
  readonly pending: number;
  /** Set how requests are answered; the function gets the request and its index (a promise holds the answer until it settles). */
  respond(fn: (req: RecordedRequest, index: number) => ScriptedReply | Promise<ScriptedReply>): void;
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
  let responder: (req: RecordedRequest, index: number) => ScriptedReply | Promise<ScriptedReply> = () => 'ok';
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
    const parsed = JSON.parse(await body(req)) as {
      model: string; messages: RecordedRequest['messages']; stream?: boolean; tools?: Array<{ function: { name: string } }>;
      tool_choice?: unknown; stream_options?: { include_usage?: boolean };
    };
    const rec: RecordedRequest = {
      model: parsed.model, messages: parsed.messages, stream: Boolean(parsed.stream), at: Date.now(),
      tools: (parsed.tools ?? []).map((t) => t.function.name), tool_choice: parsed.tool_choice,
    };
    const index = requests.push(rec) - 1;
    pending++;
    let reply: ScriptedReply;
    try {
      reply = await responder(rec, index);
      if (typeof reply === 'object' && 'delayMs' in reply) {
        const { delayMs, text } = reply;
        await new Promise((r) => setTimeout(r, delayMs));
        reply = text;
      }
    } finally {
      pending--;
    }
    if (typeof reply === 'object' && 'status' in reply) {
      res.writeHead(reply.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: reply.message, type: 'server_error', code: null } }));
      return;
    }
    const text = typeof reply === 'string' ? reply : (reply.text ?? '');
    const wordDelayMs = typeof reply === 'object' && 'wordDelayMs' in reply ? reply.wordDelayMs : 0;
    const calls = typeof reply === 'object' && 'toolCalls' in reply
      ? reply.toolCalls.map((c) => ({
          id: c.id ?? `call_${++callCounter}`, type: 'function' as const,
          function: { name: c.name, arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments ?? {}) },
        }))
      : [];
    const finish = calls.length > 0 ? 'tool_calls' : 'stop';
    const usage = { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 };
    const id = `chatcmpl-${index}`;
    const created = Math.floor(Date.now() / 1000);
    if (rec.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
        res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: rec.model, choices, ...extra })}\n\n`);
      chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]);
      const words = text.length ? text.match(/\S+\s*/g) ?? [text] : [];
      for (const [i, w] of words.entries()) {
        if (i > 0 && wordDelayMs > 0) await new Promise((r) => setTimeout(r, wordDelayMs));
        chunk([{ index: 0, delta: { content: w }, finish_reason: null }]);
      }
      rec.streamEndedAt = Date.now();
      calls.forEach((c, i) => {
        const half = Math.ceil(c.function.arguments.length / 2);
        chunk([{ index: 0, delta: { tool_calls: [{ index: i, id: c.id, type: 'function', function: { name: c.function.name, arguments: c.function.arguments.slice(0, half) } }] }, finish_reason: null }]);
        chunk([{ index: 0, delta: { tool_calls: [{ index: i, function: { arguments: c.function.arguments.slice(half) } }] }, finish_reason: null }]);
      });
      chunk([{ index: 0, delta: {}, finish_reason: finish }]);
      if (parsed.stream_options?.include_usage) chunk([], { usage });
      res.end('data: [DONE]\n\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({
      id, object: 'chat.completion', created, model: rec.model,
      choices: [{ index: 0, message: { role: 'assistant', content: calls.length > 0 && !text ? null : text, ...(calls.length > 0 ? { tool_calls: calls } : {}) }, finish_reason: finish }],
      usage,
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
