/**
 * The OpenAI-compatible surface as the official clients see it: the Responses API (plain,
 * streamed, continued with `previous_response_id`, read back and deleted), client parameters
 * forwarded to the model or refused by name, `model` checked against `/v1/models`, `GET /v1/runs`
 * paged, and bad bodies that name the field and what was expected. End to end: real express
 * over loopback, real BullMQ queue and worker, the official `openai` client on both sides.
 */
import OpenAI, { APIError } from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../scheduler/logger.ts';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { CONVERSATION_MAX_CHARS } from '../gateway/http/v1/v1-responses.ts';
import { V1_ENDPOINTS, ruleOf, type V1Endpoint } from '../gateway/http/v1/v1-param-table.ts';
import {
  echoLast,
  lastUserText,
  startFakeOpenAI,
  type FakeOpenAI,
  type RecordedRequest,
  type ScriptedReply,
} from './support/fake-openai.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { parseSse, readJson, waitFor } from './support/http.ts';
import { startV1Worker, type TestV1Worker } from './support/v1-worker.ts';
import { IGNORED_SAMPLES, REFUSED_SAMPLES } from './support/v1-param-samples.ts';

const KEY = 'test-key-0123456789';

let model: FakeOpenAI;
let env: TestEnv;
let gw: Gateway;
let worker: TestV1Worker;
let answer: (req: RecordedRequest) => ScriptedReply = (req) => echoLast(req);

beforeAll(async () => {
  model = await startFakeOpenAI();
  model.respond((req) => answer(req));
  env = testEnv({
    'agent.base_url': model.baseUrl,
    'agent.api_key': 'model-key',
    'agent.model': 'primary-model',
    'api_server.port': 0,
    'api_server.key': KEY,
    'agent.models': { cheap: { model: 'cheap-model-id' } },
    'agent.max_prompt_chars': 600_000,
  });
  gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }) });
  worker = await startV1Worker(env);
});

afterEach(() => {
  answer = (req) => echoLast(req);
});

afterAll(async () => {
  await gw?.close();
  await worker?.close();
  await model?.close();
  env?.cleanup();
});

function client(): OpenAI {
  return new OpenAI({ baseURL: `${gw.httpAddress.url}/v1`, apiKey: KEY, maxRetries: 0 });
}

function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${gw.httpAddress.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

function get(path: string): Promise<Response> {
  return fetch(`${gw.httpAddress.url}${path}`, { headers: { authorization: `Bearer ${KEY}` } });
}

/** The error a call of the client failed with. */
async function apiError(p: Promise<unknown>): Promise<APIError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof APIError) return err;
    throw err;
  }
  throw new Error('the call succeeded');
}

