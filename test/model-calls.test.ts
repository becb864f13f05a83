/**
 * Model calls of the `agent` runner (docs/DESIGN.md §12): the real `openai` client
 * against the local model server over loopback (no Redis). Retries by the
 * client (429 with Retry-After, 5xx, connection errors) and how their waits
 * end with the turn; fallback models; usage events and the turn's spend
 * against the server's own token counts; estimates for an endpoint that
 * reports none; the context window — learned from a provider's refusal,
 * respected inside a tool-calling turn whose results keep growing; the token
 * budget of a turn; declared models; compaction summaries.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { APIUserAbortError } from 'openai';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { configDefaults, loadConfig } from '../scheduler/config/config.ts';
import { TurnError } from '../scheduler/errors/turn-error.ts';
import { HermesMetrics } from '../scheduler/metrics.ts';
import { Toolbox } from '../worker/tools/toolbox.ts';
import type { ScheduleStatusSources } from '../worker/tools/schedule-status-tool.ts';
import { AgentRunner, SUMMARY_PROMPT, type AgentRunnerOptions } from '../worker/turn-runners/agent-runner.ts';
import { agentRunnerOptions } from '../worker/turn-runners/create-runner.ts';
import type { ChatMessage, ModelCallEvent, TurnEvent, TurnRequest } from '../worker/turn-runners/turn-runner.ts';
import { countTokens, lastToolResult, startFakeOpenAI, type FakeOpenAI, type FakeOpenAIOptions } from './support/fake-openai.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { passUntil, settleOnFakeClock as settle } from './support/fake-clock.ts';
import { refusedPort } from './support/refused-port.ts';

const cleanups = cleanupAfterEach();

async function fake(options: FakeOpenAIOptions = {}): Promise<FakeOpenAI> {
  const m = await startFakeOpenAI({ usage: 'counted', ...options });
  cleanups.push(() => m.close());
  return m;
}

/** A toolbox whose `read_file` reads `files` (name → content). */
function toolbox(files: Record<string, string>): Toolbox {
  const dir = mkdtempSync(join(tmpdir(), 'hermes-model-calls-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  const config = loadConfig({ env: { HERMES_HOME: dir }, overrides: { 'tools.files.roots': [dir] } });
  return new Toolbox(config, {} as ScheduleStatusSources);
}

function setup(model: FakeOpenAI, options: Partial<AgentRunnerOptions> = {}, tools?: Toolbox) {
  const metrics = new HermesMetrics({ processMetrics: false });
  const runner = new AgentRunner(
    {
      baseUrl: model.baseUrl,
      apiKey: 'k',
      model: 'primary-model',
      timeoutSeconds: 30,
      maxRetries: 2,
      metrics,
      ...options,
    },
    tools,
  );
  return { runner, metrics };
}

/** A turn request that collects its events. */
function turn(messages: ChatMessage[] | string, extra: Partial<TurnRequest> = {}): TurnRequest & { events: TurnEvent[] } {
  const events: TurnEvent[] = [];
  const msgs = typeof messages === 'string' ? [{ role: 'user' as const, content: messages }] : messages;
  return { sessionId: 's1', messages: msgs, signal: new AbortController().signal, onEvent: (e) => void events.push(e), events, ...extra };
}

const modelCalls = (events: TurnEvent[]): ModelCallEvent[] => events.flatMap((e) => (e.type === 'model.called' ? [e.data] : []));
const compactions = (events: TurnEvent[]) => events.flatMap((e) => (e.type === 'context.compacted' ? [e.data] : []));

async function counter(metrics: HermesMetrics, name: string, labels: Record<string, string>): Promise<number> {
  const metric = await metrics.registry.getSingleMetric(name)!.get();
  return metric.values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val))?.value ?? 0;
}
const calls = (metrics: HermesMetrics, outcome: string, kind = 'message') =>
  counter(metrics, 'hermes_model_calls_total', { kind, outcome });

async function caught(p: Promise<unknown>): Promise<TurnError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(TurnError);
    return err as TurnError;
  }
  throw new Error('expected the promise to reject');
}

