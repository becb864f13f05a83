/**
 * The OpenAI-compatible `/v1` API of the gateway (docs/DESIGN.md §8, §11), end to end:
 * real express over loopback, real BullMQ `v1-runs` queue and worker
 * (`processV1Run`), real `openai` client, a local model server.
 */
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../scheduler/logger.ts';
import { ConfigError } from '../scheduler/errors/config-error.ts';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { echoLast, startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { readJson, parseSse, readSseUntil } from './support/http.ts';
import { waitForRunStatus } from './support/wait-for.ts';
import { startV1Worker, type TestV1Worker } from './support/v1-worker.ts';

const KEY = 'test-key-0123456789';

let model: FakeOpenAI;
/** How long the model takes to answer, ms. */
let delayMs = 0;
let env: TestEnv;
let gw: Gateway;
let worker: TestV1Worker;

function url(path: string): string {
  return `${gw.httpAddress.url}${path}`;
}

function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url(path), {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

function get(path: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url(path), { headers: { authorization: `Bearer ${KEY}`, ...headers } });
}

beforeAll(async () => {
  model = await startFakeOpenAI();
  model.respond((req) => ({ delayMs, text: echoLast(req) }));
  env = testEnv({
    'agent.base_url': model.baseUrl,
    'agent.api_key': 'model-key',
    'api_server.port': 0,
    'api_server.key': KEY,
  });
  gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }) });
  worker = await startV1Worker(env);
});

afterEach(() => {
  delayMs = 0;
});

afterAll(async () => {
  await gw?.close();
  await worker?.close();
  await model?.close();
  env?.cleanup();
});

describe('/v1 auth (docs/DESIGN.md §8)', () => {
  it('refuses a request without a key with 401 and an OpenAI-style error', async () => {
    const res = await fetch(url('/v1/models'));
    expect(res.status).toBe(401);
    const body = await readJson(res);
    expect(body).toEqual({
      error: { message: expect.stringMatching(/Missing API key/), type: 'authentication_error', param: null, code: 'missing_api_key' },
    });
  });

  it('refuses a wrong key with 401', async () => {
    const res = await fetch(url('/v1/models'), { headers: { authorization: 'Bearer wrong-key' } });
    expect(res.status).toBe(401);
    expect((await readJson(res)).error.code).toBe('invalid_api_key');
    const prefix = await fetch(url('/v1/models'), { headers: { authorization: `Bearer ${KEY.slice(0, -1)}` } });
    expect(prefix.status).toBe(401);
  });

  it('accepts the right key', async () => {
    const res = await get('/v1/models');
    expect(res.status).toBe(200);
    const body = await readJson(res);
    expect(body.object).toBe('list');
    expect(body.data.map((m: { id: string }) => m.id)).toContain('hermes-agent');
  });

  it('keeps /health open', async () => {
    const res = await fetch(url('/health'));
    expect(res.status).toBe(200);
    expect((await readJson(res)).status).toBe('ok');
  });

  it('refuses to bind a non-loopback address without a key (api_server.insecure_no_auth)', async () => {
    const open = testEnv({ 'api_server.host': '0.0.0.0', 'api_server.port': 0, 'api_server.insecure_no_auth': true });
    try {
      await expect(startGateway({ config: open.config, redisUrl: open.redisUrl, log: createLogger({ level: 'silent' }) })).rejects.toThrow(
        ConfigError,
      );
      await expect(startGateway({ config: open.config, redisUrl: open.redisUrl, log: createLogger({ level: 'silent' }) })).rejects.toThrow(
        /Refusing to bind the API server to 0\.0\.0\.0 without a key/,
      );
    } finally {
      open.cleanup();
    }
  });
});

