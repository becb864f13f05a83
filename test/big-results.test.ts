/**
 * A tick sees what it reads, whole (docs/TOOLS.md, "Big results"; docs/CONTEXT.md, "Compaction"):
 * a tool result over `tools.max_result_bytes` keeps its head and its tail with a marker naming
 * what was left out, `read_file` pages by lines, and the fit before each model call shrinks older
 * context before it cuts the newest tool result, which keeps its tail. Real Redis, real BullMQ, a
 * real worker, the real `openai` client against the local model server, whose recorded requests
 * are what the model got.
 */
import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe } from 'vitest';
import type { LoopSpec } from '../scheduler/loop/loop-service.ts';
import { startAgentStack } from './support/agent-stack.ts';
import { ciLog } from './support/ci-log.ts';
import { it } from './support/cleanup.ts';
import { lastToolResult, lastUserText } from './support/fake-openai.ts';
import { events, waitFor, waitForEvents } from './support/stack.ts';

/** Ceiling of each wait: ticks on a loaded machine can be slow; none of these waits is a fixed sleep. */
const WAIT_MS = 45_000;
/** Ceiling of a test of several waits. */
const TEST_MS = 180_000;
const agent = { kind: 'agent' as const };
const cli = { origin: { surface: 'cli' as const }, runner: agent };
const loop = (prompt: string, intervalSeconds: number, times: number | null = null): LoopSpec => ({
  prompt,
  intervalSeconds,
  times,
  until: null,
  notes: [],
  economy: {},
});

/** The marker of a cut `read_file` result, with the lines it names. */
const CUT_MARKER =
  /\n\[… ([\d,]+) of ([\d,]+) bytes \(lines ([\d,]+)–([\d,]+)\) left out; read them with read_file offset=(\d+) limit=(\d+), or the end with tail_lines …\]\n/;