/** English-like text of about `tokens` tokens (o200k). */
function prose(tokens: number, seed = 'status'): string {
  const words = [
    'the',
    'build',
    'on',
    'main',
    'is',
    'still',
    'red',
    'because',
    'a',
    'test',
    'of',
    'the',
    'parser',
    'failed',
    seed,
    'again',
  ];
  const out: string[] = [];
  for (let i = 0; out.length < tokens; i++) out.push(words[(i * 7 + (i >> 3)) % words.length]!);
  return out.join(' ');
}

const rateLimited = {
  status: 429,
  message: 'Rate limit reached for requests',
  type: 'requests',
  code: 'rate_limit_exceeded',
  retryable: true,
} as const;

describe('retries by the openai client', () => {
  // The waits between attempts (Retry-After, the turn's deadline) run on a fake clock; the model
  // server answers over a real socket.
  beforeEach(() => void vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] }));
  afterEach(() => void vi.useRealTimers());

  it('a 429 with Retry-After: 1 is waited out, then the call succeeds: one turn, retried 1, ok 1', async () => {
    const model = await fake();
    model.respond((_req, i) => (i === 0 ? { ...rateLimited, headers: { 'retry-after': '1' } } : 'all green'));
    const { runner, metrics } = setup(model);
    const t = turn('is the build green?');
    const started = Date.now();
    const out = await settle(runner.run(t));
    expect(out.reply).toBe('all green');
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(model.requests).toHaveLength(2);
    expect(model.requests[1]!.at - model.requests[0]!.at).toBeGreaterThanOrEqual(950);
    expect(await calls(metrics, 'retried')).toBe(1);
    expect(await calls(metrics, 'ok')).toBe(1);
    expect(await calls(metrics, 'failed')).toBe(0);
    expect(modelCalls(t.events)).toHaveLength(1); // a retried call is one call
    expect(out.spend!.calls).toBe(1);
  });

  it('agent.max_retries of config is how often a failing call is retried; a runner given none retries as many times as the schema says', async () => {
    const model = await fake();
    model.respond(() => ({ status: 500, message: 'upstream exploded', retryable: true }));
    const dir = mkdtempSync(join(tmpdir(), 'hermes-model-calls-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const config = loadConfig({ env: { HERMES_HOME: dir }, overrides: { 'agent.base_url': model.baseUrl, 'agent.max_retries': 1 } });
    await caught(settle(new AgentRunner(agentRunnerOptions(config)).run(turn('is the build green?'))));
    expect(model.requests).toHaveLength(2);
    const { runner } = setup(model, { maxRetries: undefined });
    await caught(settle(runner.run(turn('is the build green?'))));
    expect(configDefaults().agent.max_retries).not.toBe(1);
    expect(model.requests).toHaveLength(2 + 1 + configDefaults().agent.max_retries);
  });

  it('the client alone does not cut its retry wait when the signal aborts (why the runner makes the waits itself)', async () => {
    const model = await fake();
    const stop = new AbortController();
    let answeredAt = 0;
    model.respond(() => {
      answeredAt = Date.now();
      setTimeout(() => stop.abort(), 200); // during the wait
      return { ...rateLimited, headers: { 'retry-after': '1.5' } };
    });
    const client = new OpenAI({ baseURL: model.baseUrl, apiKey: 'k', maxRetries: 1 });
    await expect(
      settle(client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }, { signal: stop.signal })),
    ).rejects.toBeInstanceOf(APIUserAbortError);
    // openai 6.x: the abort is seen only when the wait is over, before the next attempt.
    expect(Date.now() - answeredAt).toBeGreaterThanOrEqual(1_400);
    expect(model.requests).toHaveLength(1);
  });

  it('a stop during a Retry-After wait ends the turn at once, and nothing more is sent', async () => {
    const model = await fake();
    const stop = new AbortController();
    let answeredAt = 0;
    model.respond(() => {
      answeredAt = Date.now();
      setTimeout(() => stop.abort(), 200); // during the wait
      return { ...rateLimited, headers: { 'retry-after': '20' } };
    });
    const { runner, metrics } = setup(model);
    const err = await caught(settle(runner.run(turn('hi', { signal: stop.signal }))));
    expect(err.kind).toBe('aborted');
    expect(Date.now() - answeredAt).toBeLessThan(1_000);
    // Past the 20 s the answer asked for: still nothing more sent.
    const stoppedAt = Date.now();
    await passUntil(() => Date.now() - stoppedAt > 30_000, 'the Retry-After over');
    expect(model.requests).toHaveLength(1);
    expect(await calls(metrics, 'failed')).toBe(0); // a stop is no failure of the model
  });

  it("a Retry-After past the turn's deadline is not waited for: the call fails (or falls back) at once", async () => {
    const model = await fake();
    model.respond((req) => (req.model === 'primary-model' ? { ...rateLimited, headers: { 'retry-after': '60' } } : 'from the backup'));
    const alone = setup(model, { timeoutSeconds: 10 });
    let started = Date.now();
    const err = await caught(settle(alone.runner.run(turn('hi'))));
    expect(err.kind).toBe('model');
    expect(err.message).toMatch(/429/);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(await calls(alone.metrics, 'retried')).toBe(0);
    expect(await calls(alone.metrics, 'failed')).toBe(1);

    const withBackup = setup(model, { timeoutSeconds: 10, models: { backup: { model: 'backup-model' } }, fallbackModels: ['backup'] });
    started = Date.now();
    expect((await settle(withBackup.runner.run(turn('hi')))).reply).toBe('from the backup');
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("the turn's deadline ends a call whose retries would outlast it", async () => {
    const model = await fake();
    model.respond(() => ({ status: 503, message: 'overloaded', retryable: true, headers: { 'retry-after': '0.8' } }));
    const { runner, metrics } = setup(model, { timeoutSeconds: 2, maxRetries: 10 });
    const started = Date.now();
    const err = await caught(settle(runner.run(turn('hi'))));
    expect(err.kind === 'timeout' || err.kind === 'model').toBe(true);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(model.requests.length).toBeLessThanOrEqual(4);
    // Each wait started is counted; the deadline may cut the attempt after the last one.
    const retried = await calls(metrics, 'retried');
    expect(retried).toBeGreaterThanOrEqual(model.requests.length - 1);
    expect(retried).toBeLessThanOrEqual(model.requests.length);
  });
});

