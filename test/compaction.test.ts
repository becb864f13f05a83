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
  elidedMarker,
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

/** An assistant message calling tools by name, each call with an id its result names. */
const calling = (...calls: Array<[id: string, name: string, args: string]>): M => ({
  role: 'assistant',
  content: '',
  tool_calls: calls.map(([id, name, args]) => ({ id, name, arguments: args })),
});
const named = (name: string, id: string, content: string): M => ({ role: 'tool', content, tool_call_id: id, name });
const unnamed = (id: string, content: string): M => ({ role: 'tool', content, tool_call_id: id });

describe('the stub of an old tool result', () => {
  it('names the tool (the result’s name, else the call’s, else "tool"), the size and the first line cut to 120 characters', () => {
    const content = `${'x'.repeat(130)}\nsecond line`;
    expect(toolResultStub(named('read_file', 'a', content))).toBe(
      `[read_file result elided to save context: ${content.length} characters; first line: "${'x'.repeat(120)}"]`,
    );
    expect(toolResultStub(unnamed('a', 'one line'), { name: 'http_get', arguments: '{"url":"u"}' })).toBe(
      '[http_get result elided to save context: 8 characters; first line: "one line"; to see it again, call http_get {"url":"u"}]',
    );
    expect(toolResultStub(unnamed('a', 'one line'))).toBe('[tool result elided to save context: 8 characters; first line: "one line"]');
  });

  it('repeats the call’s arguments up to 1,000 characters, empty ones as {}; longer ones are cut and said so', () => {
    const m = named('ci', 'a', 'out');
    expect(toolResultStub(m, { name: 'ci', arguments: '  ' })).toMatch(/; to see it again, call ci \{\}\]$/);
    const fits = `"${'a'.repeat(998)}"`;
    expect(toolResultStub(m, { name: 'ci', arguments: ` ${fits} ` })).toMatch(new RegExp(`call ci ${fits}\\]$`));
    const over = `"${'a'.repeat(999)}"`;
    expect(toolResultStub(m, { name: 'ci', arguments: over })).toMatch(
      new RegExp(`call ci ${over.slice(0, 1_000)}… \\(arguments cut: 1001 characters\\)\\]$`),
    );
  });

  it('stubs results over 240 characters only, with the call found by its id, and only when the stub is shorter', () => {
    const ms = [
      user('task'),
      calling(['a', 'read_file', '{"path":"a"}'], ['b', 'read_file', '{"path":"b"}'], ['c', 'ci', `{"x":"${'y'.repeat(900)}"}`]),
      named('read_file', 'a', 'a'.repeat(240)),
      named('read_file', 'b', 'b'.repeat(241)),
      named('ci', 'c', 'c'.repeat(300)), // its stub (with the 900-character call) is longer: kept
      user('now?'),
    ];
    const { messages, elided } = elideOldToolResults(ms, 1);
    expect(elided).toBe(1);
    expect(messages[2]).toBe(ms[2]);
    expect(messages[3]!.content).toBe(toolResultStub(ms[3]!, { name: 'read_file', arguments: '{"path":"b"}' }));
    expect(messages[4]).toBe(ms[4]);
    // the recent ones and messages that are not tool results stay
    expect(elideOldToolResults([user('t'), calling(['a', 'x', '{}']), named('x', 'a', big(1_000))], 1).elided).toBe(0);
    expect(elideOldToolResults([user(big(1_000)), assistant(big(1_000)), user('q')], 1).elided).toBe(0);
  });

  it('a stub is known by its bracket and its words: a result that only starts with "[" or only quotes the words is stubbed', () => {
    const words = `the log said: elided to save context ${'z'.repeat(300)}`;
    const ms = [
      user('task'),
      calling(['a', 'x', '{}'], ['b', 'x', '{}']),
      named('x', 'a', `[${'1,'.repeat(200)}]`),
      named('x', 'b', words),
      user('q'),
    ];
    expect(elideOldToolResults(ms, 1).elided).toBe(2);
  });
});

