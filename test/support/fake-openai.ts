/**
 * A local server that speaks the OpenAI Chat Completions protocol
 * (`POST /v1/chat/completions`, JSON and `stream: true` SSE; `GET /v1/models`),
 * so the real `openai` client is exercised. Replies are scripted by the test:
 * text, an HTTP error, a delay, or tool calls (`finish_reason: tool_calls`;
 * streamed as `delta.tool_calls` pieces, arguments split across chunks).
 * Streamed text goes out one word per chunk; `stream_options.include_usage`
 * adds a final usage chunk with empty `choices`.
 *
 * Like a real model, an answer longer than the request's `max_completion_tokens` (or `max_tokens`)
 * is cut there and ends with `finish_reason: "length"`; a reply may also name its own
 * `finishReason` (`content_filter`). Streamed tool calls can be sent the way some upstreams send
 * them (`toolCallDeltas`: without `index`, id and name repeated on the last delta, or without a
 * name), and `raw` answers a body as given (a 200 with an `{"error": …}` object).
 *
 * Prompt tokens are counted with `gpt-tokenizer` (o200k): each message's
 * content, name and tool call arguments plus `MESSAGE_OVERHEAD` tokens, plus
 * the tool definitions' JSON. With a context window set, a request over it is
 * refused as OpenAI refuses it (400, `context_length_exceeded`, the window
 * named in the message), or in another provider's words and status
 * (`refusal`: provider-refusals.ts). What `usage` reports is chosen per server: the
 * counted tokens, the fixed figures older tests assert, or nothing (an
 * endpoint that reports no usage).
 *
 * Counted usage also says how many prompt tokens a provider's prompt cache would serve
 * (`prompt_tokens_details.cached_tokens`), by OpenAI's rule: the longest prefix the request shares
 * with an earlier answered request of the same session (its `prompt_cache_key`, else its `user`,
 * else one session per model), counted from 1,024 tokens up in steps of 128. The prefix is read
 * in the order a prompt is built: the tool definitions, then the messages; whole messages that
 * are the same, then the common leading tokens of the first one that differs.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { asyncListener } from './http.ts';
import { decode, encode } from 'gpt-tokenizer';
import { refusalAnswer, type ProviderRefusal } from './provider-refusals.ts';

/** One request the server received. */
export interface RecordedRequest {
  /** The whole request body as parsed (sampling parameters included). */
  body: Record<string, unknown>;
  model: string;
  messages: Array<{
    role: string;
    content: string;
    tool_call_id?: string;
    tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>;
  }>;
  stream: boolean;
  /** Names of the function tools offered. */
  tools: string[];
  tool_choice?: unknown;
  at: number;
  /**
   * Which try of its call this request is, as the `openai` client counts (`X-Stainless-Retry-Count`; 0 for a first
   * try and for a client that does not say): a retry of a connection the server dropped is a request of its own here.
   */
  retryCount: number;
  /** When the last content word of a streamed answer was written. */
  streamEndedAt?: number;
  /** The request's prompt tokens as counted by the server (see the header). */
  promptTokens: number;
  /** Refused for being over the context window (the responder was not asked). */
  refusedForLength?: true;
  /** Prompt tokens a prompt cache would serve (see the header); set when counted usage was answered. */
  cachedTokens?: number;
}

/** A tool call the scripted model makes; `arguments` as an object is sent as JSON. */
export interface ScriptedToolCall {
  name: string;
  arguments?: Record<string, unknown> | string;
  id?: string;
}

/**
 * An HTTP error answer. `code`, `type` go into the OpenAI error body; `headers` are sent as given
 * (e.g. `retry-after`). Unless `retryable`, the answer also says `x-should-retry: false`, so the
 * `openai` client fails at once instead of retrying it (what the tests of failure handling expect).
 */
export interface ScriptedError {
  status: number;
  message: string;
  code?: string;
  type?: string;
  headers?: Record<string, string>;
  /** Let the client retry it as it would a real answer of this status (429, 5xx). @defaultValue false */
  retryable?: boolean;
}

