/**
 * `--watch` sees the whole state and hands the turn what changed (docs/CONTEXT.md, "Watches"):
 * a watched file is digested whole, an unchanged check makes no model call, a change is handed
 * over as what was appended, a unified diff, or head and tail; a check that fails counts as
 * changed; loops and cron jobs follow the one rule; a watch is checked against the tools' own
 * reach when it is set. Real Redis, real BullMQ, a real worker, the real `openai` client against
 * the local model server, whose recorded requests are what the model got.
 */
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe } from 'vitest';
import type { LoopSpec } from '../scheduler/loop/loop-service.ts';
import type { ScheduleEconomy } from '../scheduler/economy/economy-flags.ts';
import { ScheduleInputError } from '../scheduler/errors/schedule-input-error.ts';
import { startAgentStack } from './support/agent-stack.ts';
import { ciLog } from './support/ci-log.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { runCronCli } from './support/cron-cli.ts';
import { startCronApiGateway } from './support/cron-api-gateway.ts';
import { lastUserText, type RecordedRequest } from './support/fake-openai.ts';
import { runLoopCli } from './support/loop-cli.ts';
import { events, openTestClients, waitFor, waitForEvents, type TestClients } from './support/stack.ts';

/** Ceiling of each wait: ticks on a loaded machine can be slow; none of these waits is a fixed sleep. */
const WAIT_MS = 90_000;
/** Ceiling of a test of several waits. */
const TEST_MS = 300_000;
const agent = { kind: 'agent' as const };
const cli = { origin: { surface: 'cli' as const }, runner: agent };
const watching = (prompt: string, watch: string, intervalSeconds = 1): LoopSpec => ({
  prompt,
  intervalSeconds,
  times: null,
  until: null,
  notes: [],
  economy: { watch } satisfies ScheduleEconomy,
});

/** Wait for `n` more `tick.unchanged` events of a session than it has now. */
async function moreUnchanged(c: TestClients, sessionId: string, n: number): Promise<void> {
  const now = (await events(c, sessionId, 'tick.unchanged')).length;
  await waitForEvents(c, sessionId, 'tick.unchanged', now + n, WAIT_MS);
}

/** The watch section of a request's input: from `[Watch ` to its end. */
function watchSectionOf(req: RecordedRequest): string {
  const text = lastUserText(req);
  return text.slice(text.indexOf('\n[Watch ') + 1);
}

