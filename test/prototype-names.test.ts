/**
 * Names that are members of `Object.prototype` (`constructor`, `toString`, `__proto__`, `valueOf`, …),
 * given wherever someone names a tool, a model, a target, a command, a day or a control word, are refused
 * like any other unknown name: exit 2 in the shell, HTTP 400 from `/api`, a chat reply naming what is not
 * declared, a refusal the model reads from the `schedules` tool — and the session they were sent to answers
 * its next message (the rule: scheduler/names/name-table.ts). The operator's own names (`ci`, `cheap`, `backup`)
 * still work beside them.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe } from 'vitest';
import { withFlags } from '../cli/run-command.ts';
import { parseGoalArgs } from '../scheduler/goal/goal-command.ts';
import { parseHeartbeatArgs } from '../scheduler/loop/heartbeat-command.ts';
import { parseLoopArgs } from '../scheduler/loop/loop-command.ts';
import { ScheduleInputError } from '../scheduler/errors/schedule-input-error.ts';
import { parseSchedule } from '../scheduler/cron/schedule-grammar.ts';
import { enqueueInput } from '../scheduler/session/inbox.ts';
import { cronServiceFor } from '../scheduler/services.ts';
import { createLogger } from '../scheduler/logger.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { runCronCli } from './support/cron-cli.ts';
import { startCronApiGateway } from './support/cron-api-gateway.ts';
import { testEnv } from './support/env.ts';
import { lastToolResult, lastUserText, startFakeOpenAI, type RecordedRequest } from './support/fake-openai.ts';
import { startFakeTelegram } from './support/fake-telegram.ts';
import { runLoopCli } from './support/loop-cli.ts';
import { events, openTestClients, runHermes, startWorkerStack, waitFor, waitForEvents, type TestClients } from './support/stack.ts';
import { ALLOWED_USER, telegramEnv } from './support/telegram-env.ts';
import { gateway } from './support/telegram-harness.ts';

/** Every own member name of `Object.prototype`, `__proto__` included. */
const NAMES = Object.getOwnPropertyNames(Object.prototype);

/** Ceilings of a wait and of a test: generous, for a machine that runs several suites at once. */
const WAIT_MS = 120_000;
const TEST_MS = 300_000;

/** What a refusal never shows: an internal error's text, or a built-in function's. */
const INTERNAL = /is not a function|TypeError|Cannot read|Cannot convert|unexpected error|Internal server error|\[native code\]/i;

/** The operator's declared names, so a refusal is about the name and not about an empty table. */
const DECLARED = {
  'agent.models': { cheap: { model: 'cheap-model' } },
  'tools.commands': { ci: { command: ['echo', 'green'], description: 'CI status' } },
  commands: { backup: { command: 'echo backed up' } },
};

/** The refusal of each chat command, by the text it names. */
const watchRefusal = (n: string) => `--watch "${n}" is not a declared check`;
const modelRefusal = (n: string) => `--model "${n}" is not a declared model; declared: cheap`;

/** A model that answers `re: <message>`, and a worker using it; `declared` as `DECLARED` plus `overrides`. */
async function agentWorker(cleanups: CleanUp[], overrides: Record<string, unknown> = {}, makeEnv = testEnv) {
  const model = await startFakeOpenAI();
  model.respond((req) => `re: ${lastUserText(req)}`);
  cleanups.push(() => model.close());
  return {
    model,
    ...(await startWorkerStack(cleanups, { 'agent.base_url': model.baseUrl, 'agent.api_key': 'k', ...DECLARED, ...overrides }, makeEnv)),
  };
}

/** The session's notices in order, once its reply to `last` is in (input runs in arrival order, so every notice before it is too). */
async function noticesBefore(c: TestClients, sessionId: string, last: string): Promise<string[]> {
  await waitFor(
    async () => (await events(c, sessionId, 'reply')).some((e) => e.data.text === `re: ${last}`),
    WAIT_MS,
    `the reply to "${last}" in ${sessionId}`,
  );
  return (await events(c, sessionId, 'notice')).map((e) => String(e.data.text));
}