/**
 * How streamed tool calls are split into deltas: `indexed` (OpenAI's way: id, name and the first
 * half of the arguments, then the rest, each with its `index`); `no-index` (the same without
 * `index`); `repeat-last` (indexed, and the last delta repeats id and name); `nameless` (no delta
 * names the function: a stream nobody can assemble).
 */
export type ToolCallDeltas = 'indexed' | 'no-index' | 'repeat-last' | 'nameless';

/** How to answer a request: reply text, an HTTP error, a delay first, or tool calls. */
export type ScriptedReply =
  | string
  | ScriptedError
  | { delayMs: number; text: string }
  | { toolCalls: ScriptedToolCall[]; text?: string; toolCallDeltas?: ToolCallDeltas }
  /** Text that ends with this `finish_reason` (e.g. `content_filter`). */
  | { text: string; finishReason: string }
  /**
   * This body with this status (default 200), streamed request or not: what a broken endpoint sends.
   * JSON unless `contentType` is given (the body is then sent as it is, a string).
   */
  | { raw: unknown; status?: number; contentType?: string }
  /** Streamed requests get one word every `wordDelayMs` (a JSON answer is sent at once). */
  | { text: string; wordDelayMs: number }
  /** Counted usage says this many prompt tokens came from the provider's cache (`prompt_tokens_details.cached_tokens`). */
  | { text: string; cachedTokens: number };

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

/**
 * What answers report as `usage`: `counted` — the prompt tokens the server counted and the tokens
 * of the reply (text, tool call names and arguments); `fixed` — 7 in, 3 out (what tests written
 * before token counting assert); `none` — no `usage` at all.
 */
export type UsageMode = 'counted' | 'fixed' | 'none';

/** Options of `startFakeOpenAI`. */
export interface FakeOpenAIOptions {
  /** Refuse requests over this many prompt tokens (undefined: no limit). */
  contextWindow?: number;
  /** @defaultValue 'fixed' */
  usage?: UsageMode;
  /** Whose words a request over the window is refused in. @defaultValue 'openai' */
  refusal?: ProviderRefusal;
  /**
   * Refuse a request over the window with a bare 400 "Bad request." that says neither why nor the
   * window, as some proxies answer: a client learns nothing from it and cannot tell it is about
   * length (`refusal` is then not used). @defaultValue false
   */
  unexplainedRefusal?: boolean;
}

export interface FakeOpenAI {
  /** Base URL for the `openai` client, e.g. `http://127.0.0.1:1234/v1`. */
  baseUrl: string;
  requests: RecordedRequest[];
  /** Requests received whose answer has not been sent yet. */
  readonly pending: number;
  /** Requests refused for being over the context window. */
  readonly refusedForLength: number;
  /** Set how requests are answered; the function gets the request and its index (a promise holds the answer until it settles). */
  respond(fn: (req: RecordedRequest, index: number) => ScriptedReply | Promise<ScriptedReply>): void;
  /** Refuse requests over `tokens` prompt tokens from now on (undefined: no limit). */
  setContextWindow(tokens: number | undefined): void;
  /** Refuse in `provider`'s words from now on. */
  setRefusal(provider: ProviderRefusal): void;
  /** What answers report as `usage` from now on. */
  setUsage(mode: UsageMode): void;
  close(): Promise<void>;
}

/** Tokens counted per message on top of its content (role, separators). */
export const MESSAGE_OVERHEAD = 4;

/** Counts of texts seen before: a loop sends its transcript again with every turn. */
const counted = new Map<string, number>();
const COUNTED_MAX = 10_000;

/** Tokens of a text as the server counts them (o200k; special-token text counts as plain text). */
export function countTokens(text: string): number {
  if (!text) return 0;
  let n = counted.get(text);
  if (n === undefined) {
    n = encode(text, { disallowedSpecial: new Set() }).length;
    if (counted.size >= COUNTED_MAX) counted.clear();
    counted.set(text, n);
  }
  return n;
}