describe('fallback models', () => {
  // The client's backoff before its retry runs on a fake clock, as in the retries above.
  beforeEach(() => void vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] }));
  afterEach(() => void vi.useRealTimers());

  it('the primary answers 500 past its retries → the declared fallback answers, and keeps the rest of the turn', async () => {
    const model = await fake();
    model.respond((req) => {
      if (req.model === 'primary-model') return { status: 500, message: 'upstream exploded', retryable: true };
      return lastToolResult(req) === undefined
        ? { toolCalls: [{ name: 'read_file', arguments: { path: 'state.txt' } }] }
        : `state is ${lastToolResult(req)!.trim()}`;
    });
    const { runner, metrics } = setup(
      model,
      { maxRetries: 1, models: { backup: { model: 'backup-model' } }, fallbackModels: ['backup'] },
      toolbox({ 'state.txt': 'GREEN\n' }),
    );
    const t = turn('what does state.txt say?');
    const out = await settle(runner.run(t));
    expect(out.reply).toBe('state is GREEN');
    expect(model.requests.map((r) => r.model)).toEqual(['primary-model', 'primary-model', 'backup-model', 'backup-model']);
    expect(modelCalls(t.events).map((e) => [e.model, e.error])).toEqual([
      ['backup-model', undefined],
      ['backup-model', undefined],
    ]);
    expect(await calls(metrics, 'retried')).toBe(1);
    expect(await calls(metrics, 'fallback')).toBe(2);
    expect(await calls(metrics, 'ok')).toBe(0);
  });

  it('a primary that cannot be reached is retried, then a fallback on its own endpoint answers', async () => {
    const model = await fake();
    const closed = await refusedPort();
    const { runner, metrics } = setup(model, {
      baseUrl: `http://127.0.0.1:${closed}/v1`,
      maxRetries: 1,
      models: { backup: { model: 'backup-model', baseUrl: model.baseUrl } },
      fallbackModels: ['backup'],
    });
    const t = turn('hi');
    expect((await settle(runner.run(t))).reply).toBe('ok');
    expect(model.requests.map((r) => r.model)).toEqual(['backup-model']);
    expect(await calls(metrics, 'retried')).toBe(1);
    expect(await calls(metrics, 'fallback')).toBe(1);
  });

  it('an error that is not transient (400) does not fall back; the failure is told once', async () => {
    const model = await fake();
    model.respond(() => ({ status: 400, message: 'Invalid value for messages', type: 'invalid_request_error' }));
    const { runner, metrics } = setup(model, { models: { backup: { model: 'backup-model' } }, fallbackModels: ['backup'] });
    const t = turn('hi');
    const err = await caught(settle(runner.run(t)));
    expect(err.kind).toBe('model');
    expect(model.requests.map((r) => r.model)).toEqual(['primary-model']);
    expect(modelCalls(t.events)).toEqual([expect.objectContaining({ model: 'primary-model', error: expect.stringMatching(/400/) })]);
    expect(await calls(metrics, 'failed')).toBe(1);
  });
});

