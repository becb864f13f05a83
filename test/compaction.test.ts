/**
 * The context budget's pure parts (worker/context/): the compaction policy
 * (elide, summarise, cut, drop — never a tool result without its call), the
 * windows (table, settings, learned from a provider's error) and the
 * calibration of token estimates. No Redis, no model.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ELIDED_PREFIX,
  SUMMARY_PREFIX,
  compactMessages,
  cutText,
  elideOldToolResults,
  splitHeadMiddleTail,
  toolResultStub,
  type CompactableMessage,
} from '../worker/context/compaction.ts';
import { CHARS_PER_TOKEN, TokenCalibration, estimateTextTokens } from '../worker/context/token-estimate.ts';
import { ESTIMATE_COUNTER, countMessageTokens, countRequestTokens, encodingOf, tokenCounterFor } from '../worker/context/token-count.ts';
import { countTokens as cl100k } from 'gpt-tokenizer/encoding/cl100k_base';
import { countTokens as o200k } from 'gpt-tokenizer/encoding/o200k_base';

type M = CompactableMessage & { tool_calls?: Array<{ name: string; arguments: string }> };

const user = (content: string): M => ({ role: 'user', content });
const assistant = (content: string, calls: string[] = []): M => ({
  role: 'assistant',
  content,
  ...(calls.length > 0 ? { tool_calls: calls.map((id) => ({ name: 'read_file', arguments: `{"id":"${id}"}` })) } : {}),
});
const tool = (id: string, content: string): M => ({ role: 'tool', content, tool_call_id: id, name: 'read_file' });
const big = (chars: number, word = 'log line ') => word.repeat(Math.ceil(chars / word.length)).slice(0, chars);
const make = (fields: { role: 'user'; content: string }): M => fields;
const estimate = (ms: readonly M[]) => countRequestTokens(ESTIMATE_COUNTER, null, ms);

/** Every tool result follows its assistant call (or another result of the same call). */
function noOrphans(ms: readonly M[]): boolean {
  return ms.every(
    (m, i) =>
      m.role !== 'tool' ||
      (i > 0 && (ms[i - 1]!.role === 'tool' || (ms[i - 1]!.role === 'assistant' && (ms[i - 1]!.tool_calls?.length ?? 0) > 0))),
  );
}

/** A task, then `rounds` tool rounds (assistant call + a result of `resultChars`), then a new question. */
function session(rounds: number, resultChars: number): M[] {
  const out: M[] = [user('Watch the CI log and tell me when the build is green.')];
  for (let i = 0; i < rounds; i++) {
    out.push(assistant('', [`c${i}`]), tool(`c${i}`, big(resultChars)), assistant(`Round ${i}: still red.`));
  }
  out.push(user('Is it green now?'));
  return out;
}