describe('the marker of a failed summary', () => {
  it('says what was lost: the users’ requests (first and last), the replies (the last), the tool calls by name with the last one’s arguments', () => {
    const lost: M[] = [
      user('  Deploy the branch\nwith care'),
      assistant('   '),
      calling(['a', 'read_file', '{"path":"x"}']),
      named('read_file', 'a', 'x'),
      assistant('Reading done.'),
      calling(['b', 'read_file', '{"path":"y"}'], ['c', 'http_get', '{"url":"https://example.com"}']),
      user('And then?'),
      assistant('Deployed.'),
    ];
    expect(elidedMarker(lost)).toBe(
      `${ELIDED_PREFIX}: 8 messages were removed to fit the model's context window and their summary could not be written, so they are lost: ` +
        '2 user messages (first "Deploy the branch", last "And then?"); 2 replies (last "Deployed."); ' +
        '3 tool calls and their results (read_file ×2, http_get; the last: http_get {"url":"https://example.com"}). ' +
        'Ask again or run a tool again for what is still needed.]',
    );
  });

  it('in the singular for one of each; quotes and the last arguments cut at 100 characters', () => {
    const long = 'q'.repeat(101);
    const args = `{"a":"${'b'.repeat(93)}"}`; // 101 characters
    expect(args.length).toBe(101);
    const marker = elidedMarker([user(long), calling(['a', 'ci', args]), assistant('r'.repeat(100))]);
    expect(marker).toContain(`1 user message ("${'q'.repeat(99)}…")`);
    expect(marker).toContain(`1 reply (last "${'r'.repeat(100)}")`);
    expect(marker).toContain(`1 tool call and their results (ci; the last: ci ${args.slice(0, 99)}…)`);
    const exact = `{"a":"${'b'.repeat(92)}"}`;
    expect(elidedMarker([calling(['a', 'ci', exact])])).toContain(`(ci; the last: ci ${exact})`);
    expect(elidedMarker([user('only')])).toMatch(/so they are lost: 1 user message \("only"\)\. Ask again/);
  });
});

describe('the split with a token bound on the tail', () => {
  it('a recent message over the bound goes to the middle, with the results of its call', () => {
    const ms = [user('task'), calling(['a', 'read_file', '{}']), named('read_file', 'a', big(3_000)), user('q')];
    expect(splitHeadMiddleTail(ms, 3)).toBeNull();
    const split = splitHeadMiddleTail(ms, 3, { tailTokens: 50, counter: ESTIMATE_COUNTER })!;
    expect(split.head).toEqual([ms[0]]);
    expect(split.middle).toEqual([ms[1], ms[2]]);
    expect(split.tail).toEqual([ms[3]]);
    // everything fits the bound: the tail is the last keepRecent
    expect(splitHeadMiddleTail([...ms, assistant('a'), user('b')], 2, { tailTokens: 10_000, counter: ESTIMATE_COUNTER })!.tail).toEqual([
      assistant('a'),
      user('b'),
    ]);
  });

  it('the bound is inclusive: a tail of exactly the bound stays, one token less moves its oldest message out', () => {
    const ms = [user('task'), assistant('a'), assistant('b'), assistant('c'), user('d')];
    const tokens = countMessageTokens(ESTIMATE_COUNTER, ms[3]!) + countMessageTokens(ESTIMATE_COUNTER, ms[4]!);
    expect(splitHeadMiddleTail(ms, 2, { tailTokens: tokens, counter: ESTIMATE_COUNTER })!.tail).toEqual([ms[3], ms[4]]);
    expect(splitHeadMiddleTail(ms, 2, { tailTokens: tokens - 1, counter: ESTIMATE_COUNTER })!.tail).toEqual([ms[4]]);
    expect(splitHeadMiddleTail(ms, 2, { tailTokens: 0, counter: ESTIMATE_COUNTER })!.tail).toEqual([]);
  });

  it('a middle of two messages is split, of one is not; without a user message there is no head', () => {
    const two = [user('task'), assistant('a'), assistant('b'), user('q')];
    expect(splitHeadMiddleTail(two, 1)!.middle).toEqual([two[1], two[2]]);
    expect(splitHeadMiddleTail(two, 2)).toBeNull();
    const headless = [assistant('a'), assistant('b'), assistant('c')];
    expect(splitHeadMiddleTail(headless, 1)).toEqual({ head: [], middle: [headless[0], headless[1]], tail: [headless[2]] });
  });
});