describe('usage and spend', () => {
  it("every call reports its usage; events, spend, usage and metrics match the server's counts", async () => {
    const model = await fake();
    model.respond((req, i) => {
      if (lastToolResult(req) === undefined) return { toolCalls: [{ name: 'read_file', arguments: { path: 'state.txt' } }] };
      return i === 1 ? { text: 'It says GREEN.', cachedTokens: 32 } : 'x';
    });
    const { runner, metrics } = setup(model, {}, toolbox({ 'state.txt': 'GREEN\n' }));
    const t = turn('read state.txt', { kind: 'loop' });
    const out = await runner.run(t);
    const events = modelCalls(t.events);
    expect(events).toHaveLength(2);
    expect(events.map((e) => e.inputTokens)).toEqual(model.requests.map((r) => r.promptTokens));
    expect(events.map((e) => e.outputTokens)).toEqual([
      countTokens('read_file') + countTokens('{"path":"state.txt"}'),
      countTokens('It says GREEN.'),
    ]);
    expect(events.map((e) => e.cachedTokens)).toEqual([0, 32]);
    expect(events.every((e) => !e.estimated && e.purpose === 'turn' && e.model === 'primary-model' && e.ms >= 0)).toBe(true);
    const input = model.requests.reduce((n, r) => n + r.promptTokens, 0);
    const output = events.reduce((n, e) => n + e.outputTokens, 0);
    expect(out.spend).toEqual({
      calls: 2,
      inputTokens: input,
      outputTokens: output,
      cachedTokens: 32,
      lastInputTokens: model.requests[1]!.promptTokens,
      estimated: false,
    });
    expect(out.usage).toEqual({ prompt_tokens: input, completion_tokens: output, total_tokens: input + output });
    expect(await counter(metrics, 'hermes_model_tokens_total', { kind: 'loop', direction: 'input' })).toBe(input);
    expect(await counter(metrics, 'hermes_model_tokens_total', { kind: 'loop', direction: 'output' })).toBe(output);
    expect(await counter(metrics, 'hermes_model_tokens_total', { kind: 'loop', direction: 'cached' })).toBe(32);
    expect(await calls(metrics, 'ok', 'loop')).toBe(2);
  });

  it('a streamed call reports the usage of its last chunk', async () => {
    const model = await fake();
    model.respond(() => 'the build is green');
    const { runner } = setup(model);
    const deltas: string[] = [];
    const t = turn('status?', { onDelta: (d) => deltas.push(d) });
    const out = await runner.run(t);
    expect(deltas.join('')).toBe('the build is green');
    expect(model.requests[0]!.stream).toBe(true);
    expect(modelCalls(t.events)[0]).toMatchObject({
      inputTokens: model.requests[0]!.promptTokens,
      outputTokens: countTokens('the build is green'),
      estimated: false,
    });
    expect(out.spend!.inputTokens).toBe(model.requests[0]!.promptTokens);
  });

  it('an endpoint that reports no usage: the call is estimated (input on the high side, output from the reply)', async () => {
    const model = await fake({ usage: 'none' });
    model.respond(() => 'a reply of some length, written by the model');
    const { runner } = setup(model);
    const t = turn(`summarise: ${prose(400)}`);
    const out = await runner.run(t);
    const [e] = modelCalls(t.events);
    expect(e!.estimated).toBe(true);
    expect(e!.inputTokens).toBeGreaterThanOrEqual(model.requests[0]!.promptTokens);
    expect(e!.inputTokens).toBe(await runner.estimateTokens(undefined, t.messages));
    expect(e!.estimatedInputTokens).toBe(e!.inputTokens);
    expect(e!.outputTokens).toBe(Math.ceil('a reply of some length, written by the model'.length / 3));
    expect(out.spend).toMatchObject({ calls: 1, estimated: true, inputTokens: e!.inputTokens });
    expect(out.usage).toBeUndefined();
  });

  it("judges and summaries say so (purpose) and count under their turn's kind", async () => {
    const model = await fake();
    model.respond(() => '{"verdict":"continue","reason":"still red"}');
    const { runner, metrics } = setup(model);
    const events: TurnEvent[] = [];
    const res = await runner.complete([{ role: 'user', content: 'judge this' }], new AbortController().signal, 's1', {
      system: 'You judge.',
      jsonObject: true,
      purpose: 'judge',
      kind: 'heartbeat',
      onEvent: (e) => void events.push(e),
    });
    expect(res.spend.calls).toBe(1);
    expect(modelCalls(events)[0]!.purpose).toBe('judge');
    expect(await calls(metrics, 'ok', 'heartbeat')).toBe(1);
  });
});

