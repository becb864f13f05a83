/**
 * The official `openai` clients against the gateway over loopback: the JS client (always) and the
 * Python client (`.ci/run` installs it into `.ci/venv`; `HERMES_TEST_PYTHON` names another
 * interpreter) drive chat, streaming with usage, the Responses API plain, continued and streamed,
 * errors, and the refusal of the caller's tools; `store: false` and the fields clients send that
 * change nothing here answer 200, and every field the Python client declares is in the parameter
 * table. Real express, real BullMQ queue and worker, the local model server behind them.
 *
 * The Python part runs whenever a Python with `openai` is found; a venv or interpreter that was
 * set up for it but cannot import `openai` fails the test rather than skipping it. Only a machine
 * without any such Python (pip could not reach an index) skips it, and says so.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../scheduler/logger.ts';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { echoLast, lastUserText, startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { ROOT } from './support/stack.ts';
import { startV1Worker, type TestV1Worker } from './support/v1-worker.ts';
import { ruleOf } from '../gateway/http/v1/v1-param-table.ts';

const KEY = 'test-key-0123456789';

let model: FakeOpenAI;
let env: TestEnv;
let gw: Gateway;
let worker: TestV1Worker;

beforeAll(async () => {
  model = await startFakeOpenAI();
  // Word by word, so streams carry several deltas; a message that says FAIL meets a failing upstream.
  model.respond((req) =>
    lastUserText(req) === 'FAIL' ? { status: 500, message: 'upstream exploded' } : { text: echoLast(req), wordDelayMs: 2 },
  );
  env = testEnv({ 'agent.base_url': model.baseUrl, 'agent.api_key': 'model-key', 'api_server.port': 0, 'api_server.key': KEY });
  gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }) });
  worker = await startV1Worker(env);
});

afterAll(async () => {
  await gw?.close();
  await worker?.close();
  await model?.close();
  env?.cleanup();
});

/**
 * A Python that imports `openai`: `HERMES_TEST_PYTHON`, then `.ci/venv`, then `python3`.
 * @returns undefined when there is none; throws when one set up for this test cannot import it
 */
function pythonWithOpenAI(): { python: string; version: string } | undefined {
  const venv = join(ROOT, '.ci', 'venv', 'bin', 'python');
  const configured = process.env.HERMES_TEST_PYTHON || (existsSync(venv) ? venv : undefined);
  for (const python of configured ? [configured] : ['python3']) {
    try {
      const version = execFileSync(python, ['-c', 'import openai; print(openai.__version__)'], {
        encoding: 'utf8',
        // Importing openai (pydantic, httpx) is a few CPU-seconds: beside two other copies of the suite 30 s ran out.
        timeout: 120_000,
      }).trim();
      return { python, version };
    } catch (err) {
      if (configured)
        throw new Error(`${python} was set up for the real-client test but cannot import openai: ${(err as Error).message}`, {
          cause: err,
        });
    }
  }
  return undefined;
}

const python = pythonWithOpenAI();
if (!python)
  console.warn(
    'v1-real-clients: no Python with the openai package (pip could not reach an index); the Python client part is skipped, the JS client part runs',
  );

