/**
 * The compaction rules of a session turn (docs/CONTEXT.md, "Compaction", "Token counting"), each on a
 * session whose transcript the test writes first, so the request a tick sends is known to the token:
 * the threshold (one token under does not compact, at it does), the target a compaction comes down
 * to, a failed summary that keeps the summary before it and names what it lost, stubs that keep
 * their call's arguments, and counts by the model's own tokenizer. Real Redis, real BullMQ, a real
 * worker, the real `openai` client against the local model server.
 */
import { describe } from 'vitest';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { events, waitFor } from './support/stack.ts';
import type { RecordedRequest, ScriptedReply } from './support/fake-openai.ts';
import { startAgentStack, type AgentStack } from './support/agent-stack.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import type { LoopSpec } from '../scheduler/loop/loop-service.ts';
import type { LoopRecord } from '../scheduler/loop/loop-state.ts';
import { buildWakeupInput } from '../scheduler/loop/wakeup-input.ts';
import type { TranscriptMessage } from '../scheduler/session/session-store.ts';
import { ELIDED_PREFIX, SUMMARY_PREFIX } from '../worker/context/compaction.ts';
import { turnMessages } from '../worker/context/transcript-messages.ts';

const WINDOW = 16_000;
const THRESHOLD = WINDOW / 2; // agent.compaction.threshold 0.5
const TARGET = WINDOW / 4; // agent.compaction.target 0.25
const PROMPT = 'watch the CI build and tell me when it is green';

const spec = (prompt: string): LoopSpec => ({ prompt, intervalSeconds: 60, times: 1, until: null, notes: [], economy: {} });
/** The input of the loop's first tick, as the worker builds it. */
const firstInput = (prompt: string) => buildWakeupInput({ kind: 'loop', prompt, times: 1 } as LoopRecord, 1);

const isSummary = (req: RecordedRequest) => req.tools.length === 0 && /summar/i.test(req.messages[0]?.content ?? '');

/** A CI log of about `chars` characters, numbered lines. */
function ciLog(chars: number, seed: string): string {
  const lines: string[] = [];
  for (let i = 0; lines.join('\n').length < chars; i++) lines.push(`${seed} [step ${i}] compiling pkg/service-${i % 37}/handler.go ... ok`);
  return lines.join('\n');
}

/** A task, then `rounds` ticks that read a log with `read_file` (call, result, reply), all stored as a loop stores them. */
function ciTranscript(rounds: number, logChars: number): TranscriptMessage[] {
  const out: TranscriptMessage[] = [{ role: 'user', content: firstInput(PROMPT), at: 1, source: 'tick', surface: 'cli' }];
  for (let i = 0; i < rounds; i++) {
    const id = `call_seed_${i}`;
    out.push(
      {
        role: 'assistant',
        content: '',
        at: 2,
        source: 'tick',
        surface: 'cli',
        tool_calls: [{ id, name: 'read_file', arguments: JSON.stringify({ path: `/srv/ci/build-${i}.log` }) }],
      },
      { role: 'tool', content: ciLog(logChars, `run-${i}`), at: 2, source: 'tick', surface: 'cli', tool_call_id: id, name: 'read_file' },
      { role: 'assistant', content: `Build ${i}: still running.`, at: 2, source: 'tick', surface: 'cli' },
    );
  }
  return out;
}

async function seed(s: AgentStack, sessionId: string, transcript: TranscriptMessage[]): Promise<void> {
  await s.c.redis.rpush(s.c.keys.transcript(sessionId), ...transcript.map((m) => JSON.stringify(m)));
}

/** The tokens the worker counts for the first tick's request over `transcript` (its own estimator). */
async function requestTokens(s: AgentStack, transcript: TranscriptMessage[]): Promise<number> {
  const { estimate } = await s.worker.deps.runners.agent.estimator(undefined, 'cli', { kind: 'loop', origin: { surface: 'cli' } });
  return estimate(turnMessages(transcript, firstInput(PROMPT)));
}

/**
 * `transcript` with its last reply padded by " x" (one o200k token each) until the first tick's request
 * counts exactly `tokens`.
 */
async function paddedTo(s: AgentStack, transcript: TranscriptMessage[], tokens: number): Promise<TranscriptMessage[]> {
  const at = transcript.length - 1;
  const withPad = (n: number) => transcript.map((m, i) => (i === at ? { ...m, content: `${m.content}${' x'.repeat(n)}` } : m));
  const base = await requestTokens(s, transcript);
  const padded = withPad(tokens - base);
  const counted = await requestTokens(s, padded);
  if (counted !== tokens) throw new Error(`padding counts ${counted} tokens, not ${tokens}`);
  return padded;
}

