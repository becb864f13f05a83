/**
 * Turns that cost only what they must (docs/CONTEXT.md; compaction in context-window-loop.test.ts):
 * quiet ticks (`[SILENT]`, `--notify`), watches, token budgets and the spend shown.
 * Real Redis, real BullMQ, real worker, the real `openai` client against the local model server.
 */
import { describe } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runHermes, waitFor, waitForEvents, type TestClients } from './support/stack.ts';
import { countTokens, lastUserText } from './support/fake-openai.ts';
import type { LoopSpec } from '../scheduler/loop/loop-service.ts';
import type { ScheduleEconomy } from '../scheduler/economy/economy-flags.ts';
import type { Origin } from '../scheduler/session/origin.ts';
import { telegramOutboundQueue } from '../scheduler/delivery/outbound.ts';
import { ScheduleInputError } from '../scheduler/errors/schedule-input-error.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { startAgentStack } from './support/agent-stack.ts';
import { startCronApiGateway } from './support/cron-api-gateway.ts';
import { spendWire } from '../scheduler/model-spend.ts';

const setup = (cleanups: CleanUp[], overrides: Record<string, unknown>) => startAgentStack(cleanups, overrides);

const spec = (prompt: string, intervalSeconds: number, economy: ScheduleEconomy = {}, times: number | null = null): LoopSpec => ({
  prompt,
  intervalSeconds,
  times,
  until: null,
  notes: [],
  economy,
});
const viaTelegram: Origin = { surface: 'telegram', route: { platform: 'telegram', chatId: '4242' } };
const agent = { kind: 'agent' as const };

async function outboundTexts(c: TestClients): Promise<string[]> {
  const outbound = telegramOutboundQueue(c.keys, c.redis);
  try {
    const jobs = await outbound.getJobs(['waiting', 'delayed', 'prioritized', 'active', 'completed', 'failed']);
    return jobs.sort((a, b) => a.timestamp - b.timestamp).map((j) => j.data.text);
  } finally {
    await outbound.close();
  }
}