function runPython(script: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(python!.python, [script], {
      env: { ...process.env, HERMES_BASE_URL: `${gw.httpAddress.url}/v1`, HERMES_API_KEY: KEY },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const RESPONSE_STREAM = [
  'response.created',
  'response.in_progress',
  'response.output_item.added',
  'response.content_part.added',
  'response.output_text.delta',
  'response.output_text.done',
  'response.content_part.done',
  'response.output_item.done',
  'response.completed',
];

describe('the official Python openai client', () => {
  it.skipIf(!python)(
    `drives chat, streaming with usage, responses (plain, continued, streamed), errors and tool refusal (openai ${python?.version ?? 'not installed'})`,
    async () => {
      const res = await runPython(join(ROOT, 'test', 'support', 'openai-python-client.py'));
      expect(
        res.stderr.split('\n').filter((l) => l.startsWith('Traceback')),
        res.stderr,
      ).toEqual([]);
      expect(res.code, res.stderr).toBe(0);
      const out = JSON.parse(res.stdout);
      expect(out.chat).toEqual({ content: 'echo: hello python', finish_reason: 'stop', total_tokens: 10 });
      expect(out.chat_stream.text).toBe('echo: stream python');
      expect(out.chat_stream.usages.slice(0, -1).every((u: unknown) => u === null)).toBe(true);
      expect(out.chat_stream.usages.at(-1)).toBe(10);
      expect(out.chat_stream.empty_choices).toEqual([...out.chat_stream.empty_choices.slice(0, -1).map(() => false), true]);
      expect(out.responses).toMatchObject({
        status: 'completed',
        output_text: 'echo: responses python',
        input_tokens: 7,
        second_output_text: 'echo: and then?',
        second_previous: out.responses.id,
      });
      expect(out.retrieve).toBe('echo: responses python');
      expect([...new Set(out.responses_stream.types)]).toEqual(RESPONSE_STREAM);
      expect(out.responses_stream.deltas.length).toBeGreaterThan(1);
      expect(out.responses_stream.deltas.join('')).toBe('echo: streamed python');
      expect(out.responses_stream.helper_deltas.join('')).toBe('echo: helper python');
      expect(out.responses_stream.helper_text).toBe('echo: helper python');
      expect(out.errors.model).toMatchObject({ class: 'NotFoundError', status: 404, code: 'model_not_found', param: 'model' });
      expect(out.errors.param).toMatchObject({ class: 'BadRequestError', status: 400, code: 'unsupported_parameter', param: 'logprobs' });
      expect(out.errors.tools).toMatchObject({ class: 'BadRequestError', status: 400, code: 'client_tools_not_allowed', param: 'tools' });
      expect(out.errors.responses_tools).toMatchObject({ class: 'BadRequestError', code: 'client_tools_not_allowed', param: 'tools' });
      expect(out.errors.upstream).toMatchObject({
        class: 'InternalServerError',
        status: 502,
        message: expect.stringMatching(/upstream exploded/),
      });
      expect(out.errors.upstream_stream).toMatchObject({ class: 'APIError', message: expect.stringMatching(/upstream exploded/) });
      expect(out.responses_stream_error).toMatchObject({ code: 'model_error', message: expect.stringMatching(/upstream exploded/) });
      expect(out.responses_stream_failed_types.slice(-2)).toEqual(['error', 'response.failed']);
      expect(out.store_false).toMatchObject({ status: 'completed', output_text: 'echo: unstored python', store: false });
      expect(out.store_false.retrieve).toMatchObject({ class: 'NotFoundError', status: 404, code: 'response_not_found' });
      expect(out.chat_ignored).toBe('echo: ignored python');
      expect(out.errors.refused).toMatchObject({ class: 'BadRequestError', status: 400, code: 'unsupported_parameter', param: 'prompt' });
      expect(out.errors.refused.message).toMatch(/prompt is not accepted by POST \/v1\/responses: a prompt template stored with OpenAI/);
      // Every field this client declares is decided by the parameter table.
      for (const endpoint of ['chat', 'responses'] as const) {
        expect(out.declared[endpoint].length, endpoint).toBeGreaterThan(25);
        expect(
          (out.declared[endpoint] as string[]).filter((f) => ruleOf(endpoint, f) === undefined),
          endpoint,
        ).toEqual([]);
      }
    },
    120_000,
  );
});

describe('the official JS openai client', () => {
  const client = () => new OpenAI({ baseURL: `${gw.httpAddress.url}/v1`, apiKey: KEY, maxRetries: 0 });
  const errorOf = async (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (e: unknown) => (e instanceof APIError ? e : Promise.reject(e)),
    );

  it('chat, plain and streamed with usage', async () => {
    const chat = await client().chat.completions.create({ model: 'hermes-agent', messages: [{ role: 'user', content: 'hello js' }] });
    expect(chat.choices[0]).toMatchObject({ message: { content: 'echo: hello js' }, finish_reason: 'stop' });
    const stream = await client().chat.completions.create({
      model: 'hermes-agent',
      messages: [{ role: 'user', content: 'stream js' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    const usages: Array<number | null> = [];
    for await (const chunk of stream) {
      usages.push(chunk.usage?.total_tokens ?? null);
      text += chunk.choices[0]?.delta.content ?? '';
    }
    expect(text).toBe('echo: stream js');
    expect(usages.at(-1)).toBe(10);
    expect(usages.slice(0, -1).every((u) => u === null)).toBe(true);
  });

  it('responses: plain, continued, retrieved, streamed (raw events and the stream helper)', async () => {
    const first = await client().responses.create({ model: 'hermes-agent', instructions: 'Be brief.', input: 'responses js' });
    expect(first).toMatchObject({ status: 'completed', output_text: 'echo: responses js' });
    const second = await client().responses.create({ model: 'hermes-agent', input: 'and then?', previous_response_id: first.id });
    expect(second.output_text).toBe('echo: and then?');
    expect((await client().responses.retrieve(first.id)).output_text).toBe('echo: responses js');
    const types: string[] = [];
    let text = '';
    for await (const e of await client().responses.create({ model: 'hermes-agent', input: 'streamed js', stream: true })) {
      types.push(e.type);
      if (e.type === 'response.output_text.delta') text += e.delta;
    }
    expect([...new Set(types)]).toEqual(RESPONSE_STREAM);
    expect(text).toBe('echo: streamed js');
    const helper = client().responses.stream({ model: 'hermes-agent', input: 'helper js' });
    const seen: string[] = [];
    helper.on('response.output_text.delta', (e) => seen.push(e.delta));
    expect((await helper.finalResponse()).output_text).toBe('echo: helper js');
    expect(seen.join('')).toBe('echo: helper js');
  });

  it('store: false on /v1/responses, and a chat completion with the fields clients send that change nothing here, answer 200', async () => {
    const unstored = await client().responses.create({ model: 'hermes-agent', input: 'unstored js', store: false });
    expect(unstored).toMatchObject({ status: 'completed', output_text: 'echo: unstored js', store: false });
    expect(await errorOf(client().responses.retrieve(unstored.id))).toMatchObject({ status: 404, code: 'response_not_found' });
    const chat = await client().chat.completions.create({
      model: 'hermes-agent',
      messages: [{ role: 'user', content: 'ignored js' }],
      metadata: { ticket: 'T-1' },
      parallel_tool_calls: false,
      service_tier: 'flex',
      prompt_cache_key: 'tenant-7',
      store: true,
    });
    expect(chat.choices[0]!.message.content).toBe('echo: ignored js');
    const refused = await errorOf(client().responses.create({ model: 'hermes-agent', input: 'x', prompt: { id: 'pmpt_123' } }));
    expect(refused).toMatchObject({ status: 400, code: 'unsupported_parameter', param: 'prompt' });
    expect(refused?.message).toMatch(/prompt is not accepted by POST \/v1\/responses: a prompt template stored with OpenAI/);
  });

  it("errors and the refusal of the caller's tools", async () => {
    expect(await errorOf(client().chat.completions.create({ model: 'gpt-9', messages: [{ role: 'user', content: 'x' }] }))).toMatchObject({
      status: 404,
      code: 'model_not_found',
      param: 'model',
    });
    expect(
      await errorOf(
        client().chat.completions.create({ model: 'hermes-agent', messages: [{ role: 'user', content: 'x' }], logprobs: true }),
      ),
    ).toMatchObject({ status: 400, code: 'unsupported_parameter', param: 'logprobs' });
    expect(
      await errorOf(
        client().chat.completions.create({
          model: 'hermes-agent',
          messages: [{ role: 'user', content: 'x' }],
          tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
        }),
      ),
    ).toMatchObject({ status: 400, code: 'client_tools_not_allowed', param: 'tools' });
    expect(
      await errorOf(client().chat.completions.create({ model: 'hermes-agent', messages: [{ role: 'user', content: 'FAIL' }] })),
    ).toMatchObject({ status: 502, message: expect.stringMatching(/upstream exploded/) });
    const failing = await client().chat.completions.create({
      model: 'hermes-agent',
      messages: [{ role: 'user', content: 'FAIL' }],
      stream: true,
    });
    const midStream = await errorOf(
      (async () => {
        for await (const _ of failing) {
          /* the error chunk throws */
        }
      })(),
    );
    expect(midStream?.message).toMatch(/upstream exploded/);
    const events: string[] = [];
    for await (const e of await client().responses.create({ model: 'hermes-agent', input: 'FAIL', stream: true })) events.push(e.type);
    expect(events.slice(-2)).toEqual(['error', 'response.failed']);
  });
});
