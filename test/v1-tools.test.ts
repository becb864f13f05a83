/**
 * `/v1/chat/completions` with the agent's tools and real token streaming, end
 * to end: real express over loopback, real BullMQ `v1-runs` queue and worker,
 * the real `openai` client on both sides (the worker's, and the caller's here),
 * the local model server scripting tool calls and streamed deltas.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../scheduler/logger.ts';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { lastToolResult, startFakeOpenAI, type FakeOpenAI, type RecordedRequest, type ScriptedReply } from './support/fake-openai.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { parseSse, readJson } from './support/http.ts';
import { startV1Worker, type TestV1Worker } from './support/v1-worker.ts';

const KEY = 'test-key-0123456789';

let model: FakeOpenAI;
let env: TestEnv;
let gw: Gateway;
let worker: TestV1Worker;
let root: string;
let answer: (req: RecordedRequest) => ScriptedReply = () => 'ok';

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'hermes-v1-tools-'));
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

function post(body: unknown): Promise<Response> {
  return fetch(`${gw.httpAddress.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/** A model that reads the file the user names with read_file, then answers with what it saw. */
const readThenAnswer = (req: RecordedRequest): ScriptedReply => {
  const result = lastToolResult(req);
  if (result !== undefined) return `The file says: ${result}`;
  const path = /read (\S+)/.exec(req.messages.at(-1)!.content)?.[1] ?? '';
  return { toolCalls: [{ name: 'read_file', arguments: { path } }] };
};

describe("/v1 agent turns with the operator's tools", () => {
  it("read_file on a file under the root: the reply holds the file's content; the run's events carry the call", async () => {
    answer = readThenAnswer;
    const res = await client()
      .chat.completions.create({ model: 'hermes-agent', messages: [{ role: 'user', content: 'read release.txt' }] })
      .withResponse();
    expect(res.data.choices[0]!.message.content).toBe('The file says: release 4.2 shipped on Tuesday');
    const runId = res.response.headers.get('x-hermes-run-id')!;
    const events = parseSse(
      await (await fetch(`${gw.httpAddress.url}/v1/runs/${runId}/events`, { headers: { authorization: `Bearer ${KEY}` } })).text(),
    );
    const types = events.map((e) => e.event);
    expect(types).toEqual(['run.queued', 'run.started', 'tool.called', 'tool.result', 'run.completed']);
    expect(JSON.parse(events[3]!.data)).toMatchObject({ name: 'read_file', bytes: 30 });
  });

  it('a path outside the roots is refused: the model sees the refusal, nothing is read', async () => {
    answer = readThenAnswer;
    const res = await client().chat.completions.create({
      model: 'hermes-agent',
      messages: [{ role: 'user', content: 'read /etc/passwd' }],
    });
    expect(res.choices[0]!.message.content).toBe('The file says: Error: Refused: /etc/passwd is outside the folders this agent may read.');
  });

  it('client-supplied tools are refused with 400 and a clear message; nothing reaches the model', async () => {
    const before = model.requests.length;
    for (const extra of [
      { tools: [{ type: 'function', function: { name: 'shell', parameters: { type: 'object', properties: {} } } }] },
      { functions: [{ name: 'shell', parameters: {} }] },
      { tool_choice: { type: 'function', function: { name: 'shell' } } },
      { function_call: { name: 'shell' } },
    ]) {
      const res = await post({ messages: [{ role: 'user', content: 'run shell' }], ...extra });
      expect(res.status).toBe(400);
      const body = await readJson(res);
      expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'client_tools_not_allowed', param: Object.keys(extra)[0] });
      expect(body.error.message).toMatch(/the agent's tools are declared by the operator in the config, never by a request/);
    }
    expect(model.requests.length).toBe(before);
  });

  it('schedule_status in a /v1 turn (no session): says so for loop, heartbeat and goal, and lists no cron job (no chat, so none is in its scope)', async () => {
    answer = (req) => (lastToolResult(req) === undefined ? { toolCalls: [{ name: 'schedule_status' }] } : `status: ${lastToolResult(req)}`);
    const res = await client().chat.completions.create({
      model: 'hermes-agent',
      messages: [{ role: 'user', content: 'what is scheduled?' }],
    });
    expect(res.choices[0]!.message.content).toBe(
      [
        'status: Loop: none (this turn belongs to no session)',
        'Heartbeat: none (this turn belongs to no session)',
        'Goal: none (this turn belongs to no session)',
        'Cron jobs of this chat (0):',
        '- none',
      ].join('\n'),
    );
  });

  it("an empty tools list declares nothing and is accepted: the turn has the operator's tools only", async () => {
    answer = () => 'plain answer';
    const res = await post({ messages: [{ role: 'user', content: 'hi' }], tools: [] });
    expect(res.status).toBe(200);
    expect((await readJson(res)).choices[0].message.content).toBe('plain answer');
    expect(model.requests.at(-1)!.tools.sort()).toEqual(['list_dir', 'read_file', 'schedule_status']);
  });

  it("a request that names an undeclared tool runs nothing: the model's call of it is refused", async () => {
    const pwned = join(root, 'pwned');
    answer = (req) =>
      lastToolResult(req) === undefined
        ? { toolCalls: [{ name: 'shell', arguments: { command: `touch ${pwned}` } }] }
        : `result: ${lastToolResult(req)}`;
    const res = await client().chat.completions.create({
      model: 'hermes-agent',
      messages: [{ role: 'user', content: `use your shell tool: touch ${pwned}` }],
    });
    expect(res.choices[0]!.message.content).toBe('result: Error: Unknown tool "shell": only the tools listed for this turn exist.');
    expect(model.requests.at(-1)!.tools.sort()).toEqual(['list_dir', 'read_file', 'schedule_status']);
    const { existsSync } = await import('node:fs');
    expect(existsSync(pwned)).toBe(false);
  });

  it('n > 1 is refused with 400 (one agent, one answer)', async () => {
    const res = await post({ messages: [{ role: 'user', content: 'hi' }], n: 2 });
    expect(res.status).toBe(400);
    expect((await readJson(res)).error).toMatchObject({ code: 'unsupported_n', param: 'n' });
  });
});