/** Run the first tick of a loop on `sessionId`; resolves when it is committed. */
async function runTick(s: AgentStack, sessionId: string): Promise<void> {
  await s.c.schedules.set(sessionId, 'loop', spec(PROMPT), { origin: { surface: 'cli' }, runner: { kind: 'agent' } });
  await waitFor(
    async () => ((await s.c.loops.get(sessionId, 'loop'))?.status === 'finished' ? true : undefined),
    30_000,
    `${sessionId} ran`,
  );
}

const setup = async (cleanups: CleanUp[], overrides: Record<string, unknown> = {}) =>
  startAgentStack(cleanups, { 'agent.context_window_tokens': WINDOW, ...overrides }, { contextWindow: WINDOW });

describe.concurrent('the threshold and the target', () => {
  it('one token under the threshold does not compact; at the threshold the context comes down to the target', async ({
    cleanups,
    expect,
  }) => {
    const s = await setup(cleanups);
    s.model.respond((req) => (isSummary(req) ? 'Summary: the build was running at every check.' : 'Still running.'));
    const base = ciTranscript(5, 4_000);
    expect(await requestTokens(s, base)).toBeLessThan(THRESHOLD - 100);

    // One token under: sent as it is stored, no compaction.
    const under = await paddedTo(s, base, THRESHOLD - 1);
    await seed(s, 'under', under);
    await runTick(s, 'under');
    const [first] = s.model.requests;
    expect(first!.messages.slice(1, -1).map((m) => m.content ?? '')).toEqual(under.map((m) => m.content));
    expect(first!.promptTokens).toBe(THRESHOLD - 1);
    expect(await events(s.c, 'under', 'context.compacted')).toEqual([]);
    const [call] = await events(s.c, 'under', 'model.called');
    expect(call!.data).toMatchObject({ estimatedInputTokens: THRESHOLD - 1, inputTokens: THRESHOLD - 1 });

    // At the threshold: compacted, and down to the target, not just under the threshold.
    const at = await paddedTo(s, base, THRESHOLD);
    await seed(s, 'at', at);
    const sentBefore = s.model.requests.length;
    await runTick(s, 'at');
    const [compacted] = await events(s.c, 'at', 'context.compacted');
    expect(compacted!.data).toMatchObject({
      scope: 'transcript',
      beforeTokens: THRESHOLD,
      thresholdTokens: THRESHOLD,
      targetTokens: TARGET,
    });
    expect(compacted!.data.afterTokens).toBeLessThanOrEqual(TARGET);
    const sent = s.model.requests.slice(sentBefore).find((r) => !isSummary(r))!;
    expect(sent.promptTokens).toBe(compacted!.data.afterTokens);
    expect(sent.promptTokens).toBeLessThanOrEqual(TARGET);
    // The stored transcript is the compacted one: the next tick starts from it.
    const stored = await s.c.sessions.transcript('at');
    expect(stored.length).toBeGreaterThan(0);
    expect(stored.filter((m) => m.role === 'tool').every((m) => m.content.includes('elided to save context'))).toBe(true);
  }, 90_000);
});

