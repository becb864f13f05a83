/**
 * Economy settings of cron jobs (docs/CRON.md, "Economy"): `--watch` skips
 * the model while the watched check is unchanged, `--max-tokens` pauses the
 * job with its spend named (resume gives a fresh allowance), `--model` sends
 * the turn to a declared model, every run records its spend and the job keeps
 * the totals; `/api` answers to its own `tools.allow_from`. Real Redis, real
 * BullMQ, the real agent runner against the fake model server. The tokens
 * expected are what the model server reported, read off the wire by a proxy in
 * front of it (`usageTap`), never figures written here.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { openCronApi } from '../cli/gateway-cron-api.ts';
import { startGateway } from '../gateway/gateway-process.ts';
import { configDefaults } from '../scheduler/config/config.ts';
import { applyRun as applyRunWith, resumeCronJob, type CronJob, type CronRun } from '../scheduler/cron/cron-job.ts';
import { runNotice, withNotice } from '../scheduler/cron/cron-notice.ts';
import { createLogger } from '../scheduler/logger.ts';
import { formatSpend, spendWire, type ModelSpend, type SpendTotals, type SpendWire } from '../scheduler/model-spend.ts';
import type { WireKeys } from '../scheduler/text/wire-case.ts';
import { runCronCli } from './support/cron-cli.ts';
import { asyncListener } from './support/http.ts';
import { openCronService, startCronWorker } from './support/cron-worker.ts';
import { testEnv } from './support/env.ts';
import { lastUserText, startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import { waitFor } from './support/wait-for.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { cronJobFixture, cronRunFixture, FIXTURE_T0 } from './support/record-fixtures.ts';

/** `applyRun` with `cron.max_consecutive_failures` from the config's defaults unless a test sets it. */
const applyRun = (job: CronJob, run: CronRun, pickedAt: number, now: number, options: Partial<Parameters<typeof applyRunWith>[4]> = {}) =>
  applyRunWith(job, run, pickedAt, now, { maxConsecutiveFailures: configDefaults().cron.max_consecutive_failures, ...options });

/** One answer of the model server as it went over the wire. */
interface Reported {
  model: string;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
}

/**
 * A proxy in front of the fake model server that records the `usage` each answer reported
 * (JSON answers and streamed ones), so expectations come from what the server said.
 */
async function usageTap(target: string): Promise<{ baseUrl: string; reported: Reported[]; close(): Promise<void> }> {
  const origin = new URL(target).origin;
  const reported: Reported[] = [];
  const server: Server = createServer(
    asyncListener(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const up = await fetch(`${origin}${req.url}`, {
        method: req.method,
        headers: { 'content-type': 'application/json', authorization: String(req.headers.authorization ?? '') },
        body: req.method === 'GET' || req.method === 'HEAD' ? undefined : Buffer.concat(chunks),
      });
      const text = await up.text();
      const bodies = (up.headers.get('content-type') ?? '').includes('event-stream')
        ? text
            .split('\n')
            .filter((l) => l.startsWith('data: {'))
            .map((l) => l.slice(6))
        : [text];
      for (const b of bodies) {
        try {
          const parsed = JSON.parse(b) as {
            model?: string;
            usage?: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } };
          };
          if (parsed.usage)
            reported.push({
              model: String(parsed.model),
              promptTokens: parsed.usage.prompt_tokens,
              completionTokens: parsed.usage.completion_tokens,
              cachedTokens: parsed.usage.prompt_tokens_details?.cached_tokens ?? 0,
            });
        } catch {
          // not JSON (an error page): nothing reported
        }
      }
      const headers: Record<string, string> = {};
      for (const h of ['content-type', 'x-should-retry', 'retry-after']) {
        const v = up.headers.get(h);
        if (v !== null) headers[h] = v;
      }
      res.writeHead(up.status, headers).end(text);
    }),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    reported,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Totals as the job should keep them after these answers (`SpendTotals`). */
function totalsOf(answers: Reported[]): SpendTotals {
  return {
    calls: answers.length,
    inputTokens: answers.reduce((n, a) => n + a.promptTokens, 0),
    outputTokens: answers.reduce((n, a) => n + a.completionTokens, 0),
    cachedTokens: answers.reduce((n, a) => n + a.cachedTokens, 0),
    lastInputTokens: answers.at(-1)?.promptTokens ?? 0,
    // One call per run here: the last run cost what its one answer reported.
    lastTurnTokens: (answers.at(-1)?.promptTokens ?? 0) + (answers.at(-1)?.completionTokens ?? 0),
    estimated: false,
  };
}