describe('POST /v1/chat/completions', () => {
  it('runs the request as a worker turn and answers a chat.completion', async () => {
    const before = model.requests.length;
    const res = await post('/v1/chat/completions', { model: 'hermes-agent', messages: [{ role: 'user', content: 'hello there' }] });
    expect(res.status).toBe(200);
    const body = await readJson(res);
    expect(body).toMatchObject({
      object: 'chat.completion',
      model: 'hermes-agent',
      choices: [{ index: 0, message: { role: 'assistant', content: 'echo: hello there' }, finish_reason: 'stop' }],
      usage: { total_tokens: 10 },
    });
    expect(res.headers.get('x-hermes-run-id')).toMatch(/^run_[0-9a-f]{24}$/);
    expect(model.requests.length).toBe(before + 1);
    expect(model.requests.at(-1)!.messages.at(-1)).toEqual({ role: 'user', content: 'hello there' });
  });

  it('works with the official openai client, also with stream: true', async () => {
    const client = new OpenAI({ baseURL: `${gw.httpAddress.url}/v1`, apiKey: KEY, maxRetries: 0 });
    const done = await client.chat.completions.create({ model: 'hermes-agent', messages: [{ role: 'user', content: 'ping' }] });
    expect(done.choices[0]!.message.content).toBe('echo: ping');

    const stream = await client.chat.completions.create({
      model: 'hermes-agent',
      messages: [{ role: 'user', content: 'stream me' }],
      stream: true,
    });
    let text = '';
    const finishes: Array<string | null> = [];
    for await (const chunk of stream) {
      expect(chunk.object).toBe('chat.completion.chunk');
      text += chunk.choices[0]?.delta.content ?? '';
      finishes.push(chunk.choices[0]?.finish_reason ?? null);
    }
    expect(text).toBe('echo: stream me');
    expect(finishes.at(-1)).toBe('stop');
  });

  it('streams SSE frames: the role chunk at once, then content, stop and [DONE]', async () => {
    delayMs = 1200;
    const started = Date.now();
    const res = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'slow' }], stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const firstFrames = await readSseUntil(res, () => true);
    expect(Date.now() - started).toBeLessThan(800);
    delayMs = 300;
    expect(JSON.parse(firstFrames[0]!.data).choices[0].delta).toEqual({ role: 'assistant', content: '' });

    const res2 = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'slow' }], stream: true });
    const frames = parseSse(await res2.text());
    expect(frames.at(-1)!.data).toBe('[DONE]');
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f.data));
    expect(chunks.map((c) => c.choices[0].delta.content ?? '').join('')).toBe('echo: slow');
    expect(chunks.at(-1).choices[0].finish_reason).toBe('stop');
  });

  it.each([
    ['malformed JSON', '{"messages": [', 'invalid_json', null],
    ['no messages', { model: 'x' }, 'invalid_body', 'messages'],
    ['an empty message list', { messages: [] }, 'invalid_body', 'messages'],
    ['a bad role', { messages: [{ role: 'robot', content: 'hi' }] }, 'invalid_body', 'messages.0.role'],
    ['stream that is not a boolean', { messages: [{ role: 'user', content: 'hi' }], stream: 'yes' }, 'invalid_body', 'stream'],
  ])('answers 400 with an OpenAI error object for %s', async (_name, input, code, param) => {
    const before = model.requests.length;
    const res = await post('/v1/chat/completions', input);
    expect(res.status).toBe(400);
    const json = await readJson(res);
    expect(json.error).toMatchObject({ type: 'invalid_request_error', code, param });
    expect(typeof json.error.message).toBe('string');
    expect(model.requests.length).toBe(before);
  });

  it('rejects a message over agent.max_prompt_chars', async () => {
    const res = await post('/v1/chat/completions', {
      messages: [{ role: 'user', content: 'x'.repeat(env.config.agent.max_prompt_chars + 1) }],
    });
    expect(res.status).toBe(400);
    expect((await readJson(res)).error).toMatchObject({ code: 'prompt_too_long', param: 'messages.0.content' });
  });
});