describe('when compaction starts, and what it reports', () => {
  const ms = session(3, 600);
  const total = estimate(ms);

  it('over the budget by default, at or over the threshold when one is given', async () => {
    expect((await compactMessages(ms, { budgetTokens: total, keepRecent: 2, estimate, make })).report).toBeUndefined();
    expect((await compactMessages(ms, { budgetTokens: total - 1, keepRecent: 2, estimate, make })).report).toBeDefined();
    // A threshold above the target (as agent.compaction requires): at it, compaction; one token under, none.
    const at = await compactMessages(ms, { budgetTokens: total - 100, thresholdTokens: total, keepRecent: 2, estimate, make });
    expect(at.report).toMatchObject({ beforeTokens: total, elided: 3, summarised: 0, cut: 0, dropped: 0 });
    expect(at.report!.afterTokens).toBe(estimate(at.messages));
    expect(at.report!.afterTokens).toBeLessThanOrEqual(total - 100);
    const under = await compactMessages(ms, { budgetTokens: total - 100, thresholdTokens: total + 1, keepRecent: 2, estimate, make });
    expect(under.report).toBeUndefined();
    expect(under.messages).toEqual(ms);
  });

  it('more messages than maxMessages summarise down to it even when the tokens fit', async () => {
    let middle: readonly M[] = [];
    const r = await compactMessages(ms, {
      budgetTokens: 10_000,
      keepRecent: 2,
      maxMessages: ms.length - 1,
      estimate,
      make,
      summarise: async (m) => {
        middle = m;
        return ' all red \n';
      },
    });
    expect(middle.length).toBe(ms.length - 3);
    expect(r.messages).toEqual([
      ms[0],
      { role: 'user', content: `${SUMMARY_PREFIX}: ${middle.length} messages, written to fit the model's context window]\nall red` },
      ...ms.slice(-2),
    ]);
    expect(r.report).toMatchObject({ summarised: middle.length, elided: 3, dropped: 0 });
    expect(r.report!.afterTokens).toBe(estimate(r.messages));
    expect(
      (await compactMessages(ms, { budgetTokens: 10_000, keepRecent: 2, maxMessages: ms.length, estimate, make })).report,
    ).toBeUndefined();
  });

  it('without a summariser, more messages than maxMessages drop the oldest after the head', async () => {
    const r = await compactMessages(ms, { budgetTokens: 10_000, keepRecent: 2, maxMessages: 4, estimate, make });
    expect(r.messages.length).toBeLessThanOrEqual(4);
    expect(r.messages[0]).toEqual(ms[0]);
    expect(r.messages.at(-1)).toEqual(ms.at(-1));
    expect(r.report!.dropped).toBe(ms.length - r.messages.length);
    expect(noOrphans(r.messages)).toBe(true);
  });

  it('the summary and the marker are made from the messages they stand for', async () => {
    const standsFor: Array<readonly M[]> = [];
    const track = (fields: { role: 'user'; content: string }, of: readonly M[]): M => {
      standsFor.push(of);
      return fields;
    };
    const long = session(12, 3_000);
    await compactMessages(long, { budgetTokens: 1_000, keepRecent: 4, estimate, make: track, summarise: async () => 'ok' });
    expect(standsFor).toHaveLength(1);
    expect(standsFor[0]![0]).toBe(long[1]);
    standsFor.length = 0;
    await compactMessages(long, {
      budgetTokens: 1_000,
      keepRecent: 4,
      estimate,
      make: track,
      summarise: async () => {
        throw new Error('down');
      },
    });
    expect(standsFor).toHaveLength(1);
    expect(standsFor[0]![0]).toBe(long[1]);
  });
});