/** The sum of the runs' recorded spend, as totals. */
function totalsOfRuns(runs: Array<{ spend?: ModelSpend }>, lastInputTokens: number): SpendTotals {
  const spent = runs.map((r) => r.spend!).filter((s) => s.calls > 0);
  return {
    calls: spent.reduce((n, s) => n + s.calls, 0),
    inputTokens: spent.reduce((n, s) => n + s.inputTokens, 0),
    outputTokens: spent.reduce((n, s) => n + s.outputTokens, 0),
    cachedTokens: spent.reduce((n, s) => n + s.cachedTokens, 0),
    lastInputTokens,
    lastTurnTokens: (spent.at(-1)?.inputTokens ?? 0) + (spent.at(-1)?.outputTokens ?? 0),
    estimated: spent.some((s) => s.estimated),
  };
}

/** A fake model behind a usage tap, and a test environment using it. */
async function stack(cleanups: CleanUp[], overrides: Record<string, unknown> = {}) {
  const model: FakeOpenAI = await startFakeOpenAI();
  const tap = await usageTap(model.baseUrl);
  cleanups.push(
    () => model.close(),
    () => tap.close(),
  );
  const env = testEnv({ 'agent.base_url': tap.baseUrl, 'cron.min_interval_seconds': 1, ...overrides });
  cleanups.push(() => env.cleanup());
  const api = openCronService(env.config);
  cleanups.push(() => api.close());
  const cli = (...args: string[]) => runCronCli(env.config, args);
  return { model, tap, env, api, cli };
}

