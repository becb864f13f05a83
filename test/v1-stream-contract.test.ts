/**
 * Field reports F23, F24 and F25 (round 3) through `/v1`, end to end: real express over loopback,
 * real BullMQ queue and worker, the official `openai` client on both sides, the local model server
 * answering the way the reported upstreams did.
 *
 * - F23: the usage contract of streamed chunks (`usage: null` on every chunk before the last, the
 *   last one `choices: []` with the usage; nothing of it without `stream_options`).
 * - F24: the upstream's `finish_reason` (`length`, `content_filter`) reaches the caller, streamed
 *   or not, on Chat Completions and the Responses API; `max_tokens` reaches the model.
 * - F25: streamed tool-call deltas without `index`, or with id and name repeated on the last
 *   delta, give exactly one call; a stream that cannot be assembled fails the turn.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../scheduler/logger.ts';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import {
  echoLast,
  lastToolResult,
  startFakeOpenAI,
  type FakeOpenAI,
  type RecordedRequest,
  type ScriptedReply,
} from './support/fake-openai.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { parseSse } from './support/http.ts';
import { startV1Worker, type TestV1Worker } from './support/v1-worker.ts';

const KEY = 'test-key-0123456789';

let model: FakeOpenAI;
let env: TestEnv;
let gw: Gateway;
let worker: TestV1Worker;
let root: string;
let answer: (req: RecordedRequest) => ScriptedReply = (req) => echoLast(req);

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'hermes-v1-stream-'));
  writeFileSync(join(root, 'release.txt'), 'release 4.2 shipped on Tuesday');
  model = await startFakeOpenAI();
  model.respond((req) => answer(req));
  env = testEnv({
    'agent.base_url': model.baseUrl,
    'agent.api_key': 'model-key',
    'api_server.port': 0,
    'api_server.key': KEY,
    'tools.files.roots': [root],
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
  rmSync(root, { recursive: true, force: true });
});

function client(): OpenAI {
  return new OpenAI({ baseURL: `${gw.httpAddress.url}/v1`, apiKey: KEY, maxRetries: 0 });
}

function post(path: string, body: unknown): Promise<Response> {
  return fetch(`${gw.httpAddress.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/** The JSON chunks of a streamed chat completion, and whether it ended with `[DONE]`. */
async function chunksOf(res: Response): Promise<{ chunks: Array<Record<string, any>>; done: boolean }> {
  const frames = parseSse(await res.text());
  const done = frames.at(-1)?.data === '[DONE]';
  return { chunks: frames.filter((f) => f.data !== '[DONE]').map((f) => JSON.parse(f.data)), done };
}

async function runEvents(runId: string): Promise<Array<{ event?: string; data: any }>> {
  const res = await fetch(`${gw.httpAddress.url}/v1/runs/${runId}/events`, { headers: { authorization: `Bearer ${KEY}` } });
  return parseSse(await res.text()).map((f) => ({ event: f.event, data: JSON.parse(f.data) }));
}

