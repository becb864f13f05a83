/**
 * The rules of docs/CONTEXT.md "Windows", "Refusals" and "Circuit breaker" as pure functions: the
 * window's precedence, every provider's refusal read in its own words and status (and what is not a
 * refusal for length), the refusal rule, how concurrent learnings merge, and the breaker's transitions.
 */
import { describe, expect, it } from 'vitest';
import { admit, afterCall, breakerState, type BreakerRecord, type BreakerSettings } from '../scheduler/models/circuit-breaker.ts';
import { DEFAULT_CONTEXT_WINDOW_TOKENS, windowFromTable } from '../scheduler/models/known-windows.ts';
import { afterRefusal, mergeLearned, resolveWindow, type LearnedWindow } from '../scheduler/models/model-window.ts';
import { contextRefusalOf } from '../worker/turn-runners/model-transport.ts';
import { PROVIDER_REFUSALS, refusalAnswer } from './support/provider-refusals.ts';

describe('windows', () => {
  it('known models by name', () => {
    expect(windowFromTable('gpt-4o-mini')).toBe(128_000);
    expect(windowFromTable('openai/GPT-4.1-mini')).toBe(1_047_576);
    expect(windowFromTable('gpt-4')).toBe(8_192);
    expect(windowFromTable('gpt-4-turbo-2024-04-09')).toBe(128_000);
    expect(windowFromTable('gpt-3.5-turbo')).toBe(16_385);
    expect(windowFromTable('o3-mini')).toBe(200_000);
    expect(windowFromTable('meta-llama-3.1-8b-instruct')).toBe(128_000);
    expect(windowFromTable('llama3-8b')).toBe(8_192);
    expect(windowFromTable('my-local-model')).toBeUndefined();
  });

  it('precedence: learned, then configured, then the table, then 128000, each with its source', () => {
    const learned: LearnedWindow = { version: 1, tokens: 8_000, how: 'halved', provider: 'llama.cpp', at: 0, said: '' };
    expect(resolveWindow({ model: 'gpt-4', learned, configuredTokens: 32_000 })).toEqual({ tokens: 8_000, source: 'learned' });
    expect(resolveWindow({ model: 'gpt-4', configuredTokens: 32_000 })).toEqual({ tokens: 32_000, source: 'configured' });
    expect(resolveWindow({ model: 'gpt-4' })).toEqual({ tokens: 8_192, source: 'known' });
    expect(resolveWindow({ model: 'unknown' })).toEqual({ tokens: DEFAULT_CONTEXT_WINDOW_TOKENS, source: 'default' });
  });
});