/** A folder for `tools.files.roots` with one file in it. */
function watchedFile(cleanups: CleanUp[], content: string): { dir: string; path: string } {
  const dir = mkdtempSync(join(tmpdir(), 'hermes-cron-watch-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'status.txt');
  writeFileSync(path, content);
  return { dir, path };
}

/** Runs of a job, oldest first, without skips. */
async function runsOf(api: Awaited<ReturnType<typeof stack>>['api'], id: string): Promise<CronRun[]> {
  return (await api.store.runs(id, 100)).filter((r) => r.status !== 'skipped').reverse();
}

/** `hermes cron run` and wait until the run is recorded. @returns the runs, oldest first */
async function runOnce(s: Awaited<ReturnType<typeof stack>>, id: string): Promise<CronRun[]> {
  const before = (await runsOf(s.api, id)).length;
  expect((await s.cli('run', id)).code).toBe(0);
  return await waitFor(
    async () => {
      const runs = await runsOf(s.api, id);
      return runs.length > before && runs.at(-1)!.deliveries.every((d) => d.status !== 'pending') ? runs : undefined;
    },
    15_000,
    'the run recorded',
  );
}

// Not beside the others: a run that takes over a second on a loaded machine would make the next
// occurrence a skipped overlap, and these count runs of a job every second.
describe('cron --watch (real worker)', () => {
  it('runs with the watched file unchanged make no model call; a change makes one, with the new content in the request', async ({
    cleanups,
    expect,
  }) => {
    const file = watchedFile(cleanups, 'build 41: green');
    const s = await stack(cleanups, { 'tools.files.roots': [file.dir] });
    const w = await startCronWorker(s.env.config);
    cleanups.push(() => w.close());
    s.model.respond((req) => (lastUserText(req).includes('build 42') ? 'build 42 is red' : 'build 41 is green'));

    const added = await s.cli(
      'add',
      'every 1s',
      'Report the build status',
      '--name',
      'watcher',
      '--watch',
      `read_file:${file.path}`,
      '--repeat',
      '6',
      '--json',
    );
    expect(added.code, added.stderr).toBe(0);
    const job = JSON.parse(added.stdout) as { id: string; watch: string; unchanged_runs: number };
    expect(job).toMatchObject({ watch: `read_file:${file.path}`, unchanged_runs: 0 });

    await waitFor(async () => (await runsOf(s.api, job.id)).length >= 3, 20_000, 'three runs');
    expect(s.model.requests).toHaveLength(1); // only the first run asked the model
    writeFileSync(file.path, 'build 42: red (test_login failed)');
    await waitFor(async () => (await s.api.store.get(job.id))?.state === 'completed', 20_000, 'six runs, then completed');

    const runs = await runsOf(s.api, job.id);
    expect(runs).toHaveLength(6);
    expect(runs.every((r) => r.status === 'ok')).toBe(true);
    // Two model calls: the first run, and the first run after the change; the others are unchanged.
    expect(s.model.requests).toHaveLength(2);
    expect(lastUserText(s.model.requests[0]!)).toContain('build 41: green');
    expect(lastUserText(s.model.requests[1]!)).toContain('build 42: red (test_login failed)');
    expect(lastUserText(s.model.requests[1]!)).toContain('Report the build status');
    const changed = runs.filter((r) => !r.unchanged);
    expect(changed.map((r) => r.output)).toEqual(['build 41 is green', 'build 42 is red']);
    expect(runs[0]!.unchanged).toBe(false);
    const unchanged = runs.filter((r) => r.unchanged);
    expect(unchanged).toHaveLength(4);
    for (const r of unchanged)
      expect(r).toMatchObject({ output: null, deliveries: [], spend: { calls: 0, inputTokens: 0, outputTokens: 0 } });
    // Only the two changed runs delivered.
    const replies = (await w.deps.sessions.readEvents(`cron:${job.id}`, '0', { count: 500 })).filter((e) => e.type === 'reply');
    expect(replies.map((e) => e.data.text)).toEqual(['build 41 is green', 'build 42 is red']);

    // Totals: the sum of the runs' spend, and what the server reported.
    const shown = JSON.parse((await s.cli('show', job.id, '--json', '--limit', '10')).stdout) as {
      spend: SpendWire;
      unchanged_runs: number;
      watch: string;
      watch_digest: string | null;
      runs: Array<{ spend: WireKeys<ModelSpend>; unchanged: boolean }>;
    };
    expect(s.tap.reported).toHaveLength(2);
    // `--json` is a wire format: the totals in snake_case (docs/GATEWAY.md, "One casing").
    expect(shown.spend).toEqual(spendWire(totalsOf(s.tap.reported)));
    expect(shown.spend).toEqual(spendWire(totalsOfRuns(runs, runs.filter((r) => r.spend!.calls > 0).at(-1)!.spend!.lastInputTokens)));
    expect(shown.unchanged_runs).toBe(4);
    expect(shown.watch_digest).toMatch(/^[0-9a-f]{64}$/);
    expect(shown.runs.filter((r) => r.unchanged)).toHaveLength(4);

    // Human output: the watch, the spend and the unchanged runs; per run tokens in/out or `unchanged`.
    const human = (await s.cli('show', job.id, '--limit', '10')).stdout;
    expect(human).toContain(`  watch     read_file:${file.path}`);
    expect(human).toContain(`  spend     ${formatSpend(totalsOf(s.tap.reported))} · 4 unchanged runs`);
    const table = (await s.cli('runs', job.id)).stdout.split('\n');
    expect(table[0]).toMatch(/DELIVERY +TOKENS IN\/OUT +OUTPUT$/);
    expect(table.filter((l) => /\sunchanged$/.test(l))).toHaveLength(4);
    const first = s.tap.reported[0]!;
    const n = (x: number) => x.toLocaleString('en-US');
    expect(table.at(-1)).toMatch(new RegExp(` ${n(first.promptTokens)}/${n(first.completionTokens)} +build 41 is green$`));
  });

  it('a script job with a watch skips the script while the output is unchanged; --model and --max-tokens are refused for it', async ({
    cleanups,
    expect,
  }) => {
    const file = watchedFile(cleanups, 'v1');
    const s = await stack(cleanups, { 'tools.files.roots': [file.dir] });
    const w = await startCronWorker(s.env.config);
    cleanups.push(() => w.close());

    const refusedModel = await s.cli('add', 'every 1h', '--script', 'echo hi', '--model', 'cheap');
    expect(refusedModel).toMatchObject({ code: 2, stderr: expect.stringMatching(/^hermes: --model: a --script job makes no model calls/) });
    const refusedBudget = await s.cli('add', 'every 1h', '--script', 'echo hi', '--max-tokens', '1000');
    expect(refusedBudget).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^hermes: --max-tokens: a --script job makes no model calls/),
    });
    expect(await s.api.store.list()).toEqual([]);

    // The script prints what it was given on stdin (the prompt and the watch's output).
    const added = JSON.parse(
      (await s.cli('add', 'every 1h', 'check', '--script', 'cat', '--watch', `read_file:${file.path}`, '--name', 'sh', '--json')).stdout,
    ) as { id: string };
    await runOnce(s, added.id);
    await runOnce(s, added.id);
    writeFileSync(file.path, 'v2');
    const runs = await runOnce(s, added.id);
    expect(runs.map((r) => r.unchanged)).toEqual([false, true, false]);
    expect(runs[0]!.output).toContain('v1');
    expect(runs[2]!.output).toContain('v2');
    expect(runs[1]!.output).toBeNull();
    // Adding a model to the script job is refused too, and changes nothing.
    expect(await s.cli('edit', 'sh', '--model', 'cheap')).toMatchObject({ code: 2 });
    expect((await s.api.store.get(added.id))!.model ?? null).toBeNull();
    expect((await s.cli('show', 'sh')).stdout).toContain('  unchanged 1 run (the script did not run)');
  });
});

