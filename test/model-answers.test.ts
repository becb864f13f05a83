/**
 * What a model endpoint answers, checked before the agent reads it
 * (worker/turn-runners/model-answer.ts):
 *
 * - F27 (round 3): an endpoint answering 200 with an `{"error": …}` body fails the turn with the
 *   endpoint's own message (a loop tick's failure notice quotes it), never "Cannot read
 *   properties of undefined"; the same for any 200 that is no chat completion, streamed or not.
 * - Streamed answers assembled like the OpenAI SDKs (F25's rules, unit by unit): deltas without
 *   `index`, repeated ids and names, late ids, several calls on one index, and what cannot be
 *   assembled.
 */
import { describe, expect, it } from 'vitest';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { AgentRunner } from '../worker/turn-runners/agent-runner.ts';
import { MalformedAnswerError, StreamAssembler, StreamAssemblyError, checkCompletion } from '../worker/turn-runners/model-answer.ts';
import { TurnError } from '../scheduler/errors/turn-error.ts';
import { telegramOutboundQueue } from '../scheduler/delivery/outbound.ts';
import { startWorkerStack, waitFor, waitForEvents } from './support/stack.ts';
import { startFakeOpenAI, type ScriptedReply } from './support/fake-openai.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const cleanups = cleanupAfterEach();

const QUOTA = {
  error: { message: 'Quota exceeded for key sk-…42; upgrade your plan', type: 'insufficient_quota', code: 'insufficient_quota' },
};

describe('F27: a 200 answer that is no chat completion', () => {
  it("on a loop tick: the failure notice quotes the endpoint's own error message", async () => {
    const model = await startFakeOpenAI();
    model.respond(() => ({ raw: QUOTA }));
    cleanups.push(() => model.close());
    const { c } = await startWorkerStack(cleanups, { 'agent.base_url': model.baseUrl, 'agent.api_key': 'k' });
    const route = {
      origin: { surface: 'telegram' as const, route: { platform: 'telegram', chatId: '2727' } },
      runner: { kind: 'agent' as const },
    };
    await c.schedules.set('f27', 'loop', { prompt: 'check the build', intervalSeconds: 60, times: null, until: null, notes: [] }, route);
    const [failed] = await waitForEvents(c, 'f27', 'tick.failed', 1);
    expect(failed!.data.error).toBe(
      'The model endpoint answered with an error: Quota exceeded for key sk-…42; upgrade your plan (insufficient_quota)',
    );
    const outbound = telegramOutboundQueue(c.keys, c.redis);
    cleanups.push(() => outbound.close());
    const notice = await waitFor(
      async () => {
        const jobs = await outbound.getJobs(['waiting', 'delayed', 'prioritized']);
        return jobs[0]?.data.text;
      },
      10_000,
      'the failure notice',
    );
    expect(notice).toContain('Quota exceeded for key sk-…42; upgrade your plan');
    expect(notice).not.toMatch(/Cannot read properties|undefined/);
  });

  const runner = (baseUrl: string) => new AgentRunner({ baseUrl, apiKey: 'k', model: 'm', timeoutSeconds: 10, maxRetries: 0 });
  const cases: Array<[string, ScriptedReply, RegExp]> = [
    ['an {"error": {...}} object', { raw: QUOTA }, /^The model endpoint answered with an error: Quota exceeded .*\(insufficient_quota\)$/],
    [
      'an {"error": "..."} string',
      { raw: { error: 'model overloaded, try later' } },
      /^The model endpoint answered with an error: model overloaded, try later$/,
    ],
    ['an empty object', { raw: {} }, /^The model endpoint sent an answer that is not a chat completion: \{\}$/],
    ['no choices', { raw: { id: 'x', object: 'chat.completion', choices: [] } }, /^The model endpoint sent an answer with no choices: /],
    [
      'a 200 HTML page',
      { raw: '<html>502 Bad Gateway</html>', contentType: 'text/html' },
      /^The model endpoint sent an answer that is not a chat completion: <html>502 Bad Gateway<\/html>$/,
    ],
  ];
  for (const [name, reply, message] of cases) {
    it(`${name}: a model error quoting it, streamed or not`, async () => {
      const model = await startFakeOpenAI();
      cleanups.push(() => model.close());
      model.respond(() => reply);
      const agent = runner(model.baseUrl);
      for (const onDelta of [undefined, () => {}]) {
        const err = await agent
          .complete([{ role: 'user', content: 'hi' }], new AbortController().signal, 's', { ...(onDelta ? { onDelta } : {}) })
          .then(
            () => {
              throw new Error('completed');
            },
            (e: unknown) => e,
          );
        expect(err).toBeInstanceOf(TurnError);
        expect((err as TurnError).kind).toBe('model');
        expect((err as TurnError).message).toMatch(message);
      }
    });
  }
});

describe('checkCompletion', () => {
  it('passes a chat completion through and throws MalformedAnswerError for anything else', () => {
    const ok = {
      id: 'a',
      object: 'chat.completion',
      created: 0,
      model: 'm',
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'hi' } }],
    };
    expect(checkCompletion(ok)).toBe(ok);
    expect(() => checkCompletion(null)).toThrow(MalformedAnswerError);
    expect(() => checkCompletion({ choices: [{ index: 0 }] })).toThrow(/a choice without a message/);
    expect(() => checkCompletion({ error: { message: 'x'.repeat(1000) } })).toThrow(/^The model endpoint answered with an error: x{300}$/);
  });
});