describe('POST /v1/responses', () => {
  it('answers a Response the official client reads: output_text, status, usage, instructions as the system message', async () => {
    const before = model.requests.length;
    const res = await client().responses.create({ model: 'hermes-agent', instructions: 'Answer in French.', input: 'what is new?' });
    expect(res).toMatchObject({
      object: 'response',
      status: 'completed',
      model: 'hermes-agent',
      instructions: 'Answer in French.',
      error: null,
      incomplete_details: null,
      output: [
        {
          type: 'message',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: 'echo: what is new?', annotations: [] }],
        },
      ],
      usage: { input_tokens: 7, output_tokens: 3, total_tokens: 10 },
    });
    expect(res.id).toMatch(/^resp_[0-9a-f]{24}$/);
    expect(res.output_text).toBe('echo: what is new?');
    const sent = model.requests.slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.messages).toEqual([
      { role: 'system', content: 'Answer in French.' },
      { role: 'user', content: 'what is new?' },
    ]);
  });

  it('takes message items with text parts (input_text, output_text) and developer messages', async () => {
    const before = model.requests.length;
    const res = await client().responses.create({
      model: 'hermes-agent',
      input: [
        { role: 'developer', content: 'Be terse.' },
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: 'first' },
            { type: 'input_text', text: 'part' },
          ],
        },
        { role: 'assistant', content: 'noted' },
        { role: 'user', content: 'and now?' },
      ],
    });
    expect(res.output_text).toBe('echo: and now?');
    expect(model.requests[before]!.messages).toEqual([
      { role: 'system', content: 'Be terse.' },
      { role: 'user', content: 'first\npart' },
      { role: 'assistant', content: 'noted' },
      { role: 'user', content: 'and now?' },
    ]);
  });

  it("streams the Responses event types in order; the client's stream helper assembles the final response", async () => {
    answer = () => ({ text: 'one two three four', wordDelayMs: 20 });
    const stream = await client().responses.create({ model: 'hermes-agent', input: 'count', stream: true });
    const events: Array<{ type: string; sequence_number: number; delta?: string }> = [];
    for await (const e of stream) events.push(e);
    const types = [...new Set(events.map((e) => e.type))];
    expect(types).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const deltas = events.filter((e) => e.type === 'response.output_text.delta');
    expect(deltas.length).toBeGreaterThan(1); // the model's deltas as they came, not one block at the end
    expect(deltas.map((e) => e.delta).join('')).toBe('one two three four');
    const done = events.at(-1) as unknown as { response: OpenAI.Responses.Response };
    expect(done.response).toMatchObject({ status: 'completed', output: [{ content: [{ text: 'one two three four' }] }] });

    const helper = client().responses.stream({ model: 'hermes-agent', input: 'again' });
    const final = await helper.finalResponse();
    expect(final.output_text).toBe('one two three four');
  });

  it('a failed run streams an error event, then response.failed', async () => {
    answer = () => ({ status: 500, message: 'upstream exploded' });
    const res = await post('/v1/responses', { model: 'hermes-agent', input: 'boom', stream: true });
    expect(res.status).toBe(200);
    const frames = parseSse(await res.text());
    const types = frames.map((f) => f.event);
    expect(types.slice(0, 2)).toEqual(['response.created', 'response.in_progress']);
    expect(types.slice(-2)).toEqual(['error', 'response.failed']);
    const error = JSON.parse(frames.at(-2)!.data);
    expect(error).toMatchObject({ type: 'error', code: 'model_error', message: expect.stringMatching(/upstream exploded/) });
    expect(JSON.parse(frames.at(-1)!.data).response).toMatchObject({
      status: 'failed',
      error: { code: 'server_error', message: expect.stringMatching(/upstream exploded/) },
    });
    // Not streamed: the error is the HTTP answer, as for chat completions.
    const plain = await apiError(client().responses.create({ model: 'hermes-agent', input: 'boom' }));
    expect(plain.status).toBe(502);
    expect(plain.message).toMatch(/upstream exploded/);
  });

  it('previous_response_id continues the conversation server-side; instructions are not carried over', async () => {
    const c = client();
    const first = await c.responses.create({ model: 'hermes-agent', instructions: 'Be brief.', input: 'my name is Ada' });
    const before = model.requests.length;
    const second = await c.responses.create({ model: 'hermes-agent', input: 'what is my name?', previous_response_id: first.id });
    expect(second.previous_response_id).toBe(first.id);
    // Without instructions of its own the request has the agent's system prompt, not the first one's.
    const [system, ...rest] = model.requests[before]!.messages;
    expect(system).toMatchObject({ role: 'system', content: expect.stringMatching(/^You are Hermes/) });
    expect(rest).toEqual([
      { role: 'user', content: 'my name is Ada' },
      { role: 'assistant', content: 'echo: my name is Ada' },
      { role: 'user', content: 'what is my name?' },
    ]);
    const third = await c.responses.create({ model: 'hermes-agent', input: 'and again?', previous_response_id: second.id, stream: true });
    for await (const _ of third) {
      /* drain */
    }
    expect(
      model.requests
        .at(-1)!
        .messages.slice(1)
        .map((m) => m.content),
    ).toEqual(['my name is Ada', 'echo: my name is Ada', 'what is my name?', 'echo: what is my name?', 'and again?']);
    // An unknown previous response is 404 naming the field.
    const missing = await apiError(
      c.responses.create({ model: 'hermes-agent', input: 'x', previous_response_id: 'resp_000000000000000000000000' }),
    );
    expect(missing.status).toBe(404);
    expect(missing).toMatchObject({ code: 'previous_response_not_found', param: 'previous_response_id' });
  });

  it('a conversation over the limit is refused, or with truncation: "auto" continues without its oldest messages', async () => {
    answer = () => 'ok';
    const big = 'x'.repeat(500_000);
    const c = client();
    let prev = await c.responses.create({ model: 'hermes-agent', input: big });
    for (let i = 0; i < 3; i++) prev = await c.responses.create({ model: 'hermes-agent', input: big, previous_response_id: prev.id });
    const refused = await apiError(c.responses.create({ model: 'hermes-agent', input: big, previous_response_id: prev.id }));
    expect(refused).toMatchObject({ status: 400, code: 'conversation_too_long', param: 'previous_response_id' });
    expect(refused.message).toContain(String(CONVERSATION_MAX_CHARS));
    const before = model.requests.length;
    const cut = await c.responses.create({ model: 'hermes-agent', input: 'last', previous_response_id: prev.id, truncation: 'auto' });
    expect(cut.status).toBe('completed');
    const sent = model.requests[before]!.messages;
    expect(sent.at(-1)!.content).toBe('last');
    expect(sent.reduce((n, m) => n + m.content.length, 0)).toBeLessThanOrEqual(CONVERSATION_MAX_CHARS);
  });

  it('GET /v1/responses/:id reads it back; DELETE removes it; both 404 afterwards', async () => {
    const c = client();
    const res = await c.responses.create({ model: 'hermes-agent', input: 'keep me', metadata: { ticket: 'T-1' } });
    const read = await c.responses.retrieve(res.id);
    expect(read).toMatchObject({ id: res.id, status: 'completed', metadata: { ticket: 'T-1' }, output_text: 'echo: keep me' });
    // The same run is visible as a run.
    expect((await readJson(get(`/v1/runs/run_${res.id.slice(5)}`))).output).toBe('echo: keep me');
    await c.responses.delete(res.id);
    const again = await fetch(`${gw.httpAddress.url}/v1/responses/${res.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${KEY}` },
    });
    expect(again.status).toBe(404);
    expect((await apiError(c.responses.retrieve(res.id))).status).toBe(404);
    const other = await c.responses.create({ model: 'hermes-agent', input: 'delete me' });
    const body = await readJson(
      fetch(`${gw.httpAddress.url}/v1/responses/${other.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${KEY}` } }),
    );
    expect(body).toEqual({ id: other.id, object: 'response.deleted', deleted: true });
  });

  it('DELETE of a response still running stops it and answers its waiting caller at once', async () => {
    answer = () => ({ delayMs: 3000, text: 'too late' });
    const waiting = post('/v1/responses', { model: 'hermes-agent', input: 'slow one' });
    const runId = await waitFor(
      async () => {
        const list = await readJson(get('/v1/runs?limit=1'));
        return list.data[0]?.status === 'running' ? (list.data[0].id as string) : undefined;
      },
      5000,
      'the response running',
    );
    const started = Date.now();
    const del = await fetch(`${gw.httpAddress.url}/v1/responses/resp_${runId.slice(4)}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${KEY}` },
    });
    expect(del.status).toBe(200);
    const res = await waiting;
    expect(Date.now() - started).toBeLessThan(2000);
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect((await get(`/v1/runs/${runId}`)).status).toBe(404);
  });

  it('Idempotency-Key replays the same response without a second model call', async () => {
    const key = `idem-resp-${Date.now()}`;
    const before = model.requests.length;
    const a = await readJson(post('/v1/responses', { model: 'hermes-agent', input: 'once' }, { 'idempotency-key': key }));
    const started = Date.now();
    const b = await readJson(post('/v1/responses', { model: 'hermes-agent', input: 'once' }, { 'idempotency-key': key }));
    expect(b.id).toBe(a.id);
    // The replay reads the ended run's events at once (the shared reader restarts its read for a
    // subscriber behind it), not after its 5 s block.
    expect(Date.now() - started).toBeLessThan(2000);
    expect(model.requests.length).toBe(before + 1);
    const c = await post('/v1/responses', { model: 'hermes-agent', input: 'twice' }, { 'idempotency-key': key });
    expect(c.status).toBe(409);
  });

  it("refuses the caller's tools, non-text items and a stored prompt with a 400 naming them", async () => {
    const c = client();
    const tools = await apiError(
      c.responses.create({
        model: 'hermes-agent',
        input: 'x',
        tools: [{ type: 'function', name: 'f', parameters: {}, strict: false }],
      }),
    );
    expect(tools).toMatchObject({ status: 400, code: 'client_tools_not_allowed', param: 'tools' });
    const item = await apiError(
      c.responses.create({ model: 'hermes-agent', input: [{ type: 'function_call_output', call_id: 'c1', output: '42' }] }),
    );
    expect(item).toMatchObject({ status: 400, code: 'unsupported_input_item', param: 'input.0.type' });
    const image = await apiError(
      c.responses.create({
        model: 'hermes-agent',
        input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://example.com/a.png', detail: 'auto' }] }],
      }),
    );
    expect(image).toMatchObject({ status: 400, code: 'unsupported_content', param: 'input.0.content.0.type' });
    const prompt = await apiError(c.responses.create({ model: 'hermes-agent', input: 'x', prompt: { id: 'pmpt_123' } }));
    expect(prompt).toMatchObject({ status: 400, code: 'unsupported_parameter', param: 'prompt' });
    expect(prompt.message).toMatch(/prompt is not accepted by POST \/v1\/responses: a prompt template stored with OpenAI/);
  });

  it('store: false answers, echoes it, and keeps nothing to read back or continue; store: true keeps both', async () => {
    const c = client();
    const unstored = await c.responses.create({ model: 'hermes-agent', input: 'forget me', store: false });
    expect(unstored).toMatchObject({ status: 'completed', store: false, output_text: 'echo: forget me' });
    const read = await apiError(c.responses.retrieve(unstored.id));
    expect(read).toMatchObject({ status: 404, code: 'response_not_found', param: 'id' });
    expect(read.message).toMatch(/made with store: false/);
    const before = model.requests.length;
    const continued = await apiError(c.responses.create({ model: 'hermes-agent', input: 'and?', previous_response_id: unstored.id }));
    expect(continued).toMatchObject({ status: 404, code: 'previous_response_not_found', param: 'previous_response_id' });
    expect(continued.message).toMatch(/store: false.*send the whole conversation as input/);
    expect(model.requests.length).toBe(before);
    // Its run is a run like any other: it has the answer, and no conversation is kept with it.
    const runId = `run_${unstored.id.slice('resp_'.length)}`;
    expect(await readJson(get(`/v1/runs/${runId}`))).toMatchObject({ status: 'completed', output: 'echo: forget me' });
    expect(await worker.deps.redis.hget(worker.deps.keys.run(runId), 'conversation')).toBeNull();
    // Streamed the same.
    const streamed = await c.responses.stream({ model: 'hermes-agent', input: 'forget this too', store: false }).finalResponse();
    expect(streamed).toMatchObject({ store: false, output_text: 'echo: forget this too' });
    expect((await apiError(c.responses.retrieve(streamed.id))).status).toBe(404);
    // The near miss: store: true (the default) is kept, read back and continued.
    const stored = await c.responses.create({ model: 'hermes-agent', input: 'keep me', store: true });
    expect(await c.responses.retrieve(stored.id)).toMatchObject({ store: true });
    const next = await c.responses.create({ model: 'hermes-agent', input: 'next', previous_response_id: stored.id });
    expect(
      model.requests
        .at(-1)!
        .messages.slice(-3)
        .map((m) => m.content),
    ).toEqual(['keep me', 'echo: keep me', 'next']);
    expect(next).toMatchObject({ store: true });
  });

  it('background: true answers at once with the queued response; GET reads its result; with store: false it is 400', async () => {
    answer = (req) => ({ delayMs: 1500, text: echoLast(req) });
    const c = client();
    const started = Date.now();
    const queued = await c.responses.create({ model: 'hermes-agent', input: 'in the background', background: true });
    expect(Date.now() - started).toBeLessThan(1500);
    expect(queued).toMatchObject({ background: true, output: [] });
    expect(['queued', 'in_progress']).toContain(queued.status);
    const done = await waitFor(
      async () => {
        const r = await c.responses.retrieve(queued.id);
        return r.status === 'completed' ? r : undefined;
      },
      10_000,
      'the background response completed',
    );
    expect(done).toMatchObject({ background: true, output_text: 'echo: in the background' });
    const before = model.requests.length;
    const refused = await apiError(c.responses.create({ model: 'hermes-agent', input: 'x', background: true, store: false }));
    expect(refused).toMatchObject({ status: 400, param: 'background' });
    expect(refused.message).toMatch(/store: false/);
    expect(model.requests.length).toBe(before);
  });

  it('forwards temperature, top_p, max_output_tokens (as max_tokens), user, safety_identifier and text.format to the model', async () => {
    const before = model.requests.length;
    const res = await client().responses.create({
      model: 'hermes-agent',
      input: 'json please',
      temperature: 0.2,
      top_p: 0.9,
      max_output_tokens: 50,
      user: 'u-7',
      safety_identifier: 'hash-7',
      text: {
        format: { type: 'json_schema', name: 'answer', schema: { type: 'object', properties: { a: { type: 'string' } } }, strict: true },
      },
    });
    expect(model.requests[before]!.body).toMatchObject({
      temperature: 0.2,
      top_p: 0.9,
      max_tokens: 50,
      user: 'u-7',
      safety_identifier: 'hash-7',
      response_format: { type: 'json_schema', json_schema: { name: 'answer', strict: true, schema: { type: 'object' } } },
    });
    expect(res).toMatchObject({ user: 'u-7', safety_identifier: 'hash-7', temperature: 0.2, top_p: 0.9, max_output_tokens: 50 });
  });
});