describe('the context window', () => {
  /** A session with `pairs` long user/assistant exchanges, then a short new input. */
  function longSession(pairs: number, tokensEach: number): ChatMessage[] {
    const out: ChatMessage[] = [];
    for (let i = 0; i < pairs; i++) {
      out.push(
        { role: 'user', content: `report ${i}: ${prose(tokensEach, `r${i}`)}` },
        { role: 'assistant', content: `Noted report ${i}.` },
      );
    }
    out.push({ role: 'user', content: 'So, is it green now?' });
    return out;
  }

  it("a window learned from the provider's refusal: the call is compacted and sent once more; the next call fits the first time", async () => {
    const model = await fake({ contextWindow: 8_192 });
    model.respond(() => 'Still red.');
    const { runner } = setup(model, { contextWindowTokens: 128_000 });
    expect((await runner.contextOf()).windowTokens).toBe(128_000);
    const t = turn(longSession(6, 2_000));
    expect((await runner.run(t)).reply).toBe('Still red.');
    expect(model.refusedForLength).toBe(1);
    expect(model.requests).toHaveLength(2);
    expect(model.requests[0]!.promptTokens).toBeGreaterThan(8_192);
    expect(model.requests[1]!.promptTokens).toBeLessThanOrEqual(8_192);
    expect((await runner.contextOf()).windowTokens).toBe(8_192);
    expect(compactions(t.events)).toEqual([expect.objectContaining({ scope: 'call', model: 'primary-model', windowTokens: 8_192 })]);
    // the new input is still what the model answers
    expect(model.requests[1]!.messages.at(-1)).toEqual({ role: 'user', content: 'So, is it green now?' });
    // only the served call counts
    expect(modelCalls(t.events)).toHaveLength(1);

    const next = turn(longSession(6, 2_000));
    await runner.run(next);
    expect(model.refusedForLength).toBe(1);
    expect(model.requests).toHaveLength(3);
    expect(model.requests[2]!.promptTokens).toBeLessThanOrEqual(8_192);
    expect(compactions(next.events)).toHaveLength(1);
  });

  it('a refused request that compaction cannot make smaller fails the turn with a clear error, without being sent again', async () => {
    const model = await fake({ contextWindow: 1_000 });
    // A system prompt the estimate undercounts (about 2 tokens per character) and compaction
    // cannot shorten: sent again it would be refused again, so it is not.
    const dense = Array.from({ length: 600 }, (_, i) => String.fromCharCode(0x4e00 + i * 7)).join('');
    const { runner } = setup(model, { contextWindowTokens: 128_000 });
    const err = await caught(runner.complete([{ role: 'user', content: 'hi' }], new AbortController().signal, 's1', { system: dense }));
    expect(err.kind).toBe('model');
    expect(err.message).toMatch(
      /^The request to primary-model did not fit its context window even after compaction \(1,000 tokens\): 400 This model's maximum context length is 1000 tokens/,
    );
    expect(model.refusedForLength).toBe(1);
    expect(model.requests).toHaveLength(1);
  });

  it('a request that cannot be compacted under the window is never sent', async () => {
    const model = await fake();
    const { runner } = setup(model, { contextWindowTokens: 1_024 });
    const err = await caught(
      runner.complete([{ role: 'user', content: 'hi' }], new AbortController().signal, 's1', { system: 'x'.repeat(6_000) }),
    );
    expect(err.kind).toBe('model');
    expect(err.message).toMatch(/^The request to primary-model does not fit its context window \(1,024 tokens\) even after compaction/);
    expect(model.requests).toHaveLength(0);
  });

  it('tool results that grow past the window within one turn: no request is ever sent over it', async () => {
    const model = await fake({ contextWindow: 8_192 });
    model.respond((req) => {
      const results = req.messages.filter((m) => m.role === 'tool').length;
      return results < 5 ? { toolCalls: [{ name: 'read_file', arguments: { path: `log${results}.txt` } }] } : 'The log is still red.';
    });
    const files = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`log${i}.txt`, `log ${i}\n${prose(2_800, `l${i}`)}`]));
    const { runner } = setup(model, { contextWindowTokens: 8_192 }, toolbox(files));
    const t = turn('Read log0.txt to log4.txt one after the other, then tell me the state.');
    expect((await runner.run(t)).reply).toBe('The log is still red.');
    expect(model.requests).toHaveLength(6);
    expect(model.refusedForLength).toBe(0);
    expect(Math.max(...model.requests.map((r) => r.promptTokens))).toBeLessThanOrEqual(8_192);
    expect(compactions(t.events).length).toBeGreaterThanOrEqual(1);
    expect(compactions(t.events).every((c) => c.scope === 'call')).toBe(true);
    // the result the model has not seen yet reaches it whole; older ones were stubbed
    for (const [i, req] of model.requests.slice(1).entries()) {
      expect(lastToolResult(req)).toBe(files[`log${i}.txt`]);
    }
    const last = model.requests.at(-1)!;
    expect(last.messages.filter((m) => m.role === 'tool' && m.content.includes('elided to save context')).length).toBeGreaterThanOrEqual(1);
  });
});