/** A chunk of choice 0 with this delta. */
function chunk(delta: Record<string, unknown>, finish: string | null = null): ChatCompletionChunk {
  return {
    id: 'c',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'm',
    choices: [{ index: 0, delta, finish_reason: finish }],
  } as ChatCompletionChunk;
}

function assemble(deltas: Array<Record<string, unknown>>, finish = 'tool_calls') {
  const a = new StreamAssembler();
  for (const d of deltas) a.add(chunk({ tool_calls: [d] }));
  a.add(chunk({}, finish));
  return a.finish().choices[0]!.message.tool_calls!.map((c) => (c.type === 'function' ? { id: c.id, ...c.function } : null));
}

describe('StreamAssembler', () => {
  it('content deltas in order, each handed on; usage from the last chunk; finish_reason kept', () => {
    const seen: string[] = [];
    const a = new StreamAssembler((t) => seen.push(t));
    a.add(chunk({ role: 'assistant', content: '' }));
    a.add(chunk({ content: 'Hel' }));
    a.add(chunk({ content: 'lo' }));
    a.add(chunk({}, 'length'));
    a.add({
      id: 'c',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'm',
      choices: [],
      usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
    });
    const done = a.finish();
    expect(seen).toEqual(['Hel', 'lo']);
    expect(done.choices[0]).toMatchObject({ finish_reason: 'length', message: { content: 'Hello' } });
    expect(done.usage).toEqual({ prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 });
  });

  it("OpenAI's own form: index, id and name first, arguments after", () => {
    expect(
      assemble([
        { index: 0, id: 'call_a', type: 'function', function: { name: 'f', arguments: '{"x":' } },
        { index: 0, function: { arguments: '1}' } },
        { index: 1, id: 'call_b', type: 'function', function: { name: 'g', arguments: '{}' } },
      ]),
    ).toEqual([
      { id: 'call_a', name: 'f', arguments: '{"x":1}' },
      { id: 'call_b', name: 'g', arguments: '{}' },
    ]);
  });

  it('no index: the continuation joins the call before it; a new id opens the next call', () => {
    expect(
      assemble([
        { id: 'call_a', type: 'function', function: { name: 'f', arguments: '{"x":' } },
        { function: { arguments: '1}' } },
        { id: 'call_b', type: 'function', function: { name: 'g', arguments: '{"y":' } },
        { function: { arguments: '2}' } },
      ]),
    ).toEqual([
      { id: 'call_a', name: 'f', arguments: '{"x":1}' },
      { id: 'call_b', name: 'g', arguments: '{"y":2}' },
    ]);
  });

  it('id and name repeated on the last delta: one call, the name not doubled', () => {
    expect(
      assemble([
        { index: 0, id: 'call_a', type: 'function', function: { name: 'read_file', arguments: '{"path":' } },
        { index: 0, id: 'call_a', type: 'function', function: { name: 'read_file', arguments: '"a.txt"}' } },
      ]),
    ).toEqual([{ id: 'call_a', name: 'read_file', arguments: '{"path":"a.txt"}' }]);
  });

  it('a last delta that repeats the whole arguments changes nothing', () => {
    expect(
      assemble([
        { index: 0, id: 'call_a', function: { name: 'f', arguments: '{"x":' } },
        { index: 0, function: { arguments: '1}' } },
        { index: 0, id: 'call_a', function: { name: 'f', arguments: '{"x":1}' } },
      ]),
    ).toEqual([{ id: 'call_a', name: 'f', arguments: '{"x":1}' }]);
  });

  it('several calls on one index with their own ids (some servers) stay several calls; an empty id continues', () => {
    expect(
      assemble([
        { index: 0, id: 'call_a', function: { name: 'f', arguments: '' } },
        { index: 0, id: '', function: { arguments: '{}' } },
        { index: 0, id: 'call_b', function: { name: 'g', arguments: '' } },
        { index: 0, id: '', function: { arguments: '{"z":3}' } },
      ]),
    ).toEqual([
      { id: 'call_a', name: 'f', arguments: '{}' },
      { id: 'call_b', name: 'g', arguments: '{"z":3}' },
    ]);
  });

  it('an id that comes after the first delta names that call; a call without any id gets one', () => {
    expect(
      assemble([
        { index: 0, function: { name: 'f', arguments: '{' } },
        { index: 0, id: 'call_late', function: { arguments: '}' } },
      ]),
    ).toEqual([{ id: 'call_late', name: 'f', arguments: '{}' }]);
    expect(assemble([{ index: 0, function: { name: 'f', arguments: '{}' } }])).toEqual([{ id: 'call_0', name: 'f', arguments: '{}' }]);
  });

  it('what cannot be assembled is an error, never an empty answer', () => {
    expect(() => assemble([{ index: 0, id: 'a', function: { arguments: '{}' } }])).toThrow(/tool call 1 of 1 has no function name/);
    const noCalls = new StreamAssembler();
    noCalls.add(chunk({}, 'tool_calls'));
    expect(() => noCalls.finish()).toThrow(/"tool_calls" but no tool call/);
    const cut = new StreamAssembler();
    cut.add(chunk({ content: 'half an ans' }));
    expect(() => cut.finish()).toThrow(/without a finish_reason/);
    expect(() => new StreamAssembler().finish()).toThrow(StreamAssemblyError);
  });
});