/** Prompt tokens of a request body as the server counts them. */
export function countPromptTokens(body: { messages: RecordedRequest['messages']; tools?: unknown[] }): number {
  let n = 3; // reply priming
  for (const m of body.messages) {
    const content: unknown = m.content;
    n += MESSAGE_OVERHEAD + countTokens(typeof content === 'string' ? content : content == null ? '' : JSON.stringify(content));
    for (const c of m.tool_calls ?? []) n += countTokens(c.function.name) + countTokens(c.function.arguments);
  }
  if (body.tools?.length) n += countTokens(JSON.stringify(body.tools));
  return n;
}

/** OpenAI's prompt caching: prefixes from this many tokens are cached, in steps of `CACHE_STEP_TOKENS`. */
export const CACHE_MIN_TOKENS = 1024;
export const CACHE_STEP_TOKENS = 128;
/** Earlier requests remembered per session (a real cache lives minutes). */
const CACHE_MAX_ENTRIES = 20_000;

type PromptBody = { messages: RecordedRequest['messages']; tools?: unknown[]; prompt_cache_key?: unknown; user?: unknown; model?: string };

/** One message as it takes part in a prefix: its text, its tokens. */
function messageKey(m: RecordedRequest['messages'][number]): string {
  return JSON.stringify([
    m.role,
    m.content,
    m.tool_call_id ?? null,
    (m.tool_calls ?? []).map((c) => [c.function.name, c.function.arguments]),
  ]);
}

function messageTokens(m: RecordedRequest['messages'][number]): number {
  const content: unknown = m.content;
  let n = MESSAGE_OVERHEAD + countTokens(typeof content === 'string' ? content : content == null ? '' : JSON.stringify(content));
  for (const c of m.tool_calls ?? []) n += countTokens(c.function.name) + countTokens(c.function.arguments);
  return n;
}

/**
 * The prompt prefixes a server has seen, per session: each prefix of whole messages by a chained
 * digest (with its tokens), and the messages seen after each, for the partial match of the first
 * message that differs.
 */
class PromptCache {
  private readonly prefixes = new Map<string, { tokens: number; next: Set<string> }>();

  /** Tokens of the longest prefix `body` shares with a request `remember`ed before. */
  longestPrefix(body: PromptBody): number {
    let digest = this.root(body);
    let seen = this.prefixes.get(digest);
    if (!seen) return 0;
    let tokens = seen.tokens;
    for (const m of body.messages) {
      const next = this.chain(digest, m);
      const whole = this.prefixes.get(next);
      if (!whole) {
        // The first message that differs: its framing and the leading tokens it shares with one seen there.
        const text = typeof m.content === 'string' ? m.content : '';
        let best = 0;
        for (const other of seen.next) {
          const o = JSON.parse(other) as { role: string; content: string };
          if (o.role !== m.role || !text || !o.content) continue;
          best = Math.max(best, commonLeadingTokens(text, o.content));
        }
        return best > 0 ? tokens + MESSAGE_OVERHEAD - 1 + best : tokens;
      }
      digest = next;
      seen = whole;
      tokens = whole.tokens;
    }
    return tokens;
  }

  /** Remember `body`'s prefixes. */
  remember(body: PromptBody): void {
    if (this.prefixes.size > CACHE_MAX_ENTRIES) this.prefixes.clear();
    let digest = this.root(body);
    let tokens = body.tools?.length ? countTokens(JSON.stringify(body.tools)) : 0;
    let entry = this.prefixes.get(digest) ?? { tokens, next: new Set<string>() };
    this.prefixes.set(digest, entry);
    for (const m of body.messages) {
      entry.next.add(JSON.stringify({ role: m.role, content: typeof m.content === 'string' ? m.content : '' }));
      digest = this.chain(digest, m);
      tokens += messageTokens(m);
      entry = this.prefixes.get(digest) ?? { tokens, next: new Set<string>() };
      this.prefixes.set(digest, entry);
    }
  }

  private root(body: PromptBody): string {
    const session = typeof body.prompt_cache_key === 'string' ? body.prompt_cache_key : typeof body.user === 'string' ? body.user : '';
    return createHash('sha256')
      .update(JSON.stringify([body.model ?? '', session, body.tools ?? []]))
      .digest('hex');
  }

  private chain(digest: string, m: RecordedRequest['messages'][number]): string {
    return createHash('sha256').update(digest).update(messageKey(m)).digest('hex');
  }
}