describe('/v1 streaming', () => {
  it('delivers more than one content chunk for a multi-word reply, in order, as the model writes them, then [DONE]', async () => {
    answer = () => ({ text: 'the build on main is green now', wordDelayMs: 150 });
    const stream = await client().chat.completions.create({
      model: 'hermes-agent',
      messages: [{ role: 'user', content: 'status?' }],
      stream: true,
    });
    const pieces: Array<{ text: string; at: number }> = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      if (c?.delta.content) pieces.push({ text: c.delta.content, at: Date.now() });
      if (c?.finish_reason) finish = c.finish_reason;
    }
    expect(pieces.length).toBeGreaterThan(1);
    expect(pieces.map((p) => p.text).join('')).toBe('the build on main is green now');
    expect(finish).toBe('stop');
    // real streaming: the first words reached the caller before the model had written its last one
    const req = model.requests.at(-1)!;
    expect(req.stream).toBe(true);
    expect(pieces[0]!.at).toBeLessThan(req.streamEndedAt!);
  });

  it('ends with [DONE]; stream_options.include_usage adds a usage chunk with empty choices', async () => {
    answer = () => 'two words';
    const res = await post({ messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } });
    const frames = parseSse(await res.text());
    expect(frames.at(-1)!.data).toBe('[DONE]');
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f.data));
    expect(chunks.at(-1)).toMatchObject({
      object: 'chat.completion.chunk',
      choices: [],
      usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
    });
    expect(chunks.at(-2).choices[0].finish_reason).toBe('stop');
    expect(chunks.filter((c) => c.choices[0]?.delta.content).map((c) => c.choices[0].delta.content)).toEqual(['two ', 'words']);
    const plain = parseSse(await (await post({ messages: [{ role: 'user', content: 'hi' }], stream: true })).text());
    expect(plain.slice(0, -1).every((f) => JSON.parse(f.data).usage === undefined)).toBe(true);
  });

  it('a streamed turn calls tools too: the tool call streams in pieces, the answer streams after it', async () => {
    answer = (req) =>
      lastToolResult(req) === undefined
        ? { toolCalls: [{ name: 'read_file', arguments: { path: 'release.txt' } }] }
        : `It says ${lastToolResult(req)}`;
    const stream = await client().chat.completions.create({
      model: 'hermes-agent',
      messages: [{ role: 'user', content: 'what shipped?' }],
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('It says release 4.2 shipped on Tuesday');
  });

  it('a model error mid-stream is an error chunk, then [DONE]', async () => {
    answer = () => ({ status: 500, message: 'model exploded' });
    const res = await post({ messages: [{ role: 'user', content: 'hi' }], stream: true });
    const frames = parseSse(await res.text());
    expect(frames.at(-1)!.data).toBe('[DONE]');
    expect(JSON.parse(frames.at(-2)!.data).error).toMatchObject({ code: 'model_error', message: expect.stringMatching(/500/) });
  });
});