describe('client parameters on /v1/chat/completions', () => {
  it('forwards temperature, top_p, max_tokens, max_completion_tokens, stop, seed, penalties, logit_bias, response_format, user and safety_identifier to every model call', async () => {
    const before = model.requests.length;
    await client().chat.completions.create({
      model: 'hermes-agent',
      messages: [{ role: 'user', content: 'hi' }],
      temperature: 0.1,
      top_p: 0.5,
      max_tokens: 40,
      stop: ['END'],
      seed: 7,
      presence_penalty: 0.5,
      frequency_penalty: -0.25,
      logit_bias: { '50256': -100 },
      response_format: { type: 'json_object' },
      user: 'alice',
      safety_identifier: 'hash-alice',
    });
    expect(model.requests[before]!.body).toMatchObject({
      temperature: 0.1,
      top_p: 0.5,
      max_tokens: 40,
      stop: ['END'],
      seed: 7,
      presence_penalty: 0.5,
      frequency_penalty: -0.25,
      logit_bias: { '50256': -100 },
      response_format: { type: 'json_object' },
      user: 'alice',
      safety_identifier: 'hash-alice',
    });
    await client().chat.completions.create({
      model: 'hermes-agent',
      messages: [{ role: 'user', content: 'hi' }],
      max_completion_tokens: 30,
    });
    expect(model.requests.at(-1)!.body).toMatchObject({ max_completion_tokens: 30 });
    expect(model.requests.at(-1)!.body).not.toHaveProperty('temperature');
    expect(model.requests.at(-1)!.body).not.toHaveProperty('presence_penalty');
  });

  it('a bad parameter value names the field, what was expected and what was sent', async () => {
    const cases: Array<[Record<string, unknown>, string, RegExp]> = [
      [{ temperature: 3 }, 'temperature', /expected number to be <=2, got number 3/],
      [{ temperature: 'hot' }, 'temperature', /expected number, got string "hot"/],
      [{ max_tokens: 0 }, 'max_tokens', />=1, got number 0/],
      [{ stop: 5 }, 'stop', /expected string or array, got number 5/],
      [{ response_format: { type: 'xml' } }, 'response_format.type', /expected "text" or "json_object" or "json_schema", got string "xml"/],
      [{ stream: 'yes' }, 'stream', /expected boolean, got string "yes"/],
      [
        { messages: [{ role: 'robot', content: 'hi' }] },
        'messages.0.role',
        /expected "system" or "developer" or "user" or "assistant", got string "robot"/,
      ],
      [
        { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] },
        'messages.0.content.0.type',
        /expected "text", got string "image_url"/,
      ],
    ];
    for (const [patch, param, message] of cases) {
      const res = await post('/v1/chat/completions', { model: 'hermes-agent', messages: [{ role: 'user', content: 'hi' }], ...patch });
      expect(res.status, param).toBe(400);
      const { error } = await readJson(res);
      expect(error, param).toMatchObject({ code: 'invalid_body', param });
      expect(error.message, param).toMatch(message);
      expect(error.message, param).toContain(param);
    }
  });
});