describe.concurrent('cron --max-tokens and agent.max_tokens_per_turn (real worker)', () => {
  it('the job pauses once its runs spent --max-tokens, with the spend named; resume gives a fresh allowance', async ({
    cleanups,
    expect,
  }) => {
    const s = await stack(cleanups);
    const w = await startCronWorker(s.env.config);
    cleanups.push(() => w.close());
    s.model.respond(() => 'all quiet');

    const job = JSON.parse(
      (await s.cli('add', 'every 1h', 'anything new?', '--name', 'budgeted', '--max-tokens', '1000000000', '--json')).stdout,
    ) as { id: string; max_tokens: number };
    expect(job.max_tokens).toBe(1_000_000_000);
    await runOnce(s, job.id);
    const perRun = s.tap.reported[0]!.promptTokens + s.tap.reported[0]!.completionTokens;
    expect((await s.api.store.get(job.id))!.budget_tokens).toBe(perRun);

    // A limit one token above one run's spend: a fresh allowance (edit), one run under it, the next reaches it.
    const limit = perRun + 1;
    const edited = JSON.parse((await s.cli('edit', 'budgeted', '--max-tokens', String(limit), '--json')).stdout) as {
      max_tokens: number;
      budget_tokens: number;
    };
    expect(edited).toMatchObject({ max_tokens: limit, budget_tokens: 0 });
    await runOnce(s, job.id);
    const used1 = s.tap.reported.slice(1).reduce((n, a) => n + a.promptTokens + a.completionTokens, 0);
    expect((await s.api.store.get(job.id))!).toMatchObject({ state: used1 >= limit ? 'paused' : 'scheduled', budget_tokens: used1 });
    await runOnce(s, job.id);
    const used2 = s.tap.reported.slice(1).reduce((n, a) => n + a.promptTokens + a.completionTokens, 0);
    expect(used2).toBeGreaterThanOrEqual(limit);
    const paused = (await s.api.store.get(job.id))!;
    const n = (x: number) => x.toLocaleString('en-US');
    const reason = `token budget of ${n(limit)} reached (--max-tokens): ${n(used2)} tokens since it was set or resumed; in all ${formatSpend(totalsOf(s.tap.reported))}`;
    expect(paused).toMatchObject({
      state: 'paused',
      next_run_at: null,
      paused_reason: reason,
      budget_tokens: used2,
      spend: totalsOf(s.tap.reported),
    });
    expect(await s.api.store.schedulerNext(job.id)).toBeUndefined();
    // The run's reply is delivered, with the pause notice after it.
    const replies = (await w.deps.sessions.readEvents(`cron:${job.id}`, '0', { count: 500 })).filter((e) => e.type === 'reply');
    expect(replies.at(-1)!.data.text).toBe(
      `all quiet\n\nCron job "budgeted" (${job.id}) paused: Paused: ${reason}; \`hermes cron resume ${job.id}\` gives a fresh allowance.`,
    );
    expect((await s.cli('show', 'budgeted')).stdout).toContain(
      `  budget    ${n(used2)} of ${n(limit)} tokens used since it was set or resumed (--max-tokens)`,
    );
    expect((await s.cli('doctor')).stdout).toContain(`paused: ${reason}`);

    // Resume: a fresh allowance; the next run goes on (and, at this limit, pauses again after two).
    const resumed = await s.cli('resume', 'budgeted', '--json');
    expect(JSON.parse(resumed.stdout)).toMatchObject({ state: 'scheduled', budget_tokens: 0, paused_reason: null });
    await runOnce(s, job.id);
    const after = (await s.api.store.get(job.id))!;
    const used3 = s.tap.reported.at(-1)!.promptTokens + s.tap.reported.at(-1)!.completionTokens;
    expect(after).toMatchObject({ state: used3 >= limit ? 'paused' : 'scheduled', budget_tokens: used3, spend: totalsOf(s.tap.reported) });
    // The totals are the sum of every run's spend.
    const runs = await runsOf(s.api, job.id);
    expect(runs).toHaveLength(4);
    expect(after.spend).toEqual(totalsOfRuns(runs, runs.at(-1)!.spend!.lastInputTokens));
  });

  it('the answer that passed agent.max_tokens_per_turn is kept: the run is ok, its reply delivered, the job paused naming the spend', async ({
    cleanups,
    expect,
  }) => {
    const s = await stack(cleanups, { 'agent.max_tokens_per_turn': 1 });
    const w = await startCronWorker(s.env.config);
    cleanups.push(() => w.close());
    s.model.respond(() => 'Four pull requests are open.');
    const job = JSON.parse((await s.cli('add', 'every 1h', 'summarise', '--name', 'greedy', '--json')).stdout) as { id: string };
    const [run] = await runOnce(s, job.id);
    const used = totalsOf(s.tap.reported).inputTokens + totalsOf(s.tap.reported).outputTokens;
    expect(run).toMatchObject({ status: 'ok', error: null, output: 'Four pull requests are open.' });
    expect(run!.spend).toMatchObject({
      calls: s.tap.reported.length,
      inputTokens: totalsOf(s.tap.reported).inputTokens,
      outputTokens: totalsOf(s.tap.reported).outputTokens,
    });
    const reason = `one run used ${used.toLocaleString('en-US')} tokens, over agent.max_tokens_per_turn (1)`;
    const stored = (await s.api.store.get(job.id))!;
    expect(stored).toMatchObject({ state: 'paused', paused_reason: reason, spend: totalsOf(s.tap.reported) });
    const reply = (await w.deps.sessions.readEvents(`cron:${job.id}`, '0', { count: 500 })).filter((e) => e.type === 'reply').at(-1)!;
    expect(reply.data.text).toBe(
      `Four pull requests are open.\n\nCron job "greedy" (${job.id}) paused: Paused: ${reason}; \`hermes cron resume ${job.id}\` continues.`,
    );
  });
});

