/**
 * A long-running loop stays inside the model's window (docs/CONTEXT.md): compaction against a model
 * server that enforces its window, with room between threshold and target (a summary every several
 * ticks, the request's prefix unchanged in between), and the summary's fallback marker. Real Redis,
 * real BullMQ, real worker, the real `openai` client against the local model server.
 */
import { describe } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { events, waitFor, waitWhileAdvancing, type TestClients } from './support/stack.ts';
import { lastUserText, type RecordedRequest, type ScriptedReply } from './support/fake-openai.ts';
import { startAgentStack } from './support/agent-stack.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import type { LoopSpec } from '../scheduler/loop/loop-service.ts';
import { ELIDED_PREFIX, SUMMARY_PREFIX } from '../worker/context/compaction.ts';

const setup = (cleanups: CleanUp[], overrides: Record<string, unknown>, modelOptions: Parameters<typeof startAgentStack>[2]) =>
  startAgentStack(cleanups, overrides, modelOptions);

/** A CI log of about `kb` KB: numbered lines, the last one saying how the build stands. */
function ciLog(kb: number, status: string): string {
  const lines: string[] = [];
  for (let i = 0; lines.join('\n').length < kb * 1024; i++) {
    lines.push(
      `2026-12-01T02:${String(i % 60).padStart(2, '0')}:00Z [step ${i}] compiling module pkg/service-${i % 37}/handler.go ... ok (${(i * 7) % 1000} ms)`,
    );
  }
  lines.push(`BUILD STATUS: ${status}`);
  return lines.join('\n');
}

/** A summary request of the runner (no tools, a system prompt about summarising). */
const isSummary = (req: RecordedRequest) => req.tools.length === 0 && /summar/i.test(req.messages[0]?.content ?? '');

const spec = (prompt: string, intervalSeconds: number, times: number): LoopSpec => ({
  prompt,
  intervalSeconds,
  times,
  until: null,
  notes: [],
  economy: {},
});
const agent = { kind: 'agent' as const };

/** The CI watcher: each wakeup reads the log with `read_file`, then reports what the log's last line says. */
function ciWatcher(
  path: string,
  summary: () => ScriptedReply = () => 'Summary: the CI log was read at every tick; the build was still running each time.',
) {
  return (req: RecordedRequest): ScriptedReply => {
    if (isSummary(req)) return summary();
    const last = req.messages[req.messages.length - 1]!;
    if (last.role === 'tool') return `Checked: ${/BUILD STATUS: (\w+)/.exec(last.content)?.[1] ?? 'unknown'}.`;
    return { toolCalls: [{ name: 'read_file', arguments: { path } }] };
  };
}