describe('/v1/runs', () => {
  it('returns a run id at once; events (SSE) and GET follow it to completion', async () => {
    delayMs = 200;
    const res = await post('/v1/runs', { input: 'count the queue' });
    expect(res.status).toBe(202);
    const run = await readJson(res);
    expect(run).toMatchObject({ object: 'run', status: 'queued', output: null });

    const controller = new AbortController();
    const events = await get(`/v1/runs/${run.id}/events`).then((r) => readSseUntil(r, (f) => f.event === 'run.completed', controller));
    expect(events.map((e) => e.event)).toEqual(['run.queued', 'run.started', 'run.completed']);
    expect(JSON.parse(events.at(-1)!.data).output).toBe('echo: count the queue');

    const final = await readJson(get(`/v1/runs/${run.id}`));
    expect(final).toMatchObject({ id: run.id, status: 'completed', output: 'echo: count the queue', error: null });

    // Last-Event-ID resumes after the given event
    const resumed = parseSse(await (await get(`/v1/runs/${run.id}/events`, { 'last-event-id': events[0]!.id! })).text());
    expect(resumed.map((e) => e.event)).toEqual(['run.started', 'run.completed']);
  });

  it('answers 404 for an unknown run', async () => {
    const res = await get('/v1/runs/run_000000000000000000000000');
    expect(res.status).toBe(404);
    expect((await readJson(res)).error.type).toBe('not_found_error');
  });

  it('Idempotency-Key replays the same run; a different payload under the key is 409', async () => {
    const key = `idem-${Date.now()}`;
    const before = model.requests.length;
    const a = await post('/v1/runs', { input: 'only once' }, { 'idempotency-key': key });
    const b = await post('/v1/runs', { input: 'only once' }, { 'idempotency-key': key });
    expect(a.status).toBe(202);
    expect(b.status).toBe(200);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    const runA = await readJson(a);
    const runB = await readJson(b);
    expect(runB.id).toBe(runA.id);
    await waitForRunStatus(() => readJson(get(`/v1/runs/${runA.id}`)), 'completed', 5000);
    expect(model.requests.length).toBe(before + 1);

    const c = await post('/v1/runs', { input: 'something else' }, { 'idempotency-key': key });
    expect(c.status).toBe(409);
    expect((await readJson(c)).error).toMatchObject({ type: 'conflict_error', code: 'idempotency_key_reused' });
    expect(model.requests.length).toBe(before + 1);
  });

  it('Idempotency-Key on chat completions replays the same answer without a second model call', async () => {
    const key = `idem-chat-${Date.now()}`;
    const body = { messages: [{ role: 'user', content: 'once please' }] };
    const before = model.requests.length;
    const first = await post('/v1/chat/completions', body, { 'idempotency-key': key });
    const second = await post('/v1/chat/completions', body, { 'idempotency-key': key });
    expect(second.headers.get('x-hermes-run-id')).toBe(first.headers.get('x-hermes-run-id'));
    expect((await readJson(second)).choices[0].message.content).toBe((await readJson(first)).choices[0].message.content);
    expect(model.requests.length).toBe(before + 1);
  });

  it('POST /v1/runs/:id/stop cancels a running run', async () => {
    delayMs = 3000;
    const run = await readJson(post('/v1/runs', { input: 'long task' }));
    await waitForRunStatus(() => readJson(get(`/v1/runs/${run.id}`)), 'running', 5000);
    const stop = await post(`/v1/runs/${run.id}/stop`, {});
    expect(stop.status).toBe(202);
    const started = Date.now();
    const final = await waitForRunStatus(() => readJson(get(`/v1/runs/${run.id}`)), 'cancelled', 2500);
    expect(Date.now() - started).toBeLessThan(1500);
    expect(final.error.code).toBe('run_cancelled');
  });

  it('a queued run that is stopped never reaches the model', async () => {
    await worker.worker.pause();
    try {
      const before = model.requests.length;
      const run = await readJson(post('/v1/runs', { input: 'never' }));
      const stop = await post(`/v1/runs/${run.id}/stop`, {});
      expect(stop.status).toBe(200);
      expect((await readJson(stop)).status).toBe('cancelled');
      await worker.worker.resume();
      await new Promise((r) => setTimeout(r, 300));
      expect(model.requests.length).toBe(before);
      expect((await readJson(get(`/v1/runs/${run.id}`))).status).toBe('cancelled');
    } finally {
      await worker.worker.resume();
    }
  });
});