describe.concurrent('cron --model (real worker)', () => {
  it('sends the turn to the declared model; an undeclared one is refused with exit 2 and nothing is created', async ({
    cleanups,
    expect,
  }) => {
    const s = await stack(cleanups, { 'agent.models': { cheap: { model: 'cheap-model-id' } } });
    const w = await startCronWorker(s.env.config);
    cleanups.push(() => w.close());
    const refused = await s.cli('add', 'every 1h', 'x', '--model', 'pricey');
    expect(refused).toMatchObject({ code: 2, stderr: 'hermes: --model "pricey" is not a declared model; declared: cheap.' });
    expect(await s.api.store.list()).toEqual([]);

    const cheap = JSON.parse(
      (await s.cli('add', 'every 1h', 'cheap question', '--model', 'cheap', '--name', 'cheap', '--json')).stdout,
    ) as { id: string; model: string };
    expect(cheap.model).toBe('cheap');
    const plain = JSON.parse((await s.cli('add', 'every 1h', 'plain question', '--name', 'plain', '--json')).stdout) as {
      id: string;
      model: string | null;
    };
    expect(plain.model).toBeNull();
    await runOnce(s, cheap.id);
    await runOnce(s, plain.id);
    expect(s.model.requests.map((r) => [lastUserText(r), r.model])).toEqual([
      ['cheap question', 'cheap-model-id'],
      ['plain question', s.env.config.agent.model],
    ]);
    expect((await s.cli('show', 'cheap')).stdout).toContain('  model     cheap');
    // `edit --model none` goes back to the primary model.
    expect(JSON.parse((await s.cli('edit', 'cheap', '--model', 'none', '--json')).stdout).model).toBeNull();
    const listed = JSON.parse((await s.cli('list', '--json')).stdout) as Array<Record<string, unknown>>;
    for (const j of listed)
      expect(Object.keys(j)).toEqual(expect.arrayContaining(['watch', 'model', 'max_tokens', 'budget_tokens', 'spend', 'unchanged_runs']));
  });
});