describe("providers' refusals", () => {
  /** What each provider's answer for a 9,000-token request over an 8,000-token window reads as. */
  const expected: Record<(typeof PROVIDER_REFUSALS)[number], { provider: string; windowTokens?: number; promptTokens?: number }> = {
    openai: { provider: 'openai', windowTokens: 8_000, promptTokens: 9_000 },
    anthropic: { provider: 'anthropic', windowTokens: 8_000, promptTokens: 9_000 },
    gemini: { provider: 'gemini', windowTokens: 8_000, promptTokens: 9_000 },
    vllm: { provider: 'openai', windowTokens: 8_000, promptTokens: 9_000 },
    'vllm-engine': { provider: 'vllm', windowTokens: 8_000, promptTokens: 9_000 },
    'llama.cpp': { provider: 'llama.cpp' },
    'llama.cpp-counts': { provider: 'llama.cpp', windowTokens: 8_000, promptTokens: 9_000 },
    tgi: { provider: 'tgi', windowTokens: 8_000, promptTokens: 9_000 },
    ollama: { provider: 'ollama' }, // "by 1000 tokens" is the excess, not the window
    mistral: { provider: 'mistral', windowTokens: 8_000, promptTokens: 9_000 },
    'lm-studio': { provider: 'lm-studio', windowTokens: 8_000, promptTokens: 9_000 },
  };
  for (const provider of PROVIDER_REFUSALS) {
    it(`${provider}: read from the body it sends, with the numbers it names`, () => {
      const { status, body } = refusalAnswer(provider, 8_000, 9_000);
      const refusal = contextRefusalOf(status, JSON.stringify(body));
      expect(refusal?.reading).toEqual(expected[provider]);
      // The provider's own message, wherever its server put it (never "status code (no body)").
      expect(refusal!.said).toMatch(/context|too long|exceeds|maximum|must be/i);
      expect(refusal!.message.startsWith(`${status} `)).toBe(true);
    });
  }

  it('other wordings of the same providers', () => {
    const read = (status: number, text: string) => contextRefusalOf(status, text)?.reading;
    // OpenAI's Responses API names no number; OpenRouter and vLLM name both their way.
    expect(
      read(
        400,
        '{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","code":"context_length_exceeded"}}',
      ),
    ).toEqual({ provider: 'openai' });
    expect(read(400, "This endpoint's maximum context length is 8192 tokens. However, you requested about 9000 tokens")).toEqual({
      provider: 'openai',
      windowTokens: 8_192,
      promptTokens: 9_000,
    });
    expect(
      read(
        400,
        "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778).",
      ),
    ).toEqual({ provider: 'openai', windowTokens: 4_096, promptTokens: 2_778 });
    expect(read(400, 'Input prompt (2664 tokens) is too long and exceeds limit of 2048')).toEqual({
      provider: 'vllm',
      windowTokens: 2_048,
      promptTokens: 2_664,
    });
    expect(read(400, 'Prompt length of 5016 is longer than the maximum model length of 4096.')).toEqual({
      provider: 'vllm',
      windowTokens: 4_096,
      promptTokens: 5_016,
    });
    // llama.cpp builds that answer 500, and its older words.
    expect(read(500, '{"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}')).toEqual({
      provider: 'llama.cpp',
    });
    expect(
      read(
        500,
        '{"error":{"code":500,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"exceed_context_size_error","n_prompt_tokens":1407,"n_ctx":256}}',
      ),
    ).toEqual({
      provider: 'llama.cpp',
      windowTokens: 256,
      promptTokens: 1_407,
    });
    expect(read(422, 'Input validation error: `inputs` must have less than 4096 tokens. Given: 5000')).toEqual({
      provider: 'tgi',
      windowTokens: 4_096,
      promptTokens: 5_000,
    });
    expect(read(400, '{"error":"the input length exceeds the context length"}')).toEqual({ provider: 'ollama' });
    expect(read(413, '{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}')).toEqual({
      provider: 'anthropic',
    });
    expect(read(400, 'The number of tokens to keep from the initial prompt is greater than the context length')).toEqual({
      provider: 'lm-studio',
    });
  });

  it('a JSON body is read as JSON: escaped characters are the characters they stand for', () => {
    const escaped =
      '{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 9000 tokens \\u003e 8000 maximum"}}';
    expect(contextRefusalOf(400, escaped)?.reading).toEqual({ provider: 'anthropic', windowTokens: 8_000, promptTokens: 9_000 });
  });

  it('the general rule: a 400, 413 or 422 that speaks of context, tokens or length, with no number read', () => {
    const read = (status: number, text: string) => contextRefusalOf(status, text)?.reading;
    expect(read(400, 'Input is too long for requested model.')).toEqual({ provider: 'general' });
    expect(read(422, 'the prompt has 20000 tokens, the limit is 16000')).toEqual({ provider: 'general' });
    expect(read(400, "Invalid 'messages[3].content': string too long. Expected a string with maximum length 1048576.")).toEqual({
      provider: 'general',
    });
    expect(read(413, '413 status code (no body)')).toEqual({ provider: 'http-413' });
    expect(read(413, '')).toEqual({ provider: 'http-413' });
  });

  it('near misses: rates, quotas, the output limit, other errors and other statuses are no refusal for length', () => {
    const read = (status: number, text: string) => contextRefusalOf(status, text);
    expect(read(429, 'Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.')).toBeUndefined();
    expect(read(400, 'Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.')).toBeUndefined();
    expect(read(400, 'You exceeded your current quota of tokens, please check your plan and billing details.')).toBeUndefined();
    expect(
      read(400, 'max_tokens is too large: 100000. This model supports at most 16384 completion tokens, whereas you provided 100000.'),
    ).toBeUndefined();
    expect(read(400, 'max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet')).toBeUndefined();
    expect(read(400, "Invalid 'tools[0].function.name': string does not match pattern.")).toBeUndefined();
    expect(read(400, 'Invalid authentication token')).toBeUndefined();
    expect(read(401, 'Incorrect API key provided; the context of this request is unauthorised')).toBeUndefined();
    expect(read(500, '{"error":{"message":"upstream exploded","type":"server_error"}}')).toBeUndefined();
    // The words of a shape under another status are read by the general rule only where it applies.
    expect(read(500, 'prompt is too long: 9000 tokens > 8000 maximum')).toBeUndefined();
    // A 2xx answer that carries an error is a refusal only in words a provider sends that way (LM Studio).
    expect(read(200, 'The model endpoint answered with an error: the context length is too long')).toBeUndefined();
    expect(read(200, 'the model is loaded with context length of only 7866 tokens, which is not enough')?.reading).toEqual({
      provider: 'lm-studio',
      windowTokens: 7_866,
    });
    // A number too small to be a window is read as none.
    expect(read(400, "This model's maximum context length is 12 tokens.")?.reading).toEqual({ provider: 'openai' });
  });
});