describe.concurrent('a failed summary', () => {
  it('keeps the summary written before it and leaves a marker that names what was lost', async ({ cleanups, expect }) => {
    const s = await setup(cleanups);
    s.model.respond((req): ScriptedReply => (isSummary(req) ? { status: 500, message: 'summariser down' } : 'Still running.'));
    const earlier = 'Summary: builds 1 to 40 ran on the runner ci-7; build 12 failed on pkg/service-3 and was fixed by pinning go 1.22.';
    // A task, an earlier summary, then many plain exchanges: stubs cannot help, only a summary would.
    const transcript: TranscriptMessage[] = [
      { role: 'user', content: firstInput(PROMPT), at: 1, source: 'tick', surface: 'cli' },
      {
        role: 'user',
        content: `${SUMMARY_PREFIX}: 120 messages, written to fit the model's context window]\n${earlier}`,
        at: 1,
        source: 'summary',
      },
    ];
    for (let i = 0; i < 50; i++) {
      transcript.push(
        { role: 'user', content: `Check ${i}: ${ciLog(600, `check-${i}`)}`, at: 2, source: 'message', surface: 'cli' },
        { role: 'assistant', content: `Build ${i} is still running on ci-7.`, at: 2, source: 'message', surface: 'cli' },
      );
    }
    await seed(s, 'fail', transcript);
    await runTick(s, 'fail');
    const [compacted] = await events(s.c, 'fail', 'context.compacted');
    expect(compacted!.data.summaryError).toMatch(/summariser down/);
    const stored = await s.c.sessions.transcript('fail');
    // The earlier summary is still there, word for word, right after the head.
    expect(stored[0]!.content).toBe(transcript[0]!.content);
    expect(stored[1]!.content).toBe(transcript[1]!.content);
    // The marker names what was lost instead of pointing somewhere the model cannot see.
    const marker = stored.find((m) => m.content.startsWith(ELIDED_PREFIX))!;
    expect(marker).toBeDefined();
    const lost = compacted!.data.summarised as number;
    expect(lost).toBeGreaterThan(2);
    expect(marker.content).toContain(`${lost} messages were removed`);
    expect(marker.content).toMatch(/\d+ user messages \(first "Check 0: check-0 \[step 0\]/);
    expect(marker.content).toMatch(/\d+ replies \(last "Build \d+ is still running on ci-7\."\)/);
    expect(marker.content).not.toMatch(/event stream/);
    // And the turn's request carried both.
    const sent = s.model.requests.filter((r) => !isSummary(r)).at(-1)!;
    expect(sent.messages.some((m) => m.content.includes(earlier))).toBe(true);
    expect(sent.messages.some((m) => m.content === marker.content)).toBe(true);
    expect(sent.promptTokens).toBeLessThanOrEqual(TARGET);
  }, 90_000);
});

describe.concurrent('stubs', () => {
  it("an elided tool result's stub keeps the call's arguments, so the agent can run it again", async ({ cleanups, expect }) => {
    const s = await setup(cleanups);
    s.model.respond((req) => (isSummary(req) ? 'Summary.' : 'Still running.'));
    const transcript = ciTranscript(4, 12_000);
    await seed(s, 'stubs', transcript);
    await runTick(s, 'stubs');
    const sent = s.model.requests.find((r) => !isSummary(r))!;
    const stubs = sent.messages.filter((m) => m.role === 'tool' && m.content.includes('elided to save context'));
    expect(stubs.length).toBeGreaterThan(0);
    for (const stub of stubs) {
      const call = transcript.find((m) => m.tool_calls?.[0]?.id === stub.tool_call_id)!.tool_calls![0]!;
      expect(stub.content).toContain(`to see it again, call read_file ${call.arguments}`);
      expect(stub.content).toMatch(/^\[read_file result elided to save context: \d+ characters; first line: "run-\d+ \[step 0\]/);
    }
  }, 90_000);
});

describe.concurrent('token counts', () => {
  /** A request counted by the rule of docs/CONTEXT.md with `text` counting one text. */
  const byRule = (req: RecordedRequest, text: (s: string) => number) =>
    3 +
    req.messages.reduce(
      (n, m) =>
        n + 4 + text(m.content ?? '') + (m.tool_calls ?? []).reduce((k, c) => k + text(c.function.name) + text(c.function.arguments), 0),
      0,
    ) +
    (req.body.tools ? text(JSON.stringify(req.body.tools)) : 0);

  it("a gpt-4o-family model is counted with its tokenizer: the count before the call is gpt-tokenizer's, and the server's", async ({
    cleanups,
    expect,
  }) => {
    const s = await setup(cleanups, { 'agent.model': 'gpt-4o-mini' });
    s.model.respond(() => 'Still running.');
    const transcript = ciTranscript(2, 3_000);
    transcript.push({ role: 'user', content: 'La compilation continue — 好的, ünïcödé ✓ <|endoftext|>', at: 3, source: 'message' });
    transcript.push({ role: 'assistant', content: 'Noted.', at: 3, source: 'message' });
    await seed(s, 'count', transcript);
    await runTick(s, 'count');
    const [call] = await events(s.c, 'count', 'model.called');
    const [req] = s.model.requests;
    expect(call!.data.estimatedInputTokens).toBe(byRule(req!, (t) => countTokens(t, { disallowedSpecial: new Set() })));
    expect(call!.data.estimatedInputTokens).toBe(req!.promptTokens);
  }, 90_000);

  it('a model with no known tokenizer is estimated by the same rule, 3 characters a token', async ({ cleanups, expect }) => {
    const s = await setup(cleanups, { 'agent.model': 'my-local-model' });
    s.model.respond(() => 'Still running.');
    await seed(s, 'estimate', ciTranscript(2, 3_000));
    await runTick(s, 'estimate');
    const [call] = await events(s.c, 'estimate', 'model.called');
    const [req] = s.model.requests;
    expect(call!.data.estimatedInputTokens).toBe(byRule(req!, (t) => Math.ceil(t.length / 3)));
    expect(call!.data.estimatedInputTokens).not.toBe(req!.promptTokens);
    expect(call!.data).toMatchObject({ inputTokens: req!.promptTokens, estimated: false });
  }, 90_000);
});