describe('the parameter table on both endpoints (gateway/http/v1/v1-param-table.ts)', () => {
  const bodyOf = (endpoint: V1Endpoint, fields: Record<string, unknown>) =>
    endpoint === 'chat'
      ? { model: 'hermes-agent', messages: [{ role: 'user', content: 'table' }], ...fields }
      : { model: 'hermes-agent', input: 'table', ...fields };
  const path = (endpoint: V1Endpoint) => (endpoint === 'chat' ? '/v1/chat/completions' : '/v1/responses');

  /** Values that ask for nothing, of fields refused or refused at other values: the near misses of the refusals. */
  const ASKS_NOTHING: Record<V1Endpoint, Record<string, unknown>> = {
    chat: { n: 1, logprobs: false, top_logprobs: 0, modalities: ['text'], tools: [], functions: [], audio: null, moderation: null },
    responses: { top_logprobs: 0, tools: [], prompt: null, conversation: null },
  };

  for (const endpoint of ['chat', 'responses'] as const) {
    it(`${endpoint}: every ignored field is accepted together, its value checked, and none reaches the model`, async () => {
      const before = model.requests.length;
      const res = await post(path(endpoint), bodyOf(endpoint, { ...IGNORED_SAMPLES[endpoint], ...ASKS_NOTHING[endpoint] }));
      expect(res.status, JSON.stringify(await res.clone().json())).toBe(200);
      expect(model.requests.length).toBe(before + 1);
      const sent = model.requests.at(-1)!.body;
      for (const field of Object.keys(IGNORED_SAMPLES[endpoint])) expect(sent, field).not.toHaveProperty(field);
      // The near miss: an ignored field's malformed value is a bad body, and changes nothing.
      const bad = await post(path(endpoint), bodyOf(endpoint, { service_tier: 7 }));
      expect(bad.status).toBe(400);
      expect((await readJson(bad)).error).toMatchObject({ code: 'invalid_body', param: 'service_tier' });
      expect(model.requests.length).toBe(before + 1);
    });

    it(`${endpoint}: every refused field and value is 400 naming the field and why; nothing reaches the model`, async () => {
      const before = model.requests.length;
      for (const [field, value] of Object.entries(REFUSED_SAMPLES[endpoint])) {
        const rule = ruleOf(endpoint, field)!;
        const refusal = rule.policy === 'refuse' ? { code: rule.code, why: rule.why } : rule.refused!;
        const res = await post(path(endpoint), bodyOf(endpoint, { [field]: value }));
        expect(res.status, field).toBe(400);
        const { error } = await readJson(res);
        expect(error, field).toMatchObject({ type: 'invalid_request_error', param: field, code: refusal.code ?? 'unsupported_parameter' });
        expect(error.message, field).toContain(`${field}`);
        expect(error.message, field).toContain(`is not accepted by ${V1_ENDPOINTS[endpoint]}: ${refusal.why}.`);
      }
      expect(model.requests.length).toBe(before);
    });
  }
});