describe('a failed summary keeps what earlier compactions wrote', () => {
  it('earlier summaries and markers stay; the messages new since then give way to one marker', async () => {
    const earlier = user(`${SUMMARY_PREFIX}: 9 messages, written to fit the model's context window]\nEarlier: red.`);
    const marker = user(`${ELIDED_PREFIX}: 2 messages were removed ...]`);
    const ms = [user('task'), earlier, marker, ...session(8, 3_000).slice(1)];
    const r = await compactMessages(ms, {
      budgetTokens: 1_500,
      keepRecent: 4,
      estimate,
      make,
      summarise: async () => {
        throw new Error('summariser down');
      },
    });
    expect(r.messages.slice(0, 3)).toEqual([ms[0], earlier, marker]);
    expect(r.messages[3]!.content.startsWith(`${ELIDED_PREFIX}: `)).toBe(true);
    expect(r.messages.filter((m) => m.content.startsWith(ELIDED_PREFIX))).toHaveLength(2);
    expect(r.report!.summaryError).toBe('summariser down');
    const middle = ms.length - 1 - 4;
    expect(r.report!.summarised).toBe(middle - 2);
  });

  it('a middle of notes only leaves them as they are, with no new marker', async () => {
    const notes = [user(`${SUMMARY_PREFIX}: a]\n${big(3_000)}`), user(`${ELIDED_PREFIX}: b]`)];
    const ms = [user('task'), ...notes, assistant('ok'), user('q')];
    const r = await compactMessages(ms, {
      budgetTokens: estimate(ms) - 1,
      keepRecent: 2,
      estimate,
      make,
      summarise: async () => {
        throw new Error('down');
      },
    });
    expect(r.report).toMatchObject({ summarised: 0, summaryError: 'down' });
    expect(r.messages.filter((m) => m.content.startsWith(ELIDED_PREFIX))).toHaveLength(1);
  });

  it('a user request in the middle is not a note: it gives way to the marker, which names it', async () => {
    const ms = [...session(15, 200).slice(0, -1), user('Also check the deploy log.'), ...session(15, 200).slice(1)];
    const r = await compactMessages(ms, {
      budgetTokens: 600,
      keepRecent: 4,
      estimate,
      make,
      summarise: async () => {
        throw new Error('down');
      },
    });
    expect(r.report).toMatchObject({ cut: 0, dropped: 0 });
    expect(r.messages).not.toContainEqual(user('Also check the deploy log.'));
    expect(r.messages[1]!.content).toContain('1 user message ("Also check the deploy log.")');
  });

  it('an assistant note that reads like a summary is not one: only user notes are kept', async () => {
    const fake: M = { role: 'assistant', content: `${SUMMARY_PREFIX}: I made this up]` };
    const ms = [user('task'), fake, ...session(6, 3_000).slice(1)];
    const r = await compactMessages(ms, {
      budgetTokens: 1_000,
      keepRecent: 4,
      estimate,
      make,
      summarise: async () => {
        throw new Error('down');
      },
    });
    expect(r.messages).not.toContainEqual(fake);
  });
});