describe.concurrent('/api: cron economy fields', () => {
  const KEY = 'cron-economy-key';

  it("answers to api's rights: an undeclared model or a watch not allowed from api is 400 and nothing is created or changed", async ({
    cleanups,
    expect,
  }) => {
    const file = watchedFile(cleanups, 'x');
    const s = await stack(cleanups, {
      'api_server.port': 0,
      'api_server.key': KEY,
      'agent.models': { cheap: { model: 'cheap-model-id' } },
      'tools.files.roots': [file.dir],
      'tools.allow_from': { files: ['cli', 'cron'] },
    });
    const log = createLogger({ level: 'silent' });
    const cron = await openCronApi(s.env.config, s.env.redisUrl, log);
    cleanups.push(() => cron.close());
    const gw = await startGateway({ config: s.env.config, redisUrl: s.env.redisUrl, log, cron: cron.api });
    cleanups.push(() => gw.close());
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${gw.httpAddress.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, any> };
    };

    const badModel = await call('POST', '/api/cron/jobs', { schedule: 'every 1h', prompt: 'x', model: 'pricey' });
    expect(badModel.status).toBe(400);
    expect(JSON.stringify(badModel.body)).toContain('`model` \\"pricey\\" is not a declared model');
    const badWatch = await call('POST', '/api/cron/jobs', { schedule: 'every 1h', prompt: 'x', watch: `read_file:${file.path}` });
    expect(badWatch.status).toBe(400);
    expect(JSON.stringify(badWatch.body)).toContain('not allowed from api (tools.allow_from.files)');
    expect((await call('POST', '/api/cron/jobs', { schedule: 'every 1h', prompt: 'x', max_tokens: 0 })).status).toBe(400);
    expect((await call('GET', '/api/cron/jobs')).body.data).toEqual([]);

    const created = await call('POST', '/api/cron/jobs', {
      schedule: 'every 1h',
      prompt: 'x',
      name: 'api-job',
      model: 'cheap',
      max_tokens: 5000,
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      model: 'cheap',
      max_tokens: 5000,
      budget_tokens: 0,
      watch: null,
      unchanged_runs: 0,
      spend: { calls: 0 },
    });
    expect((await call('PATCH', '/api/cron/jobs/api-job', { watch: `read_file:${file.path}` })).status).toBe(400);
    expect((await call('PATCH', '/api/cron/jobs/api-job', { model: null, max_tokens: null })).body).toMatchObject({
      model: null,
      max_tokens: null,
    });

    // The CLI (and the runs, as `cron`) may use the files; an /api edit of such a job would make its
    // runs answer to api's rights too, so it is refused and changes nothing.
    const cliJob = await s.cli('add', 'every 1h', 'y', '--name', 'cli-job', '--watch', `read_file:${file.path}`, '--json');
    expect(cliJob.code, cliJob.stderr).toBe(0);
    const renamed = await call('PATCH', '/api/cron/jobs/cli-job', { name: 'renamed' });
    expect(renamed.status).toBe(400);
    expect(JSON.stringify(renamed.body)).toContain('not allowed from api');
    expect((await call('GET', '/api/cron/jobs/cli-job')).body).toMatchObject({
      name: 'cli-job',
      watch: `read_file:${file.path}`,
      tool_surfaces: ['cron'],
    });
  });
});