describe('model names', () => {
  it('/v1/models lists hermes-agent, the primary model and the declared models', async () => {
    const list = await client().models.list();
    expect(list.data.map((m) => m.id)).toEqual(['hermes-agent', 'primary-model', 'cheap']);
  });

  it('a declared name runs on its model; hermes-agent and the primary id on the primary model; anything else is 404 model_not_found', async () => {
    const c = client();
    const cheap = await c.chat.completions.create({ model: 'cheap', messages: [{ role: 'user', content: 'a' }] });
    expect(cheap.model).toBe('cheap');
    expect(model.requests.at(-1)!.model).toBe('cheap-model-id');
    await c.chat.completions.create({ model: 'hermes-agent', messages: [{ role: 'user', content: 'b' }] });
    expect(model.requests.at(-1)!.model).toBe('primary-model');
    await c.responses.create({ model: 'cheap', input: 'c' });
    expect(model.requests.at(-1)!.model).toBe('cheap-model-id');
    const before = model.requests.length;
    for (const call of [
      () => c.chat.completions.create({ model: 'gpt-5', messages: [{ role: 'user', content: 'x' }] }),
      () => c.responses.create({ model: 'gpt-5', input: 'x' }),
    ]) {
      const err = await apiError(call());
      expect(err).toMatchObject({ status: 404, code: 'model_not_found', param: 'model' });
      expect(err.message).toMatch(/`gpt-5` does not exist.*`hermes-agent`, `primary-model`, `cheap`/);
    }
    expect((await post('/v1/runs', { model: 'gpt-5', input: 'x' })).status).toBe(404);
    expect(model.requests.length).toBe(before);
  });
});

