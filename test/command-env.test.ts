/**
 * What a command turn gets in its environment (worker/runtime/command-env.ts): the
 * minimal base, the turn's `HERMES_*` variables and what the operator listed —
 * never the worker's secrets. Run as an operator would: a `hermes worker`
 * process whose environment holds the secrets, commands that print `env`.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEnv, type TestEnv } from './support/env.ts';
import { clients, runHermes, spawnWorker, waitFor, waitForEvents, type TestClients } from './support/stack.ts';
import { openCronService } from './support/cron-worker.ts';
import { runCleanups, type CleanUp } from './support/cleanup.ts';
import { BASE_COMMAND_ENV, commandEnv } from '../worker/runtime/command-env.ts';

/** Secrets a worker typically holds (values made up for the test). */
const SECRETS = {
  API_SERVER_KEY: 'secret-api-server-key',
  OPENAI_API_KEY: 'sk-secret-openai-key',
  TELEGRAM_BOT_TOKEN: '123456:secret-telegram-token',
};

/** `KEY=value` lines of `env` output, as a map. */
function parseEnv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const i = line.indexOf('=');
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

// One `hermes worker` for the file, its environment holding the secrets, its config a named command.
let env: TestEnv;
let c: TestClients;
const cleanups: CleanUp[] = [];
beforeAll(async () => {
  env = testEnv();
  writeFileSync(
    join(env.home, 'config.yaml'),
    ['commands:', '  show:', '    command: env', '    env: { REPORT_TARGET: staging }', '    pass_env: [NOT_LISTED_EITHER]'].join('\n'),
  );
  c = clients(env);
  await spawnWorker(cleanups, env, { ...SECRETS, GH_TOKEN: 'passed-through', NOT_LISTED: 'kept-out', HERMES_COMMAND_ENV_PASS: 'GH_TOKEN' });
}, 60_000);
afterAll(async () => {
  await runCleanups(cleanups);
  await c?.close();
  env?.cleanup();
});

function expectNoSecrets(text: string): void {
  for (const [name, value] of Object.entries(SECRETS)) {
    expect(text).not.toContain(name);
    expect(text).not.toContain(value);
  }
  expect(text).not.toContain('REDIS_URL');
  expect(text).not.toContain('kept-out');
}

describe('command environment', () => {
  it("loop --run 'env': no worker secret reaches the command; PATH, HOME, the tick's variables and the operator's pass-through do", async () => {
    const set = await runHermes(env, ['loop', '1s', 'show env', '--session', 'cmd-env', '--run', 'env']);
    expect(set.code, set.stderr).toBe(0);
    const [reply] = await waitForEvents(c, 'cmd-env', 'reply', 1, 30_000);
    await c.schedules.stop('cmd-env', 'loop');
    const text = String(reply!.data.text);
    expectNoSecrets(text);
    const vars = parseEnv(text);
    expect(vars.PATH).toBeTruthy();
    expect(vars.HOME).toBeTruthy();
    expect(vars.HERMES_TICK).toBe('1');
    expect(vars.HERMES_SESSION_ID).toBe('cmd-env');
    // The command turn's step id (docs/RELIABILITY.md, "A command turn is one step"): its occurrence, step 1.
    expect(vars.HERMES_STEP_ID).toBe(`${String(reply!.data.occurrenceId)}:1`);
    expect(vars.GH_TOKEN).toBe('passed-through');
    const allowed = new Set<string>([
      ...BASE_COMMAND_ENV,
      'GH_TOKEN',
      'HERMES_TICK',
      'HERMES_SCHEDULE_KIND',
      'HERMES_SESSION_ID',
      'HERMES_STEP_ID',
      'PWD',
      'SHLVL',
      '_',
    ]);
    expect(Object.keys(vars).filter((k) => !allowed.has(k))).toEqual([]);
  }, 60_000);

  it('a named command gets its own env and pass_env from config, nothing else', async () => {
    const set = await runHermes(env, ['loop', '1s', 'show env', '--session', 'named-env', '--command', 'show']);
    expect(set.code, set.stderr).toBe(0);
    const [reply] = await waitForEvents(c, 'named-env', 'reply', 1, 30_000);
    await c.schedules.stop('named-env', 'loop');
    const text = String(reply!.data.text);
    expectNoSecrets(text);
    const vars = parseEnv(text);
    expect(vars.REPORT_TARGET).toBe('staging');
    expect(vars.GH_TOKEN).toBe('passed-through');
    expect(vars).not.toHaveProperty('NOT_LISTED_EITHER'); // listed, but not set in the worker's environment
  }, 60_000);

  it("cron --script 'env': the run's output holds no worker secret, and the cron variables", async () => {
    const api = openCronService(env.config);
    try {
      const job = await api.service.add(
        { schedule: 'every 1h', script: 'env', name: 'envjob', paused: true },
        { origin: { surface: 'cli' }, trusted: true },
      );
      await api.service.runNow(job.id, { origin: { surface: 'cli' }, trusted: true });
      const run = await waitFor(
        async () => (await api.store.runs(job.id, 5)).find((r) => r.status === 'ok'),
        30_000,
        'the manual cron run',
      );
      expectNoSecrets(run.output ?? '');
      const vars = parseEnv(run.output ?? '');
      expect(vars.HERMES_CRON_JOB_ID).toBe(job.id);
      expect(vars.GH_TOKEN).toBe('passed-through');
    } finally {
      await api.close();
    }
  }, 60_000);

  it('the rule: base variables, then pass-throughs, then fixed values, then the turn’s variables win', () => {
    const source = { PATH: '/p', HOME: '/h', SECRET: 's', LISTED: 'l', HERMES_TICK: 'forged' };
    expect(commandEnv(source, [{ pass: ['LISTED', 'ABSENT'] }, { set: { FIXED: 'f', HOME: '/other' } }], { HERMES_TICK: '3' })).toEqual({
      PATH: '/p',
      HOME: '/other',
      LISTED: 'l',
      FIXED: 'f',
      HERMES_TICK: '3',
    });
    expect(commandEnv({})).toEqual({ PATH: '/usr/local/bin:/usr/bin:/bin' });
  });
});