describe.concurrent('cron economy (pure)', () => {
  const T0 = FIXTURE_T0;
  /** The fixture job with a 25-token budget and a `ci` watch. */
  const job = (over: Partial<CronJob> = {}): CronJob => ({ ...cronJobFixture({ economy: { max_tokens: 25, watch: 'ci' } }), ...over });
  const spend = (inputTokens: number, outputTokens: number): ModelSpend => ({
    calls: 1,
    inputTokens,
    outputTokens,
    cachedTokens: 0,
    lastInputTokens: inputTokens,
    estimated: false,
  });
  /** Run `n` of the job, due n minutes after T0. */
  const run = (n: number, over: Partial<CronRun> = {}): CronRun => cronRunFixture('abcdefabcdef', T0 + n * 60_000, over);

  it("adds each run's spend to the totals and the budget; pauses at --max-tokens; resume resets the budget only", () => {
    let j = applyRun(job(), run(1, { spend: spend(10, 5) }), T0, T0, { watch: { spec: 'ci', digest: 'd1' } });
    expect(j).toMatchObject({
      state: 'scheduled',
      budget_tokens: 15,
      watch_digest: 'd1',
      spend: { calls: 1, inputTokens: 10, outputTokens: 5, lastInputTokens: 10 },
    });
    j = applyRun(j, run(2, { unchanged: true, output: null }), T0, T0, { watch: { spec: 'ci', digest: 'd1' } });
    expect(j).toMatchObject({ state: 'scheduled', budget_tokens: 15, unchanged_runs: 1 });
    j = applyRun(j, run(3, { spend: spend(8, 2) }), T0, T0, { watch: { spec: 'ci', digest: 'd2' } });
    expect(j).toMatchObject({
      state: 'paused',
      next_run_at: null,
      budget_tokens: 25,
      paused_reason:
        'token budget of 25 reached (--max-tokens): 25 tokens since it was set or resumed; in all 2 model calls, 18 tokens in, 7 out (last input 8)',
    });
    const resumed = resumeCronJob(j, T0 + 10 * 60_000)!;
    expect(resumed).toMatchObject({
      state: 'scheduled',
      budget_tokens: 0,
      spend: { calls: 2, inputTokens: 18, outputTokens: 7 },
      unchanged_runs: 1,
    });
  });

  it('a failed run keeps the old digest (the next occurrence retries); a turn over agent.max_tokens_per_turn pauses at once', () => {
    const failed = applyRun(
      job({ watch_digest: 'd1' }),
      run(1, { status: 'error', error: 'HTTP 500', output: null, spend: spend(3, 0) }),
      T0,
      T0,
      { watch: { spec: 'ci', digest: 'd2' } },
    );
    expect(failed).toMatchObject({ watch_digest: 'd1', state: 'scheduled', failure_streak: 1, budget_tokens: 3 });
    // A digest of a watch the job no longer has (edited during the run) is not kept.
    expect(applyRun(job({ watch: 'other' }), run(1), T0, T0, { watch: { spec: 'ci', digest: 'd2' } }).watch_digest).toBeNull();
    const over = applyRun(
      job({ max_tokens: null }),
      run(1, { status: 'error', error: 'This turn used 12 tokens, over agent.max_tokens_per_turn (10).', spend: spend(9, 3) }),
      T0,
      T0,
      { overTurnBudget: { usedTokens: 12, limitTokens: 10 }, maxConsecutiveFailures: 3 },
    );
    expect(over).toMatchObject({ state: 'paused', paused_reason: 'one run used 12 tokens, over agent.max_tokens_per_turn (10)' });
    expect(runNotice(over, run(1, { status: 'error', error: 'This turn used 12 tokens' }), true)).toContain(
      'Paused: one run used 12 tokens, over agent.max_tokens_per_turn (10)',
    );
    // The answer that passed it was kept: an `ok` run, its reply delivered with the pause notice after it.
    const kept = applyRun(job({ max_tokens: null }), run(1, { output: 'the answer', spend: spend(9, 3) }), T0, T0, {
      overTurnBudget: { usedTokens: 12, limitTokens: 10 },
    });
    expect(kept).toMatchObject({
      state: 'paused',
      last_status: 'ok',
      paused_reason: 'one run used 12 tokens, over agent.max_tokens_per_turn (10)',
    });
    const told = withNotice(run(1, { output: 'the answer', deliveries: [{ target: 'local', status: 'pending' }] }), kept, true, ['local']);
    expect(told.delivery_text).toBe(
      'the answer\n\nCron job "n" (abcdefabcdef) paused: Paused: one run used 12 tokens, over agent.max_tokens_per_turn (10); `hermes cron resume abcdefabcdef` continues.',
    );
  });

  it('the run that reached --max-tokens delivers its reply with the pause notice after it; --notify never sends the reply alone', () => {
    const paused = applyRun(job(), run(1, { spend: spend(20, 10) }), T0, T0);
    const told = withNotice(run(1, { output: 'the reply', deliveries: [{ target: 'local', status: 'pending' }] }), paused, true, ['local']);
    expect(told.delivery_text).toMatch(/^the reply\n\nCron job "n" \(abcdefabcdef\) paused: Paused: token budget of 25 reached/);
    const quiet = run(1, { output: 'the reply', deliveries: [{ target: 'local', status: 'pending' }] });
    expect(withNotice(quiet, { ...paused, notify: 'never' }, true, ['local'])).toBe(quiet);
  });
});