describe.concurrent('--watch sees the whole state', () => {
  it(
    'a 200 KB file: no model call while unchanged; a line appended at its end runs one turn that gets it, then none again',
    async ({ cleanups, expect }) => {
      const { c, model, dir } = await startAgentStack(cleanups, {});
      const file = join(dir, 'ci.log');
      const log = ciLog(200_000, 'running');
      writeFileSync(file, log);
      model.respond(() => 'noted');
      await c.schedules.set('w200', 'loop', watching('tell me when the build is green', `read_file:${file}`), cli);
      await moreUnchanged(c, 'w200', 3);
      expect(model.requests).toHaveLength(1);
      // The first turn gets the output, cut to its head and tail: the verdict is in it.
      const first = watchSectionOf(model.requests[0]!);
      expect(
        first.startsWith(
          `[Watch read_file:${file}: first run of the watched check. Its output (${Buffer.byteLength(log).toLocaleString('en-US')} bytes):]\n[step 1] `,
        ),
      ).toBe(true);
      expect(first.endsWith('BUILD STATUS: running\n')).toBe(true);
      appendFileSync(file, 'BUILD STATUS: green\n');
      await waitForEvents(c, 'w200', 'reply', 2, WAIT_MS);
      await moreUnchanged(c, 'w200', 3);
      expect(model.requests).toHaveLength(2);
      const lines = log.split('\n').length; // the appended line is the file's line `lines`
      const size = Buffer.byteLength(log) + 20;
      expect(watchSectionOf(model.requests[1]!)).toBe(
        `[Watch read_file:${file}: changed since it was last seen: 20 bytes appended (lines ${lines.toLocaleString('en-US')}–${lines.toLocaleString('en-US')}), ${size.toLocaleString('en-US')} bytes in all. What was appended:]\nBUILD STATUS: green\n`,
      );
      // Unchanged ticks add nothing to the transcript.
      expect((await c.sessions.transcript('w200')).filter((m) => m.role === 'user')).toHaveLength(2);
    },
    TEST_MS,
  );

  it(
    'an unchanged watch over a 10 MB file makes no model call at its ticks; a change at its end is handed over',
    async ({ cleanups, expect }) => {
      // The check reads the file through, each read waiting a turn of the worker's event loop: at 64 KiB a
      // read (160 turns) a check took 7–12 s with this file's tests on a seventh of one core, and beside two
      // copies of the suite (load 25–30) over 90 s; reads are 1 MiB now (file-tools.ts, RANGE_CHUNK_BYTES).
      // A check that fails counts as changed, so one past tools.timeout_seconds and the next check that worked
      // each ran a turn (3 model calls where 1 is asserted). The tool timeout is not what this test is about:
      // it is set generously.
      const { c, model, dir } = await startAgentStack(cleanups, { 'tools.timeout_seconds': 120 });
      const file = join(dir, 'big.log');
      writeFileSync(file, ciLog(10 * 1024 * 1024, 'running'));
      model.respond(() => 'noted');
      await c.schedules.set('w10m', 'loop', watching('tell me when the build is green', `read_file:${file}`), cli);
      await moreUnchanged(c, 'w10m', 3);
      expect(model.requests).toHaveLength(1);
      appendFileSync(file, 'BUILD STATUS: green\n');
      await waitForEvents(c, 'w10m', 'reply', 2, WAIT_MS);
      expect(watchSectionOf(model.requests[1]!)).toMatch(
        /: 20 bytes appended \(lines [\d,]+–[\d,]+\), [\d,]+ bytes in all\. What was appended:\]\nBUILD STATUS: green\n$/,
      );
    },
    TEST_MS,
  );

  it(
    'a change that is not an append comes as a unified diff; one too large for a diff as head and tail',
    async ({ cleanups, expect }) => {
      const { c, model, dir } = await startAgentStack(cleanups, { 'tools.watch_diff_max_bytes': 100_000 });
      const file = join(dir, 'deploy.log');
      const log = ciLog(60_000, 'deploying');
      writeFileSync(file, log);
      model.respond(() => 'noted');
      await c.schedules.set('wdiff', 'loop', watching('tell me when the deploy is live', `read_file:${file}`), cli);
      await moreUnchanged(c, 'wdiff', 2);
      // A line in the middle changes, and the verdict.
      const changed = log.replace(
        '[step 500] compiling module 500 of the api service ... ok',
        '[step 500] compiling module 500 ... FAILED, retried ok',
      );
      writeFileSync(file, changed.replace('BUILD STATUS: deploying', 'BUILD STATUS: live'));
      await waitForEvents(c, 'wdiff', 'reply', 2, WAIT_MS);
      const diff = watchSectionOf(model.requests[1]!);
      expect(diff).toMatch(
        new RegExp(
          `^\\[Watch read_file:${file}: changed since it was last seen\\. Unified diff of its output then and now:\\]\n--- then\n\\+\\+\\+ now\n@@ -497,7 \\+497,7 @@\n`,
        ),
      );
      expect(diff).toContain(
        '\n-[step 500] compiling module 500 of the api service ... ok\n+[step 500] compiling module 500 ... FAILED, retried ok\n',
      );
      expect(diff).toMatch(/\n-BUILD STATUS: deploying\n\+BUILD STATUS: live\n$/);
      expect(Buffer.byteLength(diff)).toBeLessThan(2_000);
      await moreUnchanged(c, 'wdiff', 1);
      // Grown past tools.watch_diff_max_bytes and rewritten: the output's head and tail.
      writeFileSync(file, ciLog(150_000, 'rolled back').replace(/compiling/g, 'linking'));
      await waitForEvents(c, 'wdiff', 'reply', 3, WAIT_MS);
      const whole = watchSectionOf(model.requests[2]!);
      expect(whole).toMatch(
        /^\[Watch read_file:.*: changed since it was last seen \(more than a diff can show\)\. Its output now \([\d,]+ bytes\):\]\n\[step 1\] linking /,
      );
      expect(whole).toMatch(
        /\n\[… [\d,]+ of [\d,]+ bytes \(lines [\d,]+–[\d,]+\) left out; read them with read_file offset=\d+ limit=\d+, or the end with tail_lines …\]\n/,
      );
      expect(whole.endsWith('BUILD STATUS: rolled back\n')).toBe(true);
    },
    TEST_MS,
  );

  it(
    'past tools.watch_max_bytes a file is digested by its size, head and end: a change at its end is still seen',
    async ({ cleanups, expect }) => {
      const { c, model, dir } = await startAgentStack(cleanups, { 'tools.watch_max_bytes': 64 * 1024 });
      const file = join(dir, 'ci.log');
      writeFileSync(file, ciLog(200_000, 'running'));
      model.respond(() => 'noted');
      await c.schedules.set('wmax', 'loop', watching('tell me when the build is green', `read_file:${file}`), cli);
      await moreUnchanged(c, 'wmax', 2);
      appendFileSync(file, 'BUILD STATUS: green\n');
      await waitForEvents(c, 'wmax', 'reply', 2, WAIT_MS);
      await moreUnchanged(c, 'wmax', 2);
      expect(model.requests).toHaveLength(2);
      const section = watchSectionOf(model.requests[1]!);
      // Not read whole, so neither an append nor a diff can be told: head and tail, the bytes not read named.
      expect(section).toMatch(/^\[Watch read_file:.*: changed since it was last seen \(more than a diff can show\)\./);
      expect(section).toMatch(/\n\[… [\d,]+ of [\d,]+ bytes left out \(not read\) …\]\n/);
      expect(section.endsWith('BUILD STATUS: running\nBUILD STATUS: green\n')).toBe(true);
    },
    TEST_MS,
  );

  it(
    'a failing check counts as changed: every tick runs a turn that sees the error; once it works, its output, then quiet',
    async ({ cleanups, expect }) => {
      const { c, model, dir } = await startAgentStack(cleanups, {});
      const file = join(dir, 'not-yet.log');
      model.respond(() => 'noted');
      await c.schedules.set('wfail', 'loop', watching('tell me when the log appears', `read_file:${file}`), cli);
      await waitForEvents(c, 'wfail', 'reply', 3, WAIT_MS);
      expect(await events(c, 'wfail', 'tick.unchanged')).toHaveLength(0);
      for (const req of model.requests.slice(0, 3)) {
        expect(watchSectionOf(req)).toBe(
          `[Watch read_file:${file}: the check failed, which counts as a change. The error:]\nError: No such file or directory: ${file}`,
        );
      }
      writeFileSync(file, 'deployed 42\n');
      await waitFor(
        async () => (model.requests.some((r) => watchSectionOf(r).includes('\ndeployed 42\n')) ? true : undefined),
        WAIT_MS,
        'the output',
      );
      await moreUnchanged(c, 'wfail', 2);
      const calls = model.requests.length;
      await moreUnchanged(c, 'wfail', 2);
      expect(model.requests).toHaveLength(calls);
      const seen = model.requests.find((r) => watchSectionOf(r).includes('\ndeployed 42\n'))!;
      expect(watchSectionOf(seen)).toBe(`[Watch read_file:${file}: first run of the watched check. Its output (12 bytes):]\ndeployed 42\n`);
    },
    TEST_MS,
  );

  it(
    'cron jobs follow the same rule: an append is handed over, a failing check runs every time, the base goes with the job',
    async ({ cleanups, expect }) => {
      const { env, c, model, dir } = await startAgentStack(cleanups, { 'cron.min_interval_seconds': 1 });
      const file = join(dir, 'ci.log');
      writeFileSync(file, ciLog(100_000, 'running'));
      model.respond(() => 'noted');
      const add = async (name: string, watch: string) => {
        const r = await runCronCli(env.config, ['add', 'every 1s', `report ${name}`, '--name', name, '--watch', watch, '--json']);
        expect(r.code, r.stderr).toBe(0);
        return (JSON.parse(r.stdout) as { id: string }).id;
      };
      const requestsOf = (name: string) => model.requests.filter((r) => lastUserText(r).startsWith(`report ${name}`));
      const growing = await add('growing', `read_file:${file}`);
      const missing = await add('missing', `read_file:${join(dir, 'missing.log')}`);
      const job = async (id: string) =>
        JSON.parse((await runCronCli(env.config, ['show', id, '--json'])).stdout) as { unchanged_runs: number };
      await waitFor(async () => ((await job(growing)).unchanged_runs >= 2 ? true : undefined), WAIT_MS, 'two unchanged runs');
      appendFileSync(file, 'BUILD STATUS: green\n');
      await waitFor(async () => (requestsOf('growing').length >= 2 ? true : undefined), WAIT_MS, 'a run after the append');
      expect(watchSectionOf(requestsOf('growing')[1]!)).toMatch(
        /: 20 bytes appended \(lines [\d,]+–[\d,]+\), [\d,]+ bytes in all\. What was appended:\]\nBUILD STATUS: green\n$/,
      );
      // The failing check: every run asked the model, none was unchanged.
      await waitFor(async () => (requestsOf('missing').length >= 3 ? true : undefined), WAIT_MS, 'three runs of the failing check');
      expect((await job(missing)).unchanged_runs).toBe(0);
      expect(watchSectionOf(requestsOf('missing')[2]!)).toMatch(
        /: the check failed, which counts as a change\. The error:\]\nError: No such file or directory: /,
      );
      // What the watch kept goes with the job.
      const base = c.keys.cronWatchBase(growing);
      expect(await c.redis.hget(base, 'owner')).toBe(growing);
      expect((await runCronCli(env.config, ['rm', growing])).code).toBe(0);
      expect(await c.redis.exists(base)).toBe(0);
    },
    TEST_MS,
  );
});