describe('GET /v1/runs', () => {
  it('lists runs newest first, a page at a time', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await readJson(post('/v1/runs', { input: `listed ${i}` }))).id);
    await waitFor(
      async () => {
        const all = await Promise.all(ids.map((id) => readJson(get(`/v1/runs/${id}`))));
        return all.every((r) => r.status === 'completed');
      },
      10_000,
      'runs completed',
    );
    const first = await readJson(get('/v1/runs?limit=2'));
    expect(first).toMatchObject({ object: 'list', has_more: true });
    expect(first.data.map((r: { id: string }) => r.id)).toEqual([ids[4], ids[3]]);
    expect(first.first_id).toBe(ids[4]);
    expect(first.last_id).toBe(ids[3]);
    const second = await readJson(get(`/v1/runs?limit=2&after=${first.last_id}`));
    expect(second.data.map((r: { id: string }) => r.id)).toEqual([ids[2], ids[1]]);
    expect(second.data[0]).toMatchObject({ object: 'run', status: 'completed', output: 'echo: listed 2', finish_reason: 'stop' });
    const bad = await get('/v1/runs?limit=500');
    expect(bad.status).toBe(400);
    expect((await readJson(bad)).error).toMatchObject({
      param: 'limit',
      message: expect.stringMatching(/expected number to be <=100, got string "500"/),
    });
    const cursor = await get('/v1/runs?after=run_ffffffffffffffffffffffff');
    expect((await readJson(cursor)).error).toMatchObject({ param: 'after', code: 'invalid_cursor' });
  });

  it('a deleted response leaves the list', async () => {
    const res = await client().responses.create({ model: 'hermes-agent', input: 'gone soon' });
    const runId = `run_${res.id.slice(5)}`;
    expect((await readJson(get('/v1/runs?limit=5'))).data.map((r: { id: string }) => r.id)).toContain(runId);
    await client().responses.delete(res.id);
    expect((await readJson(get('/v1/runs?limit=5'))).data.map((r: { id: string }) => r.id)).not.toContain(runId);
  });
});

describe("the agent's tools stay the operator's", () => {
  it("the caller's tools are refused on both endpoints, an empty list is accepted", async () => {
    const c = client();
    const err = await apiError(
      c.chat.completions.create({
        model: 'hermes-agent',
        messages: [{ role: 'user', content: 'x' }],
        tools: [{ type: 'function', function: { name: 'f', parameters: {} } }],
      }),
    );
    expect(err).toMatchObject({ status: 400, code: 'client_tools_not_allowed', param: 'tools' });
    const ok = await c.responses.create({ model: 'hermes-agent', input: 'fine', tools: [] });
    expect(ok.output_text).toBe('echo: fine');
    expect(lastUserText(model.requests.at(-1)!)).toBe('fine');
  });
});