describe('the refusal rule', () => {
  const rule = (input: Partial<Parameters<typeof afterRefusal>[0]>) =>
    afterRefusal({ windowTokens: 128_000, sentTokens: 40_000, floorTokens: 2_048, fitShare: 0.85, ...input });

  it('a stated window is learned as it is; the request goes again at most half its size, within the share of the window', () => {
    expect(rule({ statedWindowTokens: 16_000 })).toEqual({ windowTokens: 16_000, how: 'stated', budgetTokens: 13_600 });
    expect(rule({ statedWindowTokens: 16_000, sentTokens: 17_000 })).toEqual({ windowTokens: 16_000, how: 'stated', budgetTokens: 8_500 });
    // Stated is the truth, higher or lower than what was believed.
    expect(rule({ windowTokens: 8_192, statedWindowTokens: 32_000, sentTokens: 40_000 })).toEqual({
      windowTokens: 32_000,
      how: 'stated',
      budgetTokens: 20_000,
    });
  });

  it('no number: the window becomes half the refused request, never more than it was, never under the floor', () => {
    expect(rule({})).toEqual({ windowTokens: 20_000, how: 'halved', budgetTokens: 17_000 });
    // Later refusals keep halving.
    expect(rule({ windowTokens: 20_000, sentTokens: 17_000 })).toEqual({ windowTokens: 8_500, how: 'halved', budgetTokens: 7_225 });
    // A request already well under the window: the window still goes down to half of it.
    expect(rule({ windowTokens: 20_000, sentTokens: 3_000 })).toEqual({ windowTokens: 2_048, how: 'halved', budgetTokens: 1_500 });
  });

  it('gives up when the refused request was no larger than the smallest window to believe', () => {
    expect(rule({ windowTokens: 2_048, sentTokens: 2_048 })).toBeUndefined();
    expect(rule({ windowTokens: 4_000, sentTokens: 1_500 })).toBeUndefined();
    expect(rule({ windowTokens: 4_000, sentTokens: 2_049 })).toEqual({ windowTokens: 2_048, how: 'halved', budgetTokens: 1_024 });
    // A stated window under the floor is believed: it gives up only at or under it.
    expect(rule({ statedWindowTokens: 1_000, sentTokens: 1_200 })).toEqual({ windowTokens: 1_000, how: 'stated', budgetTokens: 600 });
    expect(rule({ statedWindowTokens: 1_000, sentTokens: 1_000 })).toBeUndefined();
  });

  it('merging what two workers learned: stated replaces anything, halved only a larger window', () => {
    const w = (tokens: number, how: 'stated' | 'halved', version = 3): LearnedWindow => ({
      version,
      tokens,
      how,
      provider: 'x',
      at: 0,
      said: '',
    });
    expect(mergeLearned(undefined, w(8_000, 'halved', 0))).toEqual(w(8_000, 'halved', 0));
    expect(mergeLearned(w(8_000, 'halved'), w(4_000, 'halved', 0))).toEqual(w(4_000, 'halved'));
    const kept = w(4_000, 'halved');
    expect(mergeLearned(kept, w(8_000, 'halved', 0))).toBe(kept);
    expect(mergeLearned(w(4_000, 'halved'), w(16_000, 'stated', 0))).toEqual(w(16_000, 'stated'));
    expect(mergeLearned(w(16_000, 'stated'), w(8_000, 'halved', 0))).toEqual(w(8_000, 'halved'));
  });
});