describe.concurrent('a watch is checked against the tools when it is set', () => {
  const KEY = 'watch-key';

  /** A root, a sibling whose name starts with the root's, and an environment whose tools read only the root. */
  function folders(cleanups: CleanUp[]) {
    const base = mkdtempSync(join(tmpdir(), 'hermes-watch-reach-'));
    cleanups.push(() => rmSync(base, { recursive: true, force: true }));
    const root = join(base, 'root');
    const sibling = join(base, 'root-secrets');
    mkdirSync(root);
    mkdirSync(sibling);
    writeFileSync(join(root, 'ci.log'), 'ok\n');
    writeFileSync(join(sibling, 'creds.txt'), 'secret\n');
    return { root, sibling };
  }

  it(
    'a path outside tools.files.roots (a sibling sharing its prefix too) or a host not allowed: CLI exit 2, /api 400, a refusal in chat',
    async ({ cleanups, expect }) => {
      const { root, sibling } = folders(cleanups);
      const { env, c } = openTestClients(cleanups, {
        'tools.files.roots': [root],
        'tools.http.allow': ['ci.example.com'],
        'api_server.port': 0,
        'api_server.key': KEY,
      });
      const { call } = await startCronApiGateway(cleanups, env, KEY);
      const outside = [
        `read_file:${sibling}/creds.txt`,
        `read_file:${root}/../root-secrets/creds.txt`,
        'read_file:../root-secrets/creds.txt',
        'read_file:/etc/passwd',
      ];
      const unreachable = ['http_get:https://evil.example.com/status', 'http_get:file:///etc/passwd', 'http_get:not a url'];
      for (const watch of [...outside, ...unreachable]) {
        const why = watch.startsWith('read_file:')
          ? /is outside the folders the tools may read \(tools\.files\.roots: /
          : /(is not an allowed host \(tools\.http\.allow: ci\.example\.com\)|only http and https URLs can be watched|is not a URL)/;
        const loop = await runLoopCli(env.config, ['loop', '10m', 'watch it', '--watch', watch, '--session', 'reach']);
        expect(loop.code, watch).toBe(2);
        expect(loop.stderr, watch).toMatch(why);
        const cron = await runCronCli(env.config, ['add', 'every 1h', 'watch it', '--watch', watch]);
        expect(cron.code, watch).toBe(2);
        expect(cron.stderr, watch).toMatch(why);
        const apiLoop = await call('POST', '/api/schedules', { kind: 'loop', session_id: 'reach', args: '10m watch it', watch });
        expect(apiLoop.status, watch).toBe(400);
        expect(JSON.stringify(apiLoop.body), watch).toMatch(why);
        const apiCron = await call('POST', '/api/cron/jobs', { schedule: 'every 1h', prompt: 'watch it', watch });
        expect(apiCron.status, watch).toBe(400);
        const chat = await c.schedules
          .set('reach', 'loop', watching('watch it', watch, 600), {
            origin: { surface: 'telegram', route: { platform: 'telegram', chatId: '42' } },
            runner: agent,
          })
          .catch((e: unknown) => e);
        expect(chat, watch).toBeInstanceOf(ScheduleInputError);
        expect((chat as Error).message, watch).toMatch(why);
      }
      // Nothing was created.
      expect(await c.loops.get('reach', 'loop')).toBeNull();
      expect((await call('GET', '/api/cron/jobs')).body.data).toEqual([]);
      // Inside the root, however written, and an allowed host: set.
      for (const watch of [
        `read_file:${root}/ci.log`,
        'read_file:ci.log',
        `read_file:${root}/sub/../ci.log`,
        'http_get:https://ci.example.com/status',
      ]) {
        const loop = await runLoopCli(env.config, ['loop', '10m', 'watch it', '--watch', watch, '--session', 'ok']);
        expect(loop.code, `${watch}: ${loop.stderr}`).toBe(0);
        expect((await call('POST', '/api/cron/jobs', { schedule: 'every 1h', prompt: 'watch it', watch })).status, watch).toBe(201);
      }
      // Changing a job's watch to one outside is refused the same way, and the job keeps its own.
      const job = await runCronCli(env.config, ['add', 'every 1h', 'watch it', '--name', 'inside', '--watch', 'read_file:ci.log']);
      expect(job.code, job.stderr).toBe(0);
      const edit = await runCronCli(env.config, ['edit', 'inside', '--watch', `read_file:${sibling}/creds.txt`]);
      expect(edit.code).toBe(2);
      expect(edit.stderr).toMatch(/is outside the folders the tools may read/);
      const patch = await call('PATCH', '/api/cron/jobs/inside', { watch: 'read_file:../root-secrets/creds.txt' });
      expect(patch.status).toBe(400);
      expect((await call('GET', '/api/cron/jobs/inside')).body.watch).toBe('read_file:ci.log');
      expect(readFileSync(join(sibling, 'creds.txt'), 'utf8')).toBe('secret\n');
    },
    TEST_MS,
  );
});