describe('the token budget of a turn', () => {
  it('past agent.max_tokens_per_turn the turn stops with a budget error naming the spend and the limit', async () => {
    const model = await fake();
    model.respond(() => ({ toolCalls: [{ name: 'read_file', arguments: { path: 'state.txt' } }] }));
    const { runner } = setup(model, { maxTokensPerTurn: 60 }, toolbox({ 'state.txt': 'GREEN\n' }));
    const err = await caught(runner.run(turn('read state.txt')));
    expect(err.kind).toBe('budget');
    const used = model.requests[0]!.promptTokens + countTokens('read_file') + countTokens('{"path":"state.txt"}');
    expect(err.message).toBe(`This turn used ${used.toLocaleString('en-US')} tokens, over agent.max_tokens_per_turn (60).`);
    expect(err.spend).toMatchObject({ calls: 1, inputTokens: model.requests[0]!.promptTokens });
    expect(model.requests).toHaveLength(1);
  });

  it('the answer of the call that passed it is kept: returned with the spend and the limit, not thrown away', async () => {
    const model = await fake();
    model.respond(() => 'The build is green.');
    const { runner } = setup(model, { maxTokensPerTurn: 5 });
    const out = await runner.run(turn('is the build green?'));
    const used = model.requests[0]!.promptTokens + countTokens('The build is green.');
    expect(out).toMatchObject({ reply: 'The build is green.', overBudget: { usedTokens: used, limitTokens: 5 } });
    expect(out.spend).toMatchObject({ calls: 1, inputTokens: model.requests[0]!.promptTokens });
    // Under the limit: no overrun.
    const { runner: roomy } = setup(model, { maxTokensPerTurn: 100_000 });
    expect((await roomy.run(turn('is the build green?'))).overBudget).toBeUndefined();
  });

  it('what the turn spent before (a summary) counts too', async () => {
    const model = await fake();
    const { runner } = setup(model, { maxTokensPerTurn: 1_000 });
    const spentBefore = { calls: 1, inputTokens: 990, outputTokens: 0, cachedTokens: 0, lastInputTokens: 990, estimated: false };
    const res = await runner.complete([{ role: 'user', content: 'hi' }], new AbortController().signal, 's1', { spentBefore });
    expect(res.overBudget).toEqual({ usedTokens: 990 + res.spend.inputTokens + res.spend.outputTokens, limitTokens: 1_000 });
  });

  it('a failed turn carries the spend of the calls made before it failed', async () => {
    const model = await fake();
    model.respond((req) =>
      lastToolResult(req) === undefined
        ? { toolCalls: [{ name: 'read_file', arguments: { path: 'state.txt' } }] }
        : { status: 500, message: 'boom' },
    );
    const { runner } = setup(model, {}, toolbox({ 'state.txt': 'GREEN\n' }));
    const err = await caught(runner.run(turn('read state.txt')));
    expect(err.kind).toBe('model');
    expect(err.spend).toMatchObject({ calls: 1, inputTokens: model.requests[0]!.promptTokens });
  });
});