describe.concurrent('quiet ticks', () => {
  it('a [SILENT] reply stays in the transcript and the stream but is not sent; a real change is', async ({ cleanups, expect }) => {
    const { c, model } = await setup(cleanups, {});
    model.respond((req) => (/Loop wakeup #3/.test(lastUserText(req)) ? 'The build is green.\nLOOP_COMPLETE' : '[SILENT]'));
    await c.schedules.set('q', 'loop', spec('tell me when the build is green', 1), { origin: viaTelegram, runner: agent });
    await waitFor(async () => ((await c.loops.get('q', 'loop'))?.status === 'finished' ? true : undefined), 90_000, 'finished');
    const replies = await waitForEvents(c, 'q', 'reply', 3);
    expect(replies.map((e) => e.data.silent ?? false)).toEqual([true, true, false]);
    expect((await c.sessions.transcript('q')).filter((m) => m.role === 'assistant').map((m) => m.content)).toEqual([
      '[SILENT]',
      '[SILENT]',
      'The build is green.\nLOOP_COMPLETE',
    ]);
    // Delivery follows the commit: wait for the two sends, then check nothing else was sent.
    expect(
      await waitFor(
        async () => {
          const t = await outboundTexts(c);
          return t.length >= 2 ? t : undefined;
        },
        10_000,
        'two sends',
      ),
    ).toEqual(['The build is green.\nLOOP_COMPLETE', 'Loop finished: the agent reported LOOP_COMPLETE.']);
    expect((await c.loops.get('q', 'loop'))!.silentTicks).toBe(2);
    // The wakeup text tells the agent how to stay quiet.
    expect(lastUserText(model.requests[0]!)).toContain('answer exactly [SILENT]');
  });

  it("--notify done sends only the final reply; a heartbeat's [SILENT] check-ins send nothing", async ({ cleanups, expect }) => {
    const { c, model } = await setup(cleanups, {});
    model.respond((req) => {
      const text = lastUserText(req);
      if (/Heartbeat #/.test(text)) return '[SILENT]';
      return /Loop wakeup #3/.test(text) ? 'Deployed.\nLOOP_COMPLETE' : `Still deploying (${/#(\d+)/.exec(text)![1]}).`;
    });
    await c.schedules.set('d', 'loop', spec('watch the deploy', 1, { notify: 'done' }), { origin: viaTelegram, runner: agent });
    await c.schedules.set('h', 'heartbeat', spec('anything new?', 1), {
      origin: { surface: 'telegram', route: { platform: 'telegram', chatId: '77' } },
      runner: agent,
    });
    await waitFor(async () => ((await c.loops.get('d', 'loop'))?.status === 'finished' ? true : undefined), 90_000, 'finished');
    await waitForEvents(c, 'h', 'reply', 3);
    expect((await waitForEvents(c, 'd', 'reply', 3)).map((e) => e.data.text)).toEqual([
      'Still deploying (1).',
      'Still deploying (2).',
      'Deployed.\nLOOP_COMPLETE',
    ]);
    expect(
      await waitFor(
        async () => {
          const t = await outboundTexts(c);
          return t.length >= 2 ? t : undefined;
        },
        10_000,
        'two sends',
      ),
    ).toEqual(['Deployed.\nLOOP_COMPLETE', 'Loop finished: the agent reported LOOP_COMPLETE.']);
    expect(await c.schedules.status('h', 'heartbeat')).toMatch(/\d+ silent/);
  });
});

describe.concurrent('--watch', () => {
  it('ticks over an unchanged file make no model call after the first; a change runs one turn that sees it', async ({
    cleanups,
    expect,
  }) => {
    const { c, model, dir } = await setup(cleanups, {});
    const file = join(dir, 'status.txt');
    writeFileSync(file, 'build 41: running');
    // The latest state named in the input (a change comes as a diff: the old line, then the new).
    model.respond((req) => `Seen: ${[...lastUserText(req).matchAll(/build \d+: \w+/g)].at(-1)?.[0] ?? 'nothing'}`);
    await c.schedules.set('w', 'loop', spec('tell me when the build is green', 1, { watch: `read_file:${file}` }), {
      origin: { surface: 'cli' },
      runner: agent,
    });
    await waitForEvents(c, 'w', 'tick.unchanged', 5, 90_000);
    expect(model.requests).toHaveLength(1);
    expect(lastUserText(model.requests[0]!)).toContain('build 41: running');
    writeFileSync(file, 'build 41: green');
    const replies = await waitForEvents(c, 'w', 'reply', 2, 10_000);
    expect(replies[1]!.data.text).toBe('Seen: build 41: green');
    const loop = (await c.loops.get('w', 'loop'))!;
    expect(loop.unchangedTicks).toBeGreaterThanOrEqual(5);
    expect(model.requests).toHaveLength(2); // one call per changed tick, none for the unchanged ones
    // Unchanged ticks add nothing to the transcript.
    expect((await c.sessions.transcript('w')).filter((m) => m.role === 'user')).toHaveLength(2);
    expect(await c.schedules.status('w', 'loop')).toMatch(/\d+ unchanged/);
  });

  it('a chat may not watch with a tool its surface may not use: refused, nothing created', async ({ cleanups, expect }) => {
    const { c } = await setup(cleanups, { 'tools.allow_from': { files: ['cli'] } });
    const err = await c.schedules
      .set('tg', 'loop', spec('watch it', 60, { watch: 'read_file:/etc/hostname' }), { origin: viaTelegram, runner: agent })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ScheduleInputError);
    expect((err as Error).message).toMatch(/not allowed from telegram \(tools\.allow_from\.files\)/);
    expect(await c.loops.get('tg', 'loop')).toBeNull();
    const undeclared = await c.schedules
      .set('tg', 'loop', spec('watch it', 60, { watch: 'deploy-status' }), { origin: { surface: 'cli' }, runner: agent })
      .catch((e: unknown) => e);
    expect((undeclared as Error).message).toMatch(/not a declared check/);
    expect(await c.loops.get('tg', 'loop')).toBeNull();
  });
});

describe.concurrent('token budgets', () => {
  it('--max-tokens reached pauses the loop with the spend named; resume gives a fresh allowance', async ({ cleanups, expect }) => {
    const { c, model } = await setup(cleanups, {});
    model.respond(() => 'All quiet.');
    await c.schedules.set('b', 'loop', spec('check the queue', 1, { maxTokens: 500 }), { origin: { surface: 'cli' }, runner: agent });
    await waitFor(async () => ((await c.loops.get('b', 'loop'))?.status === 'paused' ? true : undefined), 90_000, 'paused by its budget');
    const paused = (await c.loops.get('b', 'loop'))!;
    const spent = paused.spend!.inputTokens + paused.spend!.outputTokens;
    expect(spent).toBeGreaterThanOrEqual(500);
    expect(paused.statusReason).toMatch(
      /^token budget of 500 reached \(--max-tokens\): [\d,]+ tokens since it was set or resumed; in all \d+ model calls?, [\d,]+ tokens in, [\d,]+ out/,
    );
    const [notice] = await waitForEvents(c, 'b', 'notice', 1);
    expect(notice!.data.text).toMatch(/^Loop paused: token budget of 500 reached/);
    const callsAtPause = model.requests.length;
    expect(await c.schedules.resume('b', 'loop')).toMatch(/^Loop resumed/);
    await waitFor(async () => (model.requests.length > callsAtPause ? true : undefined), 10_000, 'a turn after resume');
    expect((await c.loops.get('b', 'loop'))!.budgetTokens).toBeLessThan(spent);
  });
});

describe.concurrent('usage totals', () => {
  it("agree across /loop status, hermes status, /api, cron show and /metrics, and with the model server's own counts", async ({
    cleanups,
    expect,
  }) => {
    const KEY = 'usage-key';
    const { env, c, model, worker } = await setup(cleanups, {
      'api_server.port': 0,
      'api_server.key': KEY,
      'cron.min_interval_seconds': 1,
    });
    model.respond((req) => `Nothing new (${req.messages.length} messages read).`);
    const { call } = await startCronApiGateway(cleanups, env, KEY);
    const api = async (path: string) => (await call('GET', path)).body;

    // A task long enough (over 1,024 tokens) that the model server's prompt cache serves later ticks' prefix.
    const task = `check the inbox against these rules: ${Array.from({ length: 120 }, (_, i) => `rule ${i}: file mail from sender ${i} under folder ${i % 7}.`).join(' ')}`;
    await c.schedules.set('u', 'loop', spec(task, 1, {}, 3), { origin: { surface: 'cli' }, runner: agent });
    await waitFor(async () => ((await c.loops.get('u', 'loop'))?.status === 'finished' ? true : undefined), 90_000, 'three ticks');
    const loopCalls = model.requests.length;
    const job = (await call('POST', '/api/cron/jobs', { schedule: 'in 1s', prompt: 'summarise the day', name: 'daily' })).body;
    await waitFor(async () => ((await api(`/api/cron/jobs/${job.id}`)).last_status === 'ok' ? true : undefined), 90_000, 'the cron run');

    const served = (from: number, to: number) => model.requests.slice(from, to);
    const loop = (await c.loops.get('u', 'loop'))!;
    // The loop's totals are the server's counts.
    expect(loop.spend).toEqual({
      calls: loopCalls,
      inputTokens: served(0, loopCalls).reduce((n, r) => n + r.promptTokens, 0),
      outputTokens: loop.spend!.outputTokens,
      cachedTokens: served(0, loopCalls).reduce((n, r) => n + r.cachedTokens!, 0),
      lastInputTokens: served(0, loopCalls).at(-1)!.promptTokens,
      lastTurnTokens: loop.spend!.lastTurnTokens,
      estimated: false,
    });
    // One call per tick: the last tick cost its call's tokens in and out.
    const lastReply = (await waitForEvents(c, 'u', 'reply', 3)).at(-1)!;
    expect(loop.spend!.lastTurnTokens).toBe(served(0, loopCalls).at(-1)!.promptTokens + countTokens(String(lastReply.data.text)));
    expect(loop.spend!.outputTokens).toBeGreaterThan(0);
    const { inputTokens, outputTokens, cachedTokens, calls } = loop.spend!;
    // Ticks 2 and 3 began with the request of the tick before: the server's cache served it.
    expect(cachedTokens).toBeGreaterThanOrEqual(2 * 1_024);
    const n = (x: number) => x.toLocaleString('en-US');
    // /loop status and hermes status.
    expect(await c.schedules.status('u', 'loop')).toContain(
      `${calls} model calls, ${n(inputTokens)} tokens in (${n(cachedTokens!)} cached), ${n(outputTokens)} out`,
    );
    const shell = await runHermes(env, ['status', '--all']);
    expect(shell.stdout).toContain(`${n(inputTokens)} in (${n(cachedTokens!)} cached) / ${n(outputTokens)} out · ${calls} calls`);
    // /api.
    const listed = (await api('/api/schedules')).data.find((s: { session_id: string }) => s.session_id === 'u');
    // On the wire in snake_case (docs/GATEWAY.md, "One casing"), the record's totals otherwise.
    expect(listed.spend).toEqual(spendWire(loop.spend));
    // cron show and /api/cron/jobs.
    const shown = await api(`/api/cron/jobs/${job.id}`);
    const cronServed = served(loopCalls, model.requests.length);
    expect(shown.spend).toMatchObject({ calls: cronServed.length, input_tokens: cronServed.reduce((s, r) => s + r.promptTokens, 0) });
    const cronShow = await runHermes(env, ['cron', 'show', 'daily']);
    expect(cronShow.stdout).toContain(
      `${shown.spend.calls} model call${shown.spend.calls === 1 ? '' : 's'}, ${n(shown.spend.input_tokens)} tokens in, ${n(shown.spend.output_tokens)} out`,
    );
    // /metrics of the worker that ran both.
    const text = await worker.metrics.registry.metrics();
    const sample = (series: string) =>
      Number(
        text
          .split('\n')
          .find((l) => l.startsWith(`${series} `))
          ?.split(' ')[1] ?? NaN,
      );
    expect(sample('hermes_model_tokens_total{kind="loop",direction="input"}')).toBe(inputTokens);
    expect(sample('hermes_model_tokens_total{kind="loop",direction="output"}')).toBe(outputTokens);
    expect(sample('hermes_model_tokens_total{kind="loop",direction="cached"}')).toBe(cachedTokens);
    expect(sample('hermes_model_calls_total{kind="loop",outcome="ok"}')).toBe(calls);
    expect(sample('hermes_model_tokens_total{kind="cron",direction="input"}')).toBe(shown.spend.input_tokens);
    expect(sample('hermes_model_tokens_total{kind="cron",direction="output"}')).toBe(shown.spend.output_tokens);
  });
});