describe.concurrent('a name of Object.prototype is an unknown name', () => {
  it('the grammar: it is a prompt or an unknown day, month or unit, never a control word or a table entry', ({ expect }) => {
    const grammar = { minIntervalSeconds: 30, maxPromptChars: 1000 };
    for (const n of NAMES) {
      // `/loop constructor` is a self-paced loop whose prompt is the word, as `/loop check` is.
      expect(parseLoopArgs(n, grammar)).toMatchObject({ action: 'set', prompt: n, intervalSeconds: null });
      expect(parseGoalArgs(n, grammar)).toMatchObject({ action: 'set', text: n });
      expect(() => parseHeartbeatArgs(n, grammar)).toThrow(ScheduleInputError);
      for (const schedule of [`every ${n}`, `${n} at 9am`, `0 9 * ${n} *`, `0 9 * * ${n}`]) {
        expect(() => parseSchedule(schedule, { tz: 'UTC', now: Date.now(), minIntervalSeconds: 60 }), schedule).toThrow(ScheduleInputError);
      }
      // The terminal's words for service fields: a name that is none stays as written.
      expect(withFlags(`\`${n.toLowerCase()}\` and \`schedule\``)).toBe(`\`${n.toLowerCase()}\` and --schedule`);
    }
    expect(parseSchedule('every monday at 9am', { tz: 'UTC', now: Date.now(), minIntervalSeconds: 60 })).toMatchObject({ kind: 'cron' });
    expect(parseLoopArgs('stop', grammar)).toEqual({ action: 'stop' });
  });

  it(
    'the shell: hermes loop, heartbeat, goal and cron add refuse it with exit 2 and set nothing',
    async ({ cleanups, expect }) => {
      const { env, c } = openTestClients(cleanups, DECLARED);
      for (const n of NAMES) {
        for (const args of [
          ['loop', '10m', 'x', '--watch', n],
          ['loop', '10m', 'x', '--model', n],
          ['loop', '10m', 'x', '--deliver', n],
          ['loop', '10m', 'x', '--command', n],
          ['heartbeat', 'every', '10m', 'x', '--watch', n],
          ['goal', 'x', '--model', n],
        ]) {
          const r = await runLoopCli(env.config, args);
          expect({ args, code: r.code, stderr: r.stderr }).toEqual({ args, code: 2, stderr: expect.any(String) });
          expect(r.stderr, args.join(' ')).toContain(`"${n}"`);
          expect(r.stderr, args.join(' ')).not.toMatch(INTERNAL);
        }
        for (const args of [
          ['add', 'every 1h', 'x', '--watch', n],
          ['add', 'every 1h', 'x', '--model', n],
          ['add', 'every 1h', 'x', '--deliver', n],
          ['add', `every ${n}`, 'x'],
          ['add', `0 9 * ${n} *`, 'x'],
        ]) {
          const r = await runCronCli(env.config, args);
          expect({ args, code: r.code, stderr: r.stderr }).toEqual({ args, code: 2, stderr: expect.any(String) });
          expect(r.stderr.toLowerCase(), args.join(' ')).toContain(n.toLowerCase());
          expect(r.stderr, args.join(' ')).not.toMatch(INTERNAL);
        }
      }
      expect(await c.loops.get('main', 'loop')).toBeNull();
      expect(await c.loops.get('main', 'heartbeat')).toBeNull();
      expect(await cronServiceFor(env.config, c, createLogger({ level: 'silent' })).list({ all: true })).toEqual([]);
      // The declared names are taken.
      expect((await runLoopCli(env.config, ['loop', '10m', 'x', '--watch', 'ci', '--model', 'cheap'])).code).toBe(0);
      expect((await runLoopCli(env.config, ['heartbeat', 'every', '10m', 'x', '--command', 'backup'])).code).toBe(0);
    },
    TEST_MS,
  );

  it(
    'hermes loop 10m x --watch constructor (a real process) exits 2 with the refusal',
    async ({ cleanups, expect }) => {
      const env = testEnv();
      cleanups.push(() => env.cleanup());
      writeFileSync(join(env.home, 'config.yaml'), 'tools:\n  commands:\n    ci: { command: [echo, green], description: CI status }\n', {
        mode: 0o600,
      });
      const r = await runHermes(env, ['loop', '10m', 'x', '--watch', 'constructor']);
      expect(r.code).toBe(2);
      expect(r.stderr.trim()).toBe(
        'hermes: --watch "constructor" is not a declared check: use a command tool (ci), read_file:<path> or http_get:<url>.',
      );
      expect(r.stdout).toBe('');
    },
    TEST_MS,
  );

  it(
    '/api: schedules and cron jobs naming it answer 400 and create nothing',
    async ({ cleanups, expect }) => {
      // Kept-alive connections kept open for the whole test (see the chat test below: ECONNRESET beside two copies of the suite).
      const { env, c } = openTestClients(cleanups, {
        ...DECLARED,
        'api_server.port': 0,
        'api_server.key': 'key',
        'api_server.keep_alive_timeout_ms': 600_000,
      });
      const { call } = await startCronApiGateway(cleanups, env, 'key');
      for (const n of NAMES) {
        const requests: Array<[string, Record<string, unknown>]> = [
          ['/api/schedules', { kind: 'loop', session_id: 'api', args: `10m x --watch ${n}` }],
          ['/api/schedules', { kind: 'loop', session_id: 'api', args: '10m x', watch: n }],
          ['/api/schedules', { kind: 'loop', session_id: 'api', args: '10m x', model: n }],
          ['/api/schedules', { kind: 'heartbeat', session_id: 'api', interval_seconds: 600, prompt: 'x', watch: n }],
          ['/api/cron/jobs', { schedule: 'every 1h', prompt: 'x', watch: n }],
          ['/api/cron/jobs', { schedule: 'every 1h', prompt: 'x', model: n }],
          ['/api/cron/jobs', { schedule: 'every 1h', prompt: 'x', deliver: n }],
          ['/api/cron/jobs', { schedule: `every ${n}`, prompt: 'x' }],
          ['/api/cron/jobs', { schedule: `0 9 * ${n} *`, prompt: 'x' }],
        ];
        for (const [path, body] of requests) {
          const r = await call('POST', path, body);
          const message = String(r.body.error?.message);
          expect({ path, body, status: r.status, message }).toEqual({ path, body, status: 400, message: expect.any(String) });
          expect(message.toLowerCase(), JSON.stringify(body)).toContain(n.toLowerCase());
          expect(message, JSON.stringify(body)).not.toMatch(INTERNAL);
        }
        const job = await call('GET', `/api/cron/jobs/${encodeURIComponent(n)}`);
        expect({ n, status: job.status }).toEqual({ n, status: 404 });
      }
      expect(await c.loops.get('api', 'loop')).toBeNull();
      expect((await call('GET', '/api/cron/jobs')).body.data).toEqual([]);
      expect(
        (await call('POST', '/api/schedules', { kind: 'loop', session_id: 'api', args: '10m x --watch ci', model: 'cheap' })).status,
      ).toBe(201);
    },
    TEST_MS,
  );

  it(
    'chat (the terminal chat and /api messages to a telegram: session): each command is refused by name, then the next message is answered',
    async ({ cleanups, expect }) => {
      // The web messages go over fetch's kept-alive connections. The gateway closes one idle for 5 s, and on a starved
      // machine the client's own idle timer lags behind the server's: it sends on a connection being closed
      // (`fetch failed`). Kept open for the whole test, no connection is closed under a request.
      const { env, c } = await agentWorker(cleanups, {
        'api_server.port': 0,
        'api_server.key': 'key',
        'api_server.keep_alive_timeout_ms': 600_000,
      });
      const { call } = await startCronApiGateway(cleanups, env, 'key');
      const commands = (n: string): Array<[string, string]> => [
        [`/loop 10m x --watch ${n}`, watchRefusal(n)],
        [`/loop 10m x --model ${n}`, modelRefusal(n)],
        [`/heartbeat every 10m x --watch ${n}`, watchRefusal(n)],
        [`/goal x --model ${n}`, modelRefusal(n)],
        ...(/^[a-z]/i.test(n) ? [[`/${n}`, `Unknown command /${n.toLowerCase()}.`] as [string, string]] : []),
      ];
      const terminal = (sessionId: string, text: string, id: string) =>
        enqueueInput(
          { redis: c.redis, keys: c.keys, queues: c.queues, maxChars: 1000 },
          { sessionId, text, messageId: id, origin: { surface: 'chat' } },
        );
      const web = async (sessionId: string, text: string) => {
        const r = await call('POST', `/api/sessions/${encodeURIComponent(sessionId)}/messages`, { text });
        expect(r.status).toBe(202);
      };
      // One session per surface and name, all at once: each must answer its own next message.
      await Promise.all(
        NAMES.flatMap((n, i) => [
          (async () => {
            const sessionId = `term-${i}`;
            for (const [j, [text]] of commands(n).entries()) await terminal(sessionId, text, `m${j}`);
            await terminal(sessionId, 'hello', 'last');
            expect(await noticesBefore(c, sessionId, 'hello')).toEqual(commands(n).map(([, refusal]) => expect.stringContaining(refusal)));
          })(),
          (async () => {
            const sessionId = `telegram:${900 + i}`;
            for (const [text] of commands(n)) await web(sessionId, text);
            await web(sessionId, 'hello');
            expect(await noticesBefore(c, sessionId, 'hello')).toEqual(commands(n).map(([, refusal]) => expect.stringContaining(refusal)));
          })(),
        ]),
      );
      for (const [i] of NAMES.entries()) {
        for (const sessionId of [`term-${i}`, `telegram:${900 + i}`]) {
          const notices = (await events(c, sessionId, 'notice')).map((e) => String(e.data.text));
          expect(notices.filter((t) => INTERNAL.test(t))).toEqual([]);
          expect(await c.loops.get(sessionId, 'loop')).toBeNull();
          expect(await c.loops.get(sessionId, 'heartbeat')).toBeNull();
        }
      }
      // The declared names are taken in a chat too.
      await terminal('term-ok', '/loop 10m x --watch ci --model cheap', 'ok');
      await waitFor(async () => (await c.loops.get('term-ok', 'loop')) !== null, 15_000, 'the loop with declared names');
    },
    TEST_MS,
  );

  it(
    "Telegram: /loop 10m x --watch <name> is refused in the chat, and the chat's next message is answered",
    async ({ cleanups, expect }) => {
      const fake = await startFakeTelegram();
      cleanups.push(() => fake.close());
      const { env } = await agentWorker(cleanups, {}, (o) => telegramEnv(fake, o));
      await gateway(cleanups, env);
      for (const n of NAMES) fake.pushMessage({ fromId: ALLOWED_USER, text: `/loop 10m x --watch ${n}` });
      fake.pushMessage({ fromId: ALLOWED_USER, text: 'hello' });
      await waitFor(() => fake.sent.some((m) => m.text === 're: hello'), WAIT_MS, 'the answer to the message after the refusals');
      const texts = fake.sent.map((m) => m.text);
      expect(texts).toHaveLength(NAMES.length + 1);
      for (const [i, n] of NAMES.entries()) {
        // Telegram shows the reply's Markdown: `__proto__` is the word "proto" in bold there.
        expect(texts[i]).toContain(watchRefusal(n.replace(/^__(.+)__$/, '$1')));
        expect(texts[i]).not.toMatch(INTERNAL);
      }
      expect(texts.at(-1)).toBe('re: hello');
    },
    TEST_MS,
  );

  it(
    "the schedules tool refuses it in every field, and the chat's next message is answered",
    async ({ cleanups, expect }) => {
      const calls = (n: string): Array<Record<string, unknown>> => [
        { action: n },
        { action: 'create', kind: n, prompt: 'x' },
        { action: 'create', kind: 'cron', schedule: `every ${n}`, prompt: 'x' },
        { action: 'create', kind: 'cron', schedule: `0 9 * ${n} *`, prompt: 'x' },
        { action: 'create', kind: 'cron', schedule: 'every 2h', prompt: 'x', deliver: n },
        { action: 'create', kind: 'cron', schedule: 'every 2h', prompt: 'x', tz: n },
        { action: 'create', kind: 'cron', schedule: 'every 2h', prompt: 'x', notify: n },
        { action: 'create', kind: 'loop', interval: n, prompt: 'x' },
        { action: 'create', kind: 'loop', interval: '10m', prompt: 'x', notify: n },
        { action: 'pause', id: n },
        { action: 'list', [n]: 'x' },
      ];
      const model = await startFakeOpenAI();
      model.respond((req: RecordedRequest) => {
        const text = lastUserText(req);
        const m = /^schedule with (\S+)$/.exec(text);
        if (!m) return `re: ${text}`;
        if (lastToolResult(req) === undefined) return { toolCalls: calls(m[1]!).map((a) => ({ name: 'schedules', arguments: a })) };
        return 'done';
      });
      cleanups.push(() => model.close());
      const { c, env, worker } = await startWorkerStack(cleanups, { 'agent.base_url': model.baseUrl, 'agent.api_key': 'k', ...DECLARED });
      const say = (sessionId: string, text: string, id: string) =>
        enqueueInput(
          { redis: c.redis, keys: c.keys, queues: c.queues, maxChars: 1000 },
          { sessionId, text, messageId: id, origin: { surface: 'chat' } },
        );
      await Promise.all(
        NAMES.map(async (n, i) => {
          const sessionId = `tool-${i}`;
          await say(sessionId, `schedule with ${n}`, 'a');
          await say(sessionId, 'hello', 'b');
          await waitForEvents(c, sessionId, 'reply', 2, WAIT_MS);
          const replies = (await events(c, sessionId, 'reply')).map((e) => e.data.text);
          expect(replies).toEqual(['done', 're: hello']);
          const results = (await c.sessions.transcript(sessionId)).filter((m) => m.role === 'tool').map((m) => m.content);
          expect(results).toHaveLength(calls(n).length);
          for (const [j, result] of results.entries()) {
            expect(result, JSON.stringify(calls(n)[j])).toMatch(/^Error: /);
            expect(result, JSON.stringify(calls(n)[j])).not.toMatch(INTERNAL);
          }
          expect(await c.loops.get(sessionId, 'loop')).toBeNull();
        }),
      );
      expect(await cronServiceFor(env.config, worker.deps, createLogger({ level: 'silent' })).list({ all: true })).toEqual([]);
    },
    TEST_MS,
  );
});