describe('F23: the usage contract of streamed chunks', () => {
  it('with stream_options.include_usage every chunk before the last has "usage": null; the last before [DONE] has choices: [] and the usage', async () => {
    answer = () => ({ text: 'three little words', wordDelayMs: 5 });
    const res = await post('/v1/chat/completions', {
      model: 'hermes-agent',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const { chunks, done } = await chunksOf(res);
    expect(done).toBe(true);
    const last = chunks.at(-1)!;
    expect(last).toMatchObject({
      object: 'chat.completion.chunk',
      choices: [],
      usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
    });
    const before = chunks.slice(0, -1);
    expect(before.length).toBeGreaterThanOrEqual(4); // role, deltas, finish
    for (const c of before) {
      expect(c).toHaveProperty('usage', null);
      expect(c.choices).toHaveLength(1);
    }
    expect(before.map((c) => c.choices[0].delta.content ?? '').join('')).toBe('three little words');
    expect(before.at(-1)!.choices[0].finish_reason).toBe('stop');
  });

  it('the official client reads chunk.usage and chunk.choices[0] on every chunk without breaking', async () => {
    const stream = await client().chat.completions.create({
      model: 'hermes-agent',
      messages: [{ role: 'user', content: 'usage please' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    const usages: unknown[] = [];
    for await (const chunk of stream) {
      usages.push(chunk.usage);
      if (chunk.choices.length > 0) text += chunk.choices[0]!.delta.content ?? '';
    }
    expect(text).toBe('echo: usage please');
    expect(usages.slice(0, -1).every((u) => u === null)).toBe(true);
    expect(usages.at(-1)).toMatchObject({ total_tokens: 10 });
  });

  it('without stream_options no chunk has empty choices and none carries usage', async () => {
    const { chunks } = await chunksOf(
      await post('/v1/chat/completions', { model: 'hermes-agent', messages: [{ role: 'user', content: 'plain' }], stream: true }),
    );
    expect(chunks.length).toBeGreaterThanOrEqual(3);
    for (const c of chunks) {
      expect(c.choices).toHaveLength(1);
      expect(c).not.toHaveProperty('usage');
    }
  });
});

describe('F24: the upstream finish_reason reaches the caller', () => {
  const long = 'one two three four five six seven eight';

  it('max_tokens: 3 reaches the model, which stops with "length": the non-streamed answer says "length"', async () => {
    answer = () => long;
    const before = model.requests.length;
    const res = await client().chat.completions.create({
      model: 'hermes-agent',
      messages: [{ role: 'user', content: 'count' }],
      max_tokens: 3,
    });
    expect(model.requests[before]!.body.max_tokens).toBe(3);
    expect(res.choices[0]!.finish_reason).toBe('length');
    expect(res.choices[0]!.message.content).toBe('one two three');
  });

  it('streamed: the finish chunk says "length"', async () => {
    answer = () => long;
    const stream = await client().chat.completions.create({
      model: 'hermes-agent',
      messages: [{ role: 'user', content: 'count' }],
      max_tokens: 3,
      stream: true,
    });
    let text = '';
    const finishes: string[] = [];
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.choices[0]?.finish_reason) finishes.push(chunk.choices[0].finish_reason);
    }
    expect(model.requests.at(-1)!.body.max_tokens).toBe(3);
    expect(model.requests.at(-1)!.stream).toBe(true);
    expect(text).toBe('one two three');
    expect(finishes).toEqual(['length']);
  });

  it('content_filter too, in both forms; GET /v1/runs/:id keeps it', async () => {
    answer = () => ({ text: 'I cannot', finishReason: 'content_filter' });
    const plain = await client()
      .chat.completions.create({ model: 'hermes-agent', messages: [{ role: 'user', content: 'x' }] })
      .withResponse();
    expect(plain.data.choices[0]!.finish_reason).toBe('content_filter');
    const run = (await (
      await fetch(`${gw.httpAddress.url}/v1/runs/${plain.response.headers.get('x-hermes-run-id')}`, {
        headers: { authorization: `Bearer ${KEY}` },
      })
    ).json()) as { finish_reason: string };
    expect(run.finish_reason).toBe('content_filter');
    const { chunks } = await chunksOf(
      await post('/v1/chat/completions', { model: 'hermes-agent', messages: [{ role: 'user', content: 'x' }], stream: true }),
    );
    expect(chunks.at(-1)!.choices[0].finish_reason).toBe('content_filter');
  });

  it('the Responses API says incomplete (max_output_tokens), streamed and not', async () => {
    answer = () => long;
    const res = await client().responses.create({ model: 'hermes-agent', input: 'count', max_output_tokens: 3 });
    expect(model.requests.at(-1)!.body.max_tokens).toBe(3);
    expect(res).toMatchObject({
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
      output: [{ status: 'incomplete' }],
    });
    expect(res.output_text).toBe('one two three');
    const stream = await client().responses.create({ model: 'hermes-agent', input: 'count', max_output_tokens: 3, stream: true });
    const types: string[] = [];
    let last: any;
    for await (const e of stream) {
      types.push(e.type);
      last = e;
    }
    expect(types.at(-1)).toBe('response.incomplete');
    expect(last.response).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
  });
});

describe('F25: streamed tool-call deltas assembled like the OpenAI SDKs', () => {
  /** Read the file with one call whose deltas are split `style`, then answer with what the tool returned. */
  const readWith =
    (style: 'no-index' | 'repeat-last' | 'nameless') =>
    (req: RecordedRequest): ScriptedReply => {
      const result = lastToolResult(req);
      if (result !== undefined) return `The file says: ${result}`;
      return { toolCalls: [{ name: 'read_file', arguments: { path: 'release.txt' } }], toolCallDeltas: style };
    };

  for (const style of ['no-index', 'repeat-last'] as const) {
    it(`deltas ${style === 'no-index' ? 'without index (arguments in two fragments)' : 'with id and name repeated on the last delta'} → exactly one call with the joined arguments; the answer uses its result`, async () => {
      answer = readWith(style);
      const before = model.requests.length;
      const res = await post('/v1/chat/completions', {
        model: 'hermes-agent',
        messages: [{ role: 'user', content: 'read release.txt' }],
        stream: true,
      });
      const runId = res.headers.get('x-hermes-run-id')!;
      const { chunks } = await chunksOf(res);
      expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('The file says: release 4.2 shipped on Tuesday');
      expect(chunks.at(-1)!.choices[0].finish_reason).toBe('stop');
      const events = await runEvents(runId);
      const called = events.filter((e) => e.event === 'tool.called');
      expect(called).toHaveLength(1);
      expect(called[0]!.data).toMatchObject({ name: 'read_file', arguments: '{"path":"release.txt"}' });
      expect(events.filter((e) => e.event === 'tool.result')).toHaveLength(1);
      // The model saw one call and its one result.
      const second = model.requests[before + 1]!;
      expect(second.messages.filter((m) => m.role === 'tool')).toHaveLength(1);
      expect(second.messages.find((m) => m.tool_calls)!.tool_calls).toEqual([
        expect.objectContaining({ function: { name: 'read_file', arguments: '{"path":"release.txt"}' } }),
      ]);
    });
  }

  it('a stream that cannot be assembled (no function name) fails the turn: an error, never an empty "completed"', async () => {
    answer = readWith('nameless');
    const res = await post('/v1/chat/completions', {
      model: 'hermes-agent',
      messages: [{ role: 'user', content: 'read release.txt' }],
      stream: true,
    });
    const runId = res.headers.get('x-hermes-run-id')!;
    const frames = parseSse(await res.text());
    expect(frames.at(-1)!.data).toBe('[DONE]');
    const error = JSON.parse(frames.at(-2)!.data);
    expect(error.error).toMatchObject({
      code: 'model_error',
      message: expect.stringMatching(/streamed answer could not be assembled: tool call 1 of 1 has no function name/),
    });
    const events = await runEvents(runId);
    expect(events.map((e) => e.event)).not.toContain('run.completed');
    expect(events.at(-1)!.event).toBe('run.failed');
    expect(events.map((e) => e.event)).not.toContain('tool.called');
  });
});