describe('cutting and dropping to fit', () => {
  it('a cut keeps the share of its head given, the rest from its end (the verdict of a log)', async () => {
    const log = `${Array.from({ length: 3_000 }, (_, i) => `step ${i}`).join('\n')}\nVERDICT: green\n`;
    const ms = [user('read the log'), calling(['a', 'read_file', '{}']), named('read_file', 'a', log)];
    const r = await compactMessages(ms, { budgetTokens: 2_000, keepRecent: 2, estimate, make, cutHeadShare: 0.25 });
    const cut = r.messages[2]!.content;
    expect(cut.startsWith('step 0\n')).toBe(true);
    expect(cut.endsWith('VERDICT: green\n')).toBe(true);
    expect(r.report).toMatchObject({ cut: 1, dropped: 0, elided: 0 });
    expect(estimate(r.messages)).toBeLessThanOrEqual(2_000);
    expect(estimate(r.messages)).toBeGreaterThan(1_700); // cut to fit, not far below
    const headOnly = await compactMessages(ms, { budgetTokens: 2_000, keepRecent: 2, estimate, make });
    expect(headOnly.messages[2]!.content.endsWith('VERDICT: green\n')).toBe(false);
  });

  it('older messages are cut before recent ones, the biggest first, only as far as needed', async () => {
    const ms = [
      user('task'),
      assistant(big(1_500, 'older small ')),
      assistant(big(9_000, 'older big ')),
      user('q'),
      assistant(big(1_500, 'recent ')),
    ];
    const r = await compactMessages(ms, { budgetTokens: 2_500, keepRecent: 2, estimate, make });
    expect(r.messages[1]).toEqual(ms[1]);
    expect(r.messages[2]!.content).toContain('cut to fit');
    expect(r.messages[4]).toEqual(ms[4]);
    expect(r.report).toMatchObject({ cut: 1, dropped: 0 });
    expect(estimate(r.messages)).toBeLessThanOrEqual(2_500);
  });

  it('recent messages are cut oldest first: the newest is cut last', async () => {
    const ms = [user('task'), assistant(big(3_000, 'older recent ')), user(big(3_000, 'newest '))];
    const r = await compactMessages(ms, { budgetTokens: 1_500, keepRecent: 2, estimate, make });
    expect(r.messages[1]!.content).toContain('cut to fit');
    expect(r.messages[2]).toEqual(ms[2]);
    expect(r.report).toMatchObject({ cut: 1, dropped: 0 });
  });

  it('with a token bound on the tail, a large recent tool result is stubbed rather than cut', async () => {
    const ms = [user('task'), calling(['a', 'read_file', '{"path":"log"}']), named('read_file', 'a', big(3_000)), user('q')];
    const bounded = await compactMessages(ms, { budgetTokens: 300, keepRecent: 3, tailTokens: 50, estimate, make });
    expect(bounded.report).toMatchObject({ elided: 1, cut: 0 });
    expect(bounded.messages[2]!.content).toBe(toolResultStub(ms[2]!, { name: 'read_file', arguments: '{"path":"log"}' }));
    const unbounded = await compactMessages(ms, { budgetTokens: 300, keepRecent: 3, estimate, make });
    expect(unbounded.report).toMatchObject({ elided: 0, cut: 1 });
  });

  it('nothing to summarise (no middle): no summary is asked for, the rest of the steps still fit', async () => {
    let asked = 0;
    const r = await compactMessages([user(big(30_000))], {
      budgetTokens: 1_000,
      keepRecent: 1,
      estimate,
      make,
      summarise: async () => `${++asked}`,
    });
    expect(asked).toBe(0);
    expect(r.report).toMatchObject({ summarised: 0, cut: 1 });
  });

  it('dropping older messages keeps the latest user message and the notes of compaction', async () => {
    const note = user(`${SUMMARY_PREFIX}: 3 messages]\nred`);
    const ms: M[] = [user('task'), note];
    for (let i = 0; i < 30; i++) ms.push(assistant(`reply ${i}`));
    ms.push(user('latest question'), assistant('thinking'), assistant('answer'));
    const r = await compactMessages(ms, { budgetTokens: 120, keepRecent: 2, estimate, make });
    expect(r.messages).toContainEqual(note);
    expect(r.messages).toContainEqual(user('latest question'));
    expect(r.messages.slice(-2)).toEqual(ms.slice(-2));
    expect(r.messages[0]).toEqual(ms[0]);
    expect(r.report!.dropped).toBe(ms.length - r.messages.length);
    expect(estimate(r.messages)).toBeLessThanOrEqual(120);
  });

  it('cutText keeps 120 characters less than the tokens asked for, at the ratio given, from the head share given', () => {
    const text = `${'h'.repeat(2_000)}\n${'t'.repeat(2_000)}`;
    const headOnly = cutText(text, 500, 2);
    expect(headOnly.startsWith('h'.repeat(880))).toBe(true);
    expect(headOnly).toContain(`: 880 of 4,001 characters kept`);
    const tailOnly = cutText(text, 500, 2, 0);
    expect(tailOnly.endsWith('t'.repeat(880))).toBe(true);
    expect(cutText(text, 10)).toMatch(/^\n?\[… cut to fit the model's context window: 0 of 4,001 characters kept/);
  });
});