describe.concurrent('big tool results', () => {
  it(
    "a 120 KB log's last line reaches the model, and so does a status line appended to its end (a 1 s loop)",
    async ({ cleanups, expect }) => {
      const { c, model, dir } = await startAgentStack(cleanups, {});
      const log = join(dir, 'ci.log');
      writeFileSync(log, ciLog(120_000, 'running'));
      model.respond((req) => {
        const seen = lastToolResult(req);
        if (seen === undefined) return { toolCalls: [{ name: 'read_file', arguments: { path: 'ci.log' } }] };
        return `last line: ${seen.trimEnd().split('\n').at(-1)}`;
      });
      await c.schedules.set('ci', 'loop', loop('tell me when the CI build is green', 1), cli);
      const [first] = await waitForEvents(c, 'ci', 'reply', 1, WAIT_MS);
      expect(first!.data.text).toBe('last line: BUILD STATUS: running');
      appendFileSync(log, 'BUILD STATUS: green\n');
      await waitFor(
        async () => ((await events(c, 'ci', 'reply')).some((e) => e.data.text === 'last line: BUILD STATUS: green') ? true : undefined),
        WAIT_MS,
        'a tick that saw the appended line',
      );
      const results = model.requests.map(lastToolResult).filter((r) => r !== undefined);
      // The head, the marker, and the tail with the verdict, within the cap (16 KB) and its marker.
      expect(results[0]!.startsWith('[step 1] compiling module 1 ')).toBe(true);
      expect(results[0]).toMatch(CUT_MARKER);
      expect(results[0]!.endsWith('... ok\nBUILD STATUS: running\n')).toBe(true);
      expect(Buffer.byteLength(results[0]!)).toBeLessThan(16_384 + 200);
      expect(results.at(-1)!.endsWith('BUILD STATUS: running\nBUILD STATUS: green\n')).toBe(true);
    },
    TEST_MS,
  );

  it(
    'read_file returns the pages the model asks for: the lines a marker names (offset/limit), tail_lines, as its schema says',
    async ({ cleanups, expect }) => {
      const { c, model, dir } = await startAgentStack(cleanups, {});
      const text = ciLog(120_000, 'green');
      writeFileSync(join(dir, 'ci.log'), text);
      const lines = text.split('\n'); // the last element is '' (the file ends with a line end)
      const named = (cut: string) => Number(CUT_MARKER.exec(cut)![3]!.replace(/,/g, ''));
      model.respond((req) => {
        const results = req.messages.filter((m) => m.role === 'tool');
        if (results.length === 0) return { toolCalls: [{ name: 'read_file', arguments: { path: 'ci.log' } }] };
        if (results.length > 1) return 'paged';
        // The whole read came back cut: read the first lines its marker names, the end, and past the end.
        return {
          toolCalls: [
            { name: 'read_file', arguments: { path: 'ci.log', offset: named(results[0]!.content), limit: 3 } },
            { name: 'read_file', arguments: { path: 'ci.log', tail_lines: 2 } },
            { name: 'read_file', arguments: { path: 'ci.log', offset: lines.length + 5 } },
          ],
        };
      });
      await c.schedules.set('pages', 'loop', loop('read the log', 60, 1), cli);
      await waitForEvents(c, 'pages', 'reply', 1, WAIT_MS);
      const sent = model.requests.at(-1)!;
      const [whole, ...pages] = sent.messages.filter((m) => m.role === 'tool').map((m) => m.content);
      const from = named(whole!);
      expect(from).toBeGreaterThan(1);
      expect(whole).toContain(`\n${lines[from - 2]}\n[…`); // the line before the marker is the one before those left out
      expect(pages).toEqual([
        `${lines[from - 1]}\n${lines[from]}\n${lines[from + 1]}\n`,
        `${lines.at(-3)}\nBUILD STATUS: green\n`,
        `[Line ${(lines.length + 5).toLocaleString('en-US')} is past the end of the file: it has ${(lines.length - 1).toLocaleString('en-US')} lines.]`,
      ]);
      expect(lines[from - 1]).toBe(`[step ${from}] compiling module ${from} of the api service ... ok`);
      // The schema the model was given documents the paging.
      const tools = sent.body.tools as Array<{ function: { name: string; parameters: { properties: Record<string, { type: string }> } } }>;
      expect(tools.find((t) => t.function.name === 'read_file')!.function.parameters.properties).toMatchObject({
        offset: { type: 'integer' },
        limit: { type: 'integer' },
        tail_lines: { type: 'integer' },
      });
    },
    TEST_MS,
  );

  it(
    'the fit before a model call shrinks older context first; the newest tool result is left whole, its verdict kept',
    async ({ cleanups, expect }) => {
      // A window the second call of the second tick does not fit: an older long reply plus a 16 KB tool result.
      const window = 9_000;
      const { c, model, dir } = await startAgentStack(
        cleanups,
        { 'agent.context_window_tokens': window, 'agent.compaction.threshold': 0.85 },
        { contextWindow: window },
      );
      writeFileSync(join(dir, 'ci.log'), ciLog(120_000, 'red (test_login failed)'));
      const analysis = `ANALYSIS START\n${'The build was slow in the linker step again today. '.repeat(240)}\nANALYSIS END`;
      model.respond((req) => {
        if (lastUserText(req).includes('Loop wakeup #1')) return analysis;
        return lastToolResult(req) === undefined ? { toolCalls: [{ name: 'read_file', arguments: { path: 'ci.log' } }] } : 'still red';
      });
      await c.schedules.set('fit', 'loop', loop('watch the CI log', 1, 2), cli);
      await waitForEvents(c, 'fit', 'reply', 2, WAIT_MS);
      const sent = model.requests.find((r) => lastToolResult(r) !== undefined)!;
      expect(sent.refusedForLength).toBeUndefined();
      expect(sent.promptTokens).toBeLessThanOrEqual(window);
      // The newest result: as the toolbox cut it (head, marker, tail), not cut again to fit.
      const newest = lastToolResult(sent)!;
      expect(newest).toMatch(CUT_MARKER);
      expect(newest).not.toContain('cut to fit');
      expect(newest.endsWith('BUILD STATUS: red (test_login failed)\n')).toBe(true);
      // The older reply was shrunk instead, keeping its head and its tail.
      const older = sent.messages.find((m) => m.role === 'assistant' && m.content.startsWith('ANALYSIS START'))!;
      expect(older.content).toMatch(
        /\[… cut to fit the model's context window: [\d,]+ of [\d,]+ characters kept, lines [\d,]+–[\d,]+ left out …\]/,
      );
      expect(older.content.endsWith('ANALYSIS END')).toBe(true);
      expect(older.content.length).toBeLessThan(analysis.length);
      const [compacted] = (await events(c, 'fit', 'context.compacted')).filter((e) => e.data.scope === 'call');
      expect(compacted!.data).toMatchObject({ cut: 1, dropped: 0 });
    },
    TEST_MS,
  );
});