// Each test has its own model server, worker, Redis prefix and folder, so the two run side by side.
describe.concurrent('a loop that reads a 12 KB log at every tick, against a 16,000-token window', () => {
  it('runs 100 ticks with no failed tick, no request over the window and at most 10 summaries; between compactions each request extends the one before byte for byte', async ({
    cleanups,
    expect,
  }) => {
    const { c, model, dir } = await setup(cleanups, { 'agent.context_window_tokens': 16_000 }, { contextWindow: 16_000 });
    const log = join(dir, 'ci.log');
    writeFileSync(log, ciLog(12, 'running'));
    model.respond(ciWatcher(log));
    await c.schedules.set('ci', 'loop', spec('watch the CI build and tell me when it is green', 0.1, 100), {
      origin: { surface: 'cli' },
      runner: agent,
    });
    // 100 ticks of two model calls each: beside two other copies of the suite a tick takes seconds, so the wait
    // is for as long as ticks keep being counted, not for a fixed total.
    await untilFinished(c, 'ci', 'the loop to run its 100 ticks');

    const loop = (await c.loops.get('ci', 'loop'))!;
    expect(loop.ticksUsed).toBe(100);
    expect(loop.failureStreak ?? 0).toBe(0);
    const all = await events(c, 'ci');
    expect(all.filter((e) => e.type === 'tick.failed')).toEqual([]);
    expect(all.filter((e) => e.type === 'reply').map((e) => e.data.tick)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    // Every request fit: none refused, none over the window.
    expect(model.refusedForLength).toBe(0);
    expect(Math.max(...model.requests.map((r) => r.promptTokens))).toBeLessThanOrEqual(16_000);
    // The transcript was compacted with a summary, and stays small; the stream kept everything.
    const transcript = await c.sessions.transcript('ci');
    expect(transcript.some((m) => m.source === 'summary' && m.content.startsWith(SUMMARY_PREFIX))).toBe(true);
    expect(all.filter((e) => e.type === 'context.compacted').length).toBeGreaterThan(0);
    expect(all.filter((e) => e.type === 'tool.result')).toHaveLength(100);
    // The input of the last turns is bounded: no later than tick 10's by more than a quarter.
    const turnCalls = model.requests.filter((r) => !isSummary(r) && r.messages[r.messages.length - 1]!.role === 'user');
    const tick10 = turnCalls[9]!.promptTokens;
    expect(turnCalls.at(-1)!.promptTokens).toBeLessThanOrEqual(tick10 * 1.25 + 2_000);
    // The spend the loop keeps is the server's own count.
    const served = model.requests.filter((r) => !r.refusedForLength);
    expect(loop.spend!.calls).toBe(served.length);
    expect(loop.spend!.inputTokens).toBe(served.reduce((n, r) => n + r.promptTokens, 0));
    expect(loop.spend!.estimated).toBe(false);

    // Room between threshold and target: a summary every several ticks, not at every tick.
    const summaries = model.requests.filter(isSummary);
    expect(summaries.length).toBeGreaterThan(0);
    expect(summaries.length).toBeLessThanOrEqual(10);
    // Between two compactions a request is the one before it and what was appended since, unchanged:
    // the system prompt, the tools, every message, byte for byte (what a provider's prompt cache serves).
    const compactedAt = new Set(all.filter((e) => e.type === 'context.compacted').map((e) => e.data.tick as number));
    const turns = model.requests.filter((r) => !isSummary(r));
    const tickOf = (r: RecordedRequest) => Number(/Loop wakeup #(\d+)/.exec(lastUserText(r))![1]);
    let compared = 0;
    for (let i = 1; i < turns.length; i++) {
      const [before, after] = [turns[i - 1]!, turns[i]!];
      if (tickOf(after) !== tickOf(before) && compactedAt.has(tickOf(after))) continue; // this tick's turn began with a compaction
      expect(JSON.stringify(after.body.tools)).toBe(JSON.stringify(before.body.tools));
      expect(after.messages.slice(0, before.messages.length).map((m) => JSON.stringify(m))).toEqual(
        before.messages.map((m) => JSON.stringify(m)),
      );
      compared++;
    }
    // Most requests follow one without a compaction between them.
    expect(compared).toBeGreaterThan(turns.length / 2);
    // And the model server's prompt cache served that prefix.
    const cached = model.requests.reduce((n, r) => n + (r.cachedTokens ?? 0), 0);
    expect(cached / loop.spend!.inputTokens).toBeGreaterThan(0.5);
    expect(loop.spend!.cachedTokens).toBe(cached);
  }, 900_000);

  it("a transcript near worker.transcript_max_messages is summarised before the store would drop its head: every request starts with the loop's task", async ({
    cleanups,
    expect,
  }) => {
    // A 128,000-token window: tokens never reach the threshold; 40 messages at most, 2 a tick.
    const { c, model } = await setup(cleanups, { 'worker.transcript_max_messages': 40 }, {});
    model.respond((req) => (isSummary(req) ? 'Summary: every check so far found the build running.' : 'Still running.'));
    await c.schedules.set('cap', 'loop', spec('watch the CI build', 0.1, 40), { origin: { surface: 'cli' }, runner: agent });
    // 40 ticks of a turn each: beside two other copies of the suite a tick takes seconds, so the wait is for
    // as long as ticks keep being counted, not for a fixed total.
    await untilFinished(c, 'cap', 'the loop to run its 40 ticks');
    const turns = model.requests.filter((r) => !isSummary(r));
    expect(turns).toHaveLength(40);
    // The head (the first tick's input) opens every request: nothing was trimmed from the front.
    for (const r of turns) expect(r.messages[1]!.content).toMatch(/^\[Loop wakeup #1 of 40\]/);
    const summaries = model.requests.filter(isSummary).length;
    expect(summaries).toBeGreaterThanOrEqual(2);
    const transcript = await c.sessions.transcript('cap');
    expect(transcript[0]!.content).toMatch(/^\[Loop wakeup #1 of 40\]/);
    expect(transcript[1]!.content.startsWith(SUMMARY_PREFIX)).toBe(true);
    expect(transcript.length).toBeLessThan(40);
    const compacted = (await events(c, 'cap')).filter((e) => e.type === 'context.compacted');
    expect(compacted).toHaveLength(summaries);
  }, 360_000);

  it('a summary call that fails leaves a marker in place of the middle; every tick still succeeds', async ({ cleanups, expect }) => {
    const { c, model, dir } = await setup(cleanups, { 'agent.context_window_tokens': 8_000 }, { contextWindow: 8_000 });
    const log = join(dir, 'ci.log');
    writeFileSync(log, ciLog(12, 'running'));
    model.respond(ciWatcher(log, () => ({ status: 500, message: 'summariser down' })));
    await c.schedules.set('ci', 'loop', spec('watch the CI build', 0.1, 12), { origin: { surface: 'cli' }, runner: agent });
    await waitFor(async () => ((await c.loops.get('ci', 'loop'))?.status === 'finished' ? true : undefined), 180_000, 'finished');
    const all = await events(c, 'ci');
    expect(all.filter((e) => e.type === 'tick.failed')).toEqual([]);
    expect(all.filter((e) => e.type === 'reply')).toHaveLength(12);
    expect(model.requests.some(isSummary)).toBe(true);
    const transcript = await c.sessions.transcript('ci');
    expect(transcript.some((m) => m.content.startsWith(ELIDED_PREFIX))).toBe(true);
    expect(all.some((e) => e.type === 'context.compacted' && typeof e.data.summaryError === 'string')).toBe(true);
    expect(model.refusedForLength).toBe(0);
  }, 210_000);
});

/** Wait until the loop of `sessionId` has finished, for as long as its ticks keep being counted (a minute at most without one). */
async function untilFinished(c: TestClients, sessionId: string, what: string): Promise<void> {
  await waitWhileAdvancing(
    async () => {
      const loop = await c.loops.get(sessionId, 'loop');
      return { done: loop?.status === 'finished' ? true : undefined, at: loop?.ticksUsed ?? 0 };
    },
    60_000,
    what,
  );
}