describe('declared models', () => {
  it('a turn on a declared model goes to its id on its own endpoint; an unknown name is a config error naming the known ones', async () => {
    const primary = await fake();
    const other = await fake();
    const { runner } = setup(primary, {
      models: { fast: { model: 'fast-model', baseUrl: other.baseUrl }, big: { model: 'big-model', contextWindowTokens: 32_000 } },
    });
    await runner.run(turn('hi', { model: 'fast' }));
    expect(other.requests.map((r) => r.model)).toEqual(['fast-model']);
    expect(primary.requests).toHaveLength(0);
    await runner.run(turn('hi', { model: 'big' }));
    expect(primary.requests.map((r) => r.model)).toEqual(['big-model']);
    expect(await runner.contextOf('big')).toEqual({
      model: 'big-model',
      windowTokens: 32_000,
      thresholdTokens: 16_000,
      targetTokens: 8_000,
      keepRecent: 8,
    });

    const err = await caught(runner.run(turn('hi', { model: 'nope' })));
    expect(err.kind).toBe('config');
    expect(err.message).toBe('Unknown model "nope": the declared models are "fast", "big" (agent.models).');
    await expect(runner.contextOf('nope')).rejects.toThrow(TurnError);
    await expect(runner.estimateTokens('nope', [])).rejects.toThrow(/Unknown model "nope"/);
    expect(primary.requests.length + other.requests.length).toBe(2);
  });

  it('the runner factory builds it all from agent.* of config', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hermes-model-calls-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const config = loadConfig({
      env: { HERMES_HOME: dir },
      overrides: {
        'agent.base_url': 'http://127.0.0.1:9/v1',
        'agent.model': 'gpt-4o-mini',
        'agent.context_window_tokens': 64_000,
        'agent.compaction': { threshold: 0.6, target: 0.3, keep_recent_messages: 4 },
        'agent.max_retries': 5,
        'agent.max_tokens_per_turn': 1_000,
        'agent.models': { cheap: { model: 'cheap-model', context_window_tokens: 16_000 } },
        'agent.fallback_models': ['cheap'],
      },
    });
    const options = agentRunnerOptions(config);
    expect(options).toMatchObject({
      model: 'gpt-4o-mini',
      contextWindowTokens: 64_000,
      maxRetries: 5,
      maxTokensPerTurn: 1_000,
      fallbackModels: ['cheap'],
      compaction: { threshold: 0.6, target: 0.3, keepRecentMessages: 4 },
      models: { cheap: { model: 'cheap-model', contextWindowTokens: 16_000 } },
      cutHeadShare: config.tools.result_head_share,
    });
    const runner = new AgentRunner(options);
    expect(await runner.contextOf()).toEqual({
      model: 'gpt-4o-mini',
      windowTokens: 64_000,
      thresholdTokens: 38_400,
      targetTokens: 19_200,
      keepRecent: 4,
      cutHeadShare: config.tools.result_head_share,
    });
    expect((await runner.contextOf('cheap')).windowTokens).toBe(16_000);
  });

  it('estimateTokens counts the system prompt and the tool definitions of the surface, calibrated by reported counts', async () => {
    const model = await fake();
    const { runner } = setup(model, {}, toolbox({ 'a.txt': 'a' }));
    const msgs = [{ role: 'user', content: 'hello' }];
    const bare = await runner.estimateTokens(undefined, msgs);
    const withTools = await runner.estimateTokens(undefined, msgs, 'cli');
    expect(withTools).toBeGreaterThan(bare + 50);
    // A text the estimate undercounts (one token per character): the reported count corrects it.
    const dense = [{ role: 'user' as const, content: '好'.repeat(3_000) }];
    const before = await runner.estimateTokens(undefined, dense);
    await runner.run(turn(dense));
    const reported = model.requests[0]!.promptTokens;
    expect(before).toBeLessThan(reported);
    expect(await runner.estimateTokens(undefined, dense, 'cli')).toBeGreaterThanOrEqual(reported);
  });
});

