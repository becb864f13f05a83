/**
 * One `openai` client per model target serves every call (worker/turn-runners/model-transport.ts): each
 * call's settings ride in its own request options (`callFetchOptions`), so two calls at once through the
 * same client and `fetch` keep their retries, waits and refusals apart. Real client, real HTTP server.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelFetch } from '../worker/turn-runners/model-fetch.ts';
import { callFetchOptions, ContextRefusal, retryingFetch } from '../worker/turn-runners/model-transport.ts';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';

let model: FakeOpenAI;
let client: OpenAI;

beforeAll(async () => {
  model = await startFakeOpenAI({ contextWindow: 2_000 });
  // As the agent runner builds a target's client.
  client = new OpenAI({ baseURL: model.baseUrl, apiKey: 'test', maxRetries: 3, fetch: retryingFetch(modelFetch) });
});
afterAll(async () => {
  await model.close();
});

/** A call's settings that count its retries and keep its refusal. */
function call() {
  const seen = { retries: 0, refusal: undefined as ContextRefusal | undefined };
  const fetchOptions = callFetchOptions({
    maxRetries: 3,
    deadlineAt: Date.now() + 30_000,
    signal: turn.signal,
    onRetry: () => seen.retries++,
    onRefusal: (r) => (seen.refusal = r),
  });
  return { seen, fetchOptions };
}

/** The turn's signal, given to the client as the agent runner gives it. */
const turn = new AbortController();

const ask = (text: string, fetchOptions: ReturnType<typeof callFetchOptions>) =>
  client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: text }] }, { fetchOptions, signal: turn.signal });

describe('one client, many calls', () => {
  it('two calls at once keep their own retries and refusal', async () => {
    const failuresLeft = new Map([
      ['flaky', 2],
      ['steady', 0],
    ]);
    model.respond((req) => {
      const text = String(req.messages.at(-1)?.content);
      const left = failuresLeft.get(text) ?? 0;
      if (left > 0) {
        failuresLeft.set(text, left - 1);
        return { status: 429, message: 'slow down', retryable: true, headers: { 'retry-after-ms': '20' } };
      }
      return { delayMs: 50, text: `ok ${text}` };
    });
    const flaky = call();
    const steady = call();
    const big = call();
    const [a, b, c] = await Promise.allSettled([
      ask('flaky', flaky.fetchOptions),
      ask('steady', steady.fetchOptions),
      ask('x '.repeat(5_000), big.fetchOptions),
    ]);
    expect(a.status === 'fulfilled' && a.value.choices[0]?.message.content).toBe('ok flaky');
    expect(b.status === 'fulfilled' && b.value.choices[0]?.message.content).toBe('ok steady');
    expect(c.status).toBe('rejected');
    expect(flaky.seen.retries).toBe(2);
    expect(steady.seen.retries).toBe(0);
    expect(big.seen.retries).toBe(0);
    expect(big.seen.refusal).toBeInstanceOf(ContextRefusal);
    expect(flaky.seen.refusal).toBeUndefined();
    expect(steady.seen.refusal).toBeUndefined();
  });

  it("a request without a call's settings is passed on as it is (the client's own retries)", async () => {
    let answered = 0;
    model.respond(() =>
      answered++ === 0 ? { status: 503, message: 'busy', retryable: true, headers: { 'retry-after-ms': '10' } } : 'fine',
    );
    const res = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'plain' }] });
    expect(res.choices[0]?.message.content).toBe('fine');
    expect(answered).toBe(2);
  });
});