describe('elide (step 1)', () => {
  it('stubs tool results older than the recent ones; short results and recent ones stay', () => {
    const ms = [
      user('task'),
      assistant('', ['a']),
      tool('a', big(5_000)),
      assistant('', ['b']),
      tool('b', 'short'),
      assistant('', ['c']),
      tool('c', big(5_000)),
    ];
    const { messages, elided } = elideOldToolResults(ms, 2);
    expect(elided).toBe(1);
    expect(messages[2]!.content).toBe(toolResultStub(ms[2]!));
    expect(messages[2]!.content).toMatch(/^\[read_file result elided to save context: 5000 characters; first line: "log line/);
    expect(messages[2]!.tool_call_id).toBe('a'); // still answers its call
    expect(messages[4]!.content).toBe('short');
    expect(messages[6]!.content).toBe(ms[6]!.content);
  });

  it('is idempotent: a stub is not stubbed again', () => {
    const once = elideOldToolResults(session(3, 4_000), 1).messages;
    const twice = elideOldToolResults(once, 1);
    expect(twice.elided).toBe(0);
    expect(twice.messages).toEqual(once);
  });
});

describe('split (step 2) never orphans a tool result', () => {
  it('moves the tail back to the call when it would start on a result', () => {
    const ms = [user('task'), assistant('a'), user('more'), assistant('', ['x', 'y']), tool('x', 'rx'), tool('y', 'ry'), user('now?')];
    const split = splitHeadMiddleTail(ms, 3)!; // the last 3 start on tool y
    expect(split.head).toEqual([ms[0]]);
    expect(split.tail[0]).toBe(ms[3]);
    expect(split.middle).toEqual([ms[1], ms[2]]);
  });

  it('returns null when there is nothing to summarise', () => {
    expect(splitHeadMiddleTail([user('task'), assistant('ok'), user('now?')], 8)).toBeNull();
  });

  it('property: head + middle + tail is the input, and the tail starts on no tool result', () => {
    const role = fc.constantFrom('user', 'assistant', 'call', 'tool');
    fc.assert(
      fc.property(fc.array(role, { minLength: 1, maxLength: 40 }), fc.integer({ min: 1, max: 12 }), (roles, keep) => {
        const ms: M[] = roles.map((r, i) =>
          r === 'call' ? assistant('', [`c${i}`]) : r === 'tool' ? tool(`c${i}`, 'r') : r === 'user' ? user(`u${i}`) : assistant(`a${i}`),
        );
        const split = splitHeadMiddleTail(ms, keep);
        if (!split) return;
        expect([...split.head, ...split.middle, ...split.tail]).toEqual(ms);
        const firstUser = ms.findIndex((m) => m.role === 'user');
        if (split.tail.length > 0 && ms.length - split.tail.length > firstUser + 1) expect(split.tail[0]!.role).not.toBe('tool');
      }),
    );
  });
});

describe('compactMessages', () => {
  it('leaves messages that fit alone (no report)', async () => {
    const ms = session(2, 100);
    const r = await compactMessages(ms, { budgetTokens: 10_000, keepRecent: 4, estimate, make });
    expect(r.report).toBeUndefined();
    expect(r.messages).toEqual(ms);
  });

  it('stubs old tool results first and stops there when that is enough (no model call)', async () => {
    let summaries = 0;
    const r = await compactMessages(session(10, 3_000), {
      budgetTokens: 2_000,
      keepRecent: 4,
      estimate,
      make,
      summarise: async () => `${++summaries}`,
    });
    expect(summaries).toBe(0);
    expect(r.report).toMatchObject({ elided: 9, summarised: 0, cut: 0, dropped: 0 });
  });

  it('summarises the middle between the head and the recent tail when stubs are not enough', async () => {
    const ms = session(40, 3_000);
    const seen: M[][] = [];
    const r = await compactMessages(ms, {
      budgetTokens: 2_000,
      keepRecent: 4,
      estimate,
      make,
      summarise: async (middle) => {
        seen.push([...middle]);
        return 'The build was red in every round.';
      },
    });
    expect(r.messages[0]).toEqual(ms[0]);
    expect(r.messages[1]!.content).toMatch(new RegExp(`^\\${SUMMARY_PREFIX}: \\d+ messages`));
    expect(r.messages[1]!.content).toContain('The build was red in every round.');
    expect(r.messages.at(-1)).toEqual(ms.at(-1));
    expect(r.report).toMatchObject({ summarised: seen[0]!.length, cut: 0, dropped: 0 });
    expect(r.report!.afterTokens).toBeLessThanOrEqual(2_000);
    expect(noOrphans(r.messages)).toBe(true);
  });

  it('a summary that fails leaves a marker and the turn goes on', async () => {
    const ms = session(10, 3_000);
    const r = await compactMessages(ms, {
      budgetTokens: 1_000,
      keepRecent: 4,
      estimate,
      make,
      summarise: async () => {
        throw new Error('summariser down');
      },
    });
    expect(r.messages[1]!.content.startsWith(ELIDED_PREFIX)).toBe(true);
    expect(r.report).toMatchObject({ summaryError: 'summariser down' });
    expect(r.report!.summarised).toBeGreaterThan(0);
    expect(estimate(r.messages)).toBeLessThanOrEqual(1_000);
    expect(noOrphans(r.messages)).toBe(true);
  });

  it('an empty summary counts as failed', async () => {
    const r = await compactMessages(session(10, 3_000), {
      budgetTokens: 1_000,
      keepRecent: 4,
      estimate,
      make,
      summarise: async () => '  ',
    });
    expect(r.report!.summaryError).toBe('the summary was empty');
  });

  it('a single input larger than the budget is cut to fit, with a marker', async () => {
    const ms = [user(big(60_000, 'the quick brown fox '))];
    const r = await compactMessages(ms, { budgetTokens: 2_000, keepRecent: 1, estimate, make });
    expect(r.report).toMatchObject({ cut: 1, dropped: 0 });
    expect(estimate(r.messages)).toBeLessThanOrEqual(2_000);
    expect(r.messages[0]!.content).toMatch(
      /\[… cut to fit the model's context window: [\d,]+ of 60,000 characters kept, lines 1–1 left out …\]\n$/,
    );
    expect(r.messages[0]!.content.startsWith('the quick brown fox')).toBe(true);
  });

  it('a recent tool result over the budget is cut, not stubbed; its call stays', async () => {
    const ms = [user('read the log'), assistant('', ['a']), tool('a', big(30_000))];
    const r = await compactMessages(ms, { budgetTokens: 3_000, keepRecent: 2, estimate, make });
    expect(r.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
    expect(r.messages[2]!.content).toContain('cut to fit');
    expect(estimate(r.messages)).toBeLessThanOrEqual(3_000);
  });

  it("drops the oldest messages after the head with their results, never orphaning the last call's results", async () => {
    // Many small messages: nothing to stub, nothing large enough to cut.
    const ms: M[] = [user('task')];
    for (let i = 0; i < 60; i++) ms.push(assistant('', [`c${i}`]), tool(`c${i}`, `result ${i}`));
    const r = await compactMessages(ms, { budgetTokens: 300, keepRecent: 2, estimate, make });
    expect(r.report!.dropped).toBeGreaterThan(0);
    expect(r.messages[0]).toEqual(ms[0]);
    expect(r.messages.at(-1)).toEqual(ms.at(-1));
    expect(noOrphans(r.messages)).toBe(true);
    expect(estimate(r.messages)).toBeLessThanOrEqual(300);
  });

  it('keeps the current round whole even when it alone is over the budget', async () => {
    const ms = [user('task'), assistant('', ['a', 'b']), tool('a', 'short a'), tool('b', 'short b')];
    const r = await compactMessages(ms, { budgetTokens: 10, keepRecent: 3, estimate, make });
    expect(noOrphans(r.messages)).toBe(true);
    expect(r.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'tool']);
  });

  it('property: whatever the budget, no tool result is left without its call', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 50, max: 6_000 }),
        fc.integer({ min: 100, max: 8_000 }),
        fc.integer({ min: 1, max: 10 }),
        async (rounds, resultChars, budget, keep) => {
          const r = await compactMessages(session(rounds, resultChars), { budgetTokens: budget, keepRecent: keep, estimate, make });
          expect(noOrphans(r.messages)).toBe(true);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('cutText keeps about the tokens asked for', () => {
    const text = big(9_000);
    const cut = cutText(text, 1_000);
    expect(cut.length).toBeLessThanOrEqual(1_000 * CHARS_PER_TOKEN + 10);
    expect(cutText('short', 1_000)).toBe('short');
  });
});

describe('token estimates', () => {
  it('count content and tool call names and arguments, plus a per-message overhead and the reply priming', () => {
    expect(estimateTextTokens('abcdef')).toBe(2);
    const plain = countMessageTokens(ESTIMATE_COUNTER, { role: 'user', content: 'x'.repeat(30) });
    const withCall = countMessageTokens(ESTIMATE_COUNTER, {
      role: 'assistant',
      content: '',
      tool_calls: [{ name: 'read_file', arguments: 'x'.repeat(300) }],
    });
    expect(plain).toBe(4 + 10);
    expect(withCall).toBe(4 + 3 + 100);
    expect(countRequestTokens(ESTIMATE_COUNTER, null, [{ role: 'user', content: 'x'.repeat(30) }])).toBe(3 + plain);
  });

  it('calibration scales by the last observed ratio per model, never below 1, at most 4', () => {
    const c = new TokenCalibration();
    expect(c.scale('m', 100)).toBe(100);
    c.observe('m', 100, 150);
    expect(c.scale('m', 1_000)).toBe(1_500);
    expect(c.scale('other', 1_000)).toBe(1_000);
    c.observe('m', 100, 60); // the estimate was high: it stays (never low)
    expect(c.scale('m', 1_000)).toBe(1_000);
    c.observe('m', 100, 10_000);
    expect(c.scale('m', 1_000)).toBe(4_000);
    c.observe('m', 0, 50); // nothing to learn from
    expect(c.scale('m', 1_000)).toBe(4_000);
  });
});

describe("token counts by the model's tokenizer", () => {
  it('names the encoding of OpenAI families (o200k, cl100k), none for other models', () => {
    for (const m of [
      'gpt-4o',
      'gpt-4o-mini',
      'openai/GPT-4.1-mini',
      'gpt-4.5-preview',
      'gpt-5',
      'chatgpt-4o-latest',
      'o1',
      'o3-mini',
      'o4-mini',
    ])
      expect(encodingOf(m)).toBe('o200k_base');
    for (const m of ['gpt-4', 'gpt-4-turbo', 'gpt-4-32k', 'gpt-3.5-turbo']) expect(encodingOf(m)).toBe('cl100k_base');
    for (const m of ['claude-3-5-sonnet', 'qwen2.5-32b', 'my-local-model', 'gpt-oss-20b', 'omni-moderation-latest'])
      expect(encodingOf(m)).toBeUndefined();
  });

  it('counts text as gpt-tokenizer does (special-token text as plain text); the estimate for the rest', async () => {
    const text = 'La compilation continue — 好的, ünïcödé ✓ <|endoftext|> pkg/service-3/handler.go ... ok (7 ms)';
    const plain = { disallowedSpecial: new Set<string>() };
    expect((await tokenCounterFor('gpt-4o-mini')).text(text)).toBe(o200k(text, plain));
    expect((await tokenCounterFor('gpt-3.5-turbo')).text(text)).toBe(cl100k(text, plain));
    expect(o200k(text, plain)).not.toBe(cl100k(text, plain));
    expect(await tokenCounterFor('my-local-model')).toBe(ESTIMATE_COUNTER);
  });
});