/** Leading tokens two texts share (o200k). */
function commonLeadingTokens(a: string, b: string): number {
  const ta = encode(a, { disallowedSpecial: new Set() });
  const tb = encode(b, { disallowedSpecial: new Set() });
  let i = 0;
  while (i < ta.length && i < tb.length && ta[i] === tb[i]) i++;
  return i;
}

/** What a prompt cache serves of a prefix of `prefixTokens` (OpenAI's steps), at most the prompt. */
export function cachedTokensOf(prefixTokens: number, promptTokens: number): number {
  const served = prefixTokens < CACHE_MIN_TOKENS ? 0 : Math.floor(prefixTokens / CACHE_STEP_TOKENS) * CACHE_STEP_TOKENS;
  return Math.min(served, promptTokens);
}

async function body(req: IncomingMessage): Promise<string> {
  let data = '';
  for await (const chunk of req) data += chunk;
  return data;
}

/** Start the fake model on a free loopback port. Default reply: `ok`. */
export async function startFakeOpenAI(options: FakeOpenAIOptions = {}): Promise<FakeOpenAI> {
  const requests: RecordedRequest[] = [];
  let pending = 0;
  let refusedForLength = 0;
  let contextWindow = options.contextWindow;
  let usageMode: UsageMode = options.usage ?? 'fixed';
  const promptCache = new PromptCache();
  let refusal: ProviderRefusal = options.refusal ?? 'openai';
  let responder: (req: RecordedRequest, index: number) => ScriptedReply | Promise<ScriptedReply> = () => 'ok';
  const server: Server = createServer(
    asyncListener(async (req, res) => {
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
        model: string;
        messages: RecordedRequest['messages'];
        stream?: boolean;
        tools?: Array<{ function: { name: string } }>;
        tool_choice?: unknown;
        stream_options?: { include_usage?: boolean };
        max_tokens?: number;
        max_completion_tokens?: number;
      };
      let promptTokens: number | undefined;
      const rec: RecordedRequest = {
        body: parsed,
        model: parsed.model,
        messages: parsed.messages,
        stream: Boolean(parsed.stream),
        at: Date.now(),
        retryCount: Number(req.headers['x-stainless-retry-count'] ?? 0) || 0,
        tools: (parsed.tools ?? []).map((t) => t.function.name),
        tool_choice: parsed.tool_choice,
        // Counted when first read (a window check, counted usage, a test): tokenizing megabytes takes seconds.
        get promptTokens() {
          return (promptTokens ??= countPromptTokens(parsed));
        },
      };
      const index = requests.push(rec) - 1;
      if (contextWindow !== undefined && rec.promptTokens > contextWindow) {
        rec.refusedForLength = true;
        refusedForLength++;
        const answer = options.unexplainedRefusal
          ? { status: 400, body: { error: { message: 'Bad request.', type: 'invalid_request_error', param: null, code: null } } }
          : refusalAnswer(refusal, contextWindow, rec.promptTokens);
        res.writeHead(answer.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(answer.body));
        return;
      }
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
      if (typeof reply === 'object' && 'raw' in reply) {
        res.writeHead(reply.status ?? 200, { 'content-type': reply.contentType ?? 'application/json', 'x-should-retry': 'false' });
        res.end(reply.contentType ? String(reply.raw) : JSON.stringify(reply.raw));
        return;
      }
      if (typeof reply === 'object' && 'status' in reply) {
        res.writeHead(reply.status, {
          'content-type': 'application/json',
          ...(reply.retryable ? {} : { 'x-should-retry': 'false' }),
          ...reply.headers,
        });
        res.end(
          JSON.stringify({ error: { message: reply.message, type: reply.type ?? 'server_error', param: null, code: reply.code ?? null } }),
        );
        return;
      }
      let text = typeof reply === 'string' ? reply : (reply.text ?? '');
      // A model stops at the request's output limit, and says so.
      const limit = parsed.max_completion_tokens ?? parsed.max_tokens;
      let cut = false;
      if (typeof limit === 'number' && countTokens(text) > limit) {
        text = decode(encode(text, { disallowedSpecial: new Set() }).slice(0, limit));
        cut = true;
      }
      const wordDelayMs = typeof reply === 'object' && 'wordDelayMs' in reply ? reply.wordDelayMs : 0;
      const calls =
        typeof reply === 'object' && 'toolCalls' in reply
          ? reply.toolCalls.map((c) => ({
              id: c.id ?? `call_${++callCounter}`,
              type: 'function' as const,
              function: { name: c.name, arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments ?? {}) },
            }))
          : [];
      const finish = cut
        ? 'length'
        : typeof reply === 'object' && 'finishReason' in reply
          ? reply.finishReason
          : calls.length > 0
            ? 'tool_calls'
            : 'stop';
      const deltaStyle: ToolCallDeltas =
        typeof reply === 'object' && 'toolCallDeltas' in reply ? (reply.toolCallDeltas ?? 'indexed') : 'indexed';
      const completionTokens =
        countTokens(text) + calls.reduce((n, c) => n + countTokens(c.function.name) + countTokens(c.function.arguments), 0);
      if (usageMode === 'counted') {
        rec.cachedTokens =
          typeof reply === 'object' && 'cachedTokens' in reply
            ? Math.min(reply.cachedTokens, rec.promptTokens)
            : cachedTokensOf(promptCache.longestPrefix(parsed), rec.promptTokens);
        promptCache.remember(parsed);
      }
      const usage =
        usageMode === 'none'
          ? undefined
          : usageMode === 'fixed'
            ? { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 }
            : {
                prompt_tokens: rec.promptTokens,
                completion_tokens: completionTokens,
                total_tokens: rec.promptTokens + completionTokens,
                prompt_tokens_details: { cached_tokens: rec.cachedTokens ?? 0 },
              };
      const id = `chatcmpl-${index}`;
      const created = Math.floor(Date.now() / 1000);
      if (rec.stream) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
          res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: rec.model, choices, ...extra })}\n\n`);
        chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]);
        const words = text.length ? (text.match(/\S+\s*/g) ?? [text]) : [];
        for (const [i, w] of words.entries()) {
          if (i > 0 && wordDelayMs > 0) await new Promise((r) => setTimeout(r, wordDelayMs));
          chunk([{ index: 0, delta: { content: w }, finish_reason: null }]);
        }
        rec.streamEndedAt = Date.now();
        calls.forEach((c, i) => {
          const half = Math.ceil(c.function.arguments.length / 2);
          const index = deltaStyle === 'no-index' ? {} : { index: i };
          const name = deltaStyle === 'nameless' ? {} : { name: c.function.name };
          chunk([
            {
              index: 0,
              delta: {
                tool_calls: [
                  { ...index, id: c.id, type: 'function', function: { ...name, arguments: c.function.arguments.slice(0, half) } },
                ],
              },
              finish_reason: null,
            },
          ]);
          const repeat = deltaStyle === 'repeat-last' ? { id: c.id, type: 'function' } : {};
          const repeatName = deltaStyle === 'repeat-last' ? { name: c.function.name } : {};
          chunk([
            {
              index: 0,
              delta: { tool_calls: [{ ...index, ...repeat, function: { ...repeatName, arguments: c.function.arguments.slice(half) } }] },
              finish_reason: null,
            },
          ]);
        });
        chunk([{ index: 0, delta: {}, finish_reason: finish }]);
        if (parsed.stream_options?.include_usage && usage) chunk([], { usage });
        res.end('data: [DONE]\n\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id,
          object: 'chat.completion',
          created,
          model: rec.model,
          choices: [
            {
              index: 0,
              message: {
                role: 'assistant',
                content: calls.length > 0 && !text ? null : text,
                ...(calls.length > 0 ? { tool_calls: calls } : {}),
              },
              finish_reason: finish,
            },
          ],
          ...(usage ? { usage } : {}),
        }),
      );
    }),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    get pending() {
      return pending;
    },
    get refusedForLength() {
      return refusedForLength;
    },
    respond(fn) {
      responder = fn;
    },
    setContextWindow(tokens) {
      contextWindow = tokens;
    },
    setRefusal(provider) {
      refusal = provider;
    },
    setUsage(mode) {
      usageMode = mode;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