describe('the circuit breaker', () => {
  const settings: BreakerSettings = { failureThreshold: 3, cooldownMs: 60_000, probeLeaseMs: 120_000 };
  const fail = { ok: false as const, error: '500 upstream exploded' };

  /** The record after `n` failures from none, at time 0. */
  function failures(n: number): BreakerRecord | undefined {
    let r: BreakerRecord | undefined;
    for (let i = 0; i < n; i++) r = afterCall(r, fail, 0, settings).next ?? r;
    return r;
  }

  it('opens on the threshold-th failure in a row, not before; an answer resets the count', () => {
    expect(afterCall(failures(1), fail, 0, settings).opened).toBe(false);
    expect(failures(2)).toMatchObject({ failures: 2 });
    expect(failures(2)!.openUntil).toBeUndefined();
    const third = afterCall(failures(2), fail, 1_000, settings);
    expect(third).toMatchObject({
      opened: true,
      next: { failures: 3, openUntil: 61_000, openedAt: 1_000, lastError: '500 upstream exploded' },
    });
    // An answer between failures: the count starts again.
    const reset = afterCall(failures(2), { ok: true }, 0, settings).next;
    expect(reset).toEqual({ version: 0, failures: 0 });
    expect(afterCall(afterCall(reset, fail, 0, settings).next, fail, 0, settings).opened).toBe(false);
    // A clean breaker needs no write for an answer.
    expect(afterCall(undefined, { ok: true }, 0, settings)).toEqual({ opened: false, closed: false });
  });

  it('open: calls skip until the cool-down ends, then one probe goes and the others keep skipping while it runs', () => {
    const open = afterCall(failures(2), fail, 0, settings).next!;
    expect(breakerState(open, 10)).toBe('open');
    expect(admit(open, 59_999, settings).admission).toEqual({
      kind: 'skip',
      probeAt: 60_000,
      failures: 3,
      lastError: '500 upstream exploded',
    });
    const probe = admit(open, 60_000, settings);
    expect(probe.admission).toEqual({ kind: 'probe' });
    expect(probe.next).toMatchObject({ probeUntil: 180_000 });
    expect(breakerState(probe.next, 60_001)).toBe('probing');
    expect(admit(probe.next, 60_001, settings).admission).toMatchObject({ kind: 'skip', probeAt: 180_000 });
    // A probe that never reported back: after its lease another call probes.
    expect(admit(probe.next, 180_000, settings).admission).toEqual({ kind: 'probe' });
  });

  it('a probe that answers closes it; one that fails opens it for another cool-down', () => {
    const probing = admit(afterCall(failures(2), fail, 0, settings).next, 60_000, settings).next!;
    expect(afterCall(probing, { ok: true }, 61_000, settings)).toEqual({ next: { version: 0, failures: 0 }, opened: false, closed: true });
    const again = afterCall(probing, fail, 61_000, settings);
    expect(again).toMatchObject({ opened: true, next: { failures: 4, openUntil: 121_000 } });
    expect(again.next!.probeUntil).toBeUndefined();
  });

  it('a call let through before it opened that fails while it is open is counted, and opens nothing again', () => {
    const open = afterCall(failures(2), fail, 0, settings).next!;
    const late = afterCall(open, fail, 5_000, settings);
    expect(late.opened).toBe(false);
    expect(late.next).toMatchObject({ failures: 4, openUntil: 60_000 });
  });

  it('failure_threshold 0: no breaker', () => {
    const off = { ...settings, failureThreshold: 0 };
    expect(afterCall(undefined, fail, 0, off)).toEqual({ opened: false, closed: false });
    expect(admit({ version: 1, failures: 9, openUntil: 99_999 }, 0, off).admission).toEqual({ kind: 'call' });
  });
});