describe('summaries for compaction', () => {
  const conversation = [
    { role: 'user' as const, content: 'Watch the deploy of api-7.' },
    { role: 'assistant' as const, content: '', tool_calls: [{ name: 'read_file', arguments: '{"path":"deploy.log"}' }] },
    { role: 'tool' as const, content: 'deploy api-7: step 3/5 done', tool_call_id: 'c1', name: 'read_file' },
    { role: 'assistant' as const, content: 'The deploy is at step 3 of 5.' },
  ];

  it('one call on agent.compaction.model (a raw id of the primary endpoint) with purpose summary', async () => {
    const model = await fake();
    model.respond(() => '  The user asked to watch api-7; the deploy was at step 3 of 5.  ');
    const { runner, metrics } = setup(model, { compaction: { model: 'summary-model' } });
    const events: TurnEvent[] = [];
    const res = await runner.summarise(conversation, new AbortController().signal, {
      kind: 'loop',
      sessionId: 's1',
      onEvent: (e) => void events.push(e),
    });
    expect(res.text).toBe('The user asked to watch api-7; the deploy was at step 3 of 5.');
    expect(res.spend).toMatchObject({ calls: 1, inputTokens: model.requests[0]!.promptTokens });
    const req = model.requests[0]!;
    expect(req.model).toBe('summary-model');
    expect(req.messages[0]).toEqual({ role: 'system', content: SUMMARY_PROMPT });
    expect(req.messages[1]!.content).toContain('deploy api-7: step 3/5 done');
    expect(req.messages[1]!.content).toContain('[called read_file({"path":"deploy.log"})]');
    expect(req.tools).toEqual([]);
    expect(modelCalls(events)[0]).toMatchObject({ purpose: 'summary', model: 'summary-model' });
    expect(await calls(metrics, 'ok', 'loop')).toBe(1);
  });

  it("on the turn's model when no compaction model is set; its input is cut to fit its window", async () => {
    const model = await fake({ contextWindow: 4_000 });
    model.respond(() => 'summary');
    const { runner } = setup(model, { models: { small: { model: 'small-model', contextWindowTokens: 4_000 } } });
    const long = [...conversation, { role: 'tool' as const, content: prose(20_000), tool_call_id: 'c2', name: 'read_file' }];
    const res = await runner.summarise(long, new AbortController().signal, { model: 'small' });
    expect(res.text).toBe('summary');
    expect(model.requests.map((r) => r.model)).toEqual(['small-model']);
    expect(model.refusedForLength).toBe(0);
    expect(model.requests[0]!.messages[1]!.content).toContain('cut to fit');
  });

  it('a failed or empty summary throws, with its spend', async () => {
    const model = await fake();
    model.respond(() => '   ');
    const { runner } = setup(model);
    const err = await caught(runner.summarise(conversation, new AbortController().signal));
    expect(err.message).toMatch(/empty summary/);
    expect(err.spend).toMatchObject({ calls: 1 });
    model.respond(() => ({ status: 500, message: 'summariser down' }));
    const failed = await caught(runner.summarise(conversation, new AbortController().signal));
    expect(failed.spend).toEqual(expect.objectContaining({ calls: 0 }));
  });
});
