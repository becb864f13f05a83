/**
 * `hermes cron` (docs/DESIGN.md §7): every subcommand through the command layer, exit
 * codes (0 ok, 1 findings/errors, 2 bad input), `--json` shapes, and `next`
 * agreeing with real fire times without Redis, also as a real process with
 * another TZ.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../scheduler/config/config.ts';
import { describeCron } from '../cli/commands/cron-format.ts';
import { runCronCli } from './support/cron-cli.ts';
import { openCronService, startCronWorker } from './support/cron-worker.ts';
import { testEnv } from './support/env.ts';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import { waitFor } from './support/wait-for.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { camelKeys } from './support/wire-case.ts';
import { refusedPort } from './support/refused-port.ts';

let model: FakeOpenAI;
beforeAll(async () => {
  model = await startFakeOpenAI();
});
afterAll(async () => model.close());
const cleanups = cleanupAfterEach();

function setup() {
  const env = testEnv({ 'agent.base_url': model.baseUrl, 'cron.min_interval_seconds': 1 });
  cleanups.push(() => env.cleanup());
  return { env, cli: (...args: string[]) => runCronCli(env.config, args) };
}

async function noRedisConfig() {
  const port = await refusedPort();
  return loadConfig({
    env: { HERMES_HOME: '/nonexistent-hermes-home' },
    overrides: { 'redis.url': `redis://127.0.0.1:${port}`, log_level: 'silent' },
  });
}

const root = new URL('..', import.meta.url).pathname;

describe('hermes cron next', () => {
  it('prints only a JSON array of UTC times with --json, without Redis', async () => {
    const config = await noRedisConfig();
    const r = await runCronCli(config, [
      'next',
      '30 2 * * *',
      '--tz',
      'America/New_York',
      '--from',
      '2025-03-09T00:00:00Z',
      '-n',
      '3',
      '--json',
    ]);
    expect(r).toEqual({ code: 0, stdout: '["2025-03-09T07:00:00Z","2025-03-10T06:30:00Z","2025-03-11T06:30:00Z"]', stderr: '' });
  });

  it('previews grammar forms in the zone, with a readable default output', async () => {
    const config = await noRedisConfig();
    const r = await runCronCli(config, ['next', 'weekdays at 9am', '--tz', 'Europe/Berlin', '--from', '2025-10-24T12:00:00Z', '-n', '2']);
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')).toEqual([
      'weekdays at 09:00 = 0 9 * * 1-5 (Europe/Berlin)',
      expect.stringMatching(/^ {2}2025-10-27 09:00 GMT\+1 {3}2025-10-27T08:00:00Z {3}\S/),
      expect.stringMatching(/^ {2}2025-10-28 09:00 GMT\+1 {3}2025-10-28T08:00:00Z/),
    ]);
    // A raw cron expression is shown with its description in words (cronstrue).
    const raw = await runCronCli(config, ['next', '*/15 9-17 * * 1-5', '--tz', 'UTC', '--from', '2025-10-24T12:00:00Z', '-n', '1']);
    expect(raw.stdout.split('\n')[0]).toBe('*/15 9-17 * * 1-5 · Every 15 minutes, between 09:00 and 17:59, Monday through Friday (UTC)');
  });

  it('a description with both day fields says which day rule applies (F13: cronstrue words both alike)', () => {
    expect(describeCron('0 0 */2 * 1')).toBe('At 00:00, every 2 days in a month, and on Monday (days matching both)');
    expect(describeCron('0 0 1,15 * 1')).toBe('At 00:00, on day 1 and 15 of the month, and on Monday (days matching either)');
    expect(describeCron('0 0 1 * *')).toBe('At 00:00, on day 1 of the month');
    expect(describeCron('0 0 0 */2 * 1')).toMatch(/\(days matching both\)$/);
  });

  it('as a real process under TZ=Australia/Sydney: same times; bad input exits 2 with one line', async () => {
    const config = await noRedisConfig();
    const env = {
      ...process.env,
      TZ: 'Australia/Sydney',
      REDIS_URL: config.redis.url,
      HERMES_HOME: '/nonexistent-hermes-home',
      HERMES_LOG_LEVEL: 'silent',
    };
    const run = promisify(execFile);
    // The two processes start side by side (each spends most of its time loading the sources).
    const [ok, bad] = await Promise.all([
      run(
        process.execPath,
        ['cli/hermes.mjs', 'cron', 'next', '0 0 * * * *', '--tz', 'UTC', '--from', '2025-10-05T02:00:00Z', '-n', '1', '--json'],
        { cwd: root, env },
      ),
      run(process.execPath, ['cli/hermes.mjs', 'cron', 'next', 'every funday 9am'], { cwd: root, env }).then(
        () => ({ code: 0, stderr: '' }),
        (e: { code: number; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
      ),
    ]);
    expect(ok.stdout.trim()).toBe('["2025-10-05T03:00:00Z"]');
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^hermes: "every funday 9am": unknown day "funday"/)]);
  });

  it.each([
    [['next', '0 9 * *'], /has 4 fields/],
    [['next', 'daily at 7am', '--tz', 'Moon/Base'], /Unknown time zone "Moon\/Base"/],
    [['next', 'daily at 7am', '-n', '0'], /-n must be a positive whole number/],
    [['next', 'daily at 7am', '--from', 'yesterday'], /"yesterday" is not an ISO-8601 date/],
    [['next'], /missing required argument 'schedule'/],
  ])('bad input %j exits 2 with a clear line', async (args, message) => {
    const r = await runCronCli(await noRedisConfig(), args);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('hermes cron job commands', () => {
  it('add, list, edit, pause, resume, run, runs, status, remove', async () => {
    const { env, cli } = setup();
    const api = openCronService(env.config);
    cleanups.push(() => api.close());

    const added = await cli('add', 'every 1h', 'summarise', 'the', 'inbox', '--name', 'Inbox digest', '--tz', 'Europe/Warsaw', '--json');
    expect(added.code).toBe(0);
    const job = JSON.parse(added.stdout) as { id: string; name: string; prompt: string; tz: string; schedule: { kind: string } };
    expect(job).toMatchObject({
      name: 'Inbox digest',
      prompt: 'summarise the inbox',
      tz: 'Europe/Warsaw',
      schedule: { kind: 'interval' },
      state: 'scheduled',
    });
    expect(job.id).toMatch(/^[0-9a-f]{12}$/);

    const second = await cli('create', '0 8 * * *', 'morning', '--name', 'Morning', '--script', 'echo morning');
    expect(second.code).toBe(0);
    expect(second.stdout).toMatch(/Added cron job:\n[0-9a-f]{12} {2}Morning\n {2}schedule {2}0 8 \* \* \*/);

    const list = await cli('list');
    expect(list.code).toBe(0);
    const lines = list.stdout.split('\n');
    expect(lines[0]).toMatch(/^ID +NAME +SCHEDULE +NEXT RUN +LAST +STREAK +STATE$/);
    expect(lines.find((l) => l.includes('Inbox digest'))).toMatch(
      /every 1h +\d{4}-\d{2}-\d{2} \d{2}:\d{2}(:\d{2})? GMT\+[12] \(in (59m|1h)\) +— +0 +scheduled/,
    );

    const edited = await cli('edit', 'inbox DIGEST', '--schedule', 'daily at 7am', '--json');
    expect(edited.code).toBe(0);
    expect(JSON.parse(edited.stdout)).toMatchObject({ id: job.id, schedule: { kind: 'cron', expression: '0 7 * * *' } });
    expect(await api.store.schedulerNext(job.id)).toBe((await api.store.get(job.id))!.next_run_at);

    expect((await cli('pause', job.id)).stdout).toBe(`Paused ${job.id} (Inbox digest).`);
    expect(await api.store.schedulerNext(job.id)).toBeUndefined();
    expect((await cli('pause', job.id)).stdout).toMatch(/is paused; nothing to pause/);
    const listed = JSON.parse((await cli('list', '--json')).stdout) as Array<{ id: string; state: string }>;
    expect(listed.find((j) => j.id === job.id)?.state).toBe('paused');
    expect((await cli('resume', job.id)).stdout).toMatch(/^Resumed .* next run \d{4}-\d{2}-\d{2} 07:00 GMT\+[12] \(in /);

    const worker = await startCronWorker(env.config);
    cleanups.push(() => worker.close());
    const ran = await cli('run', 'morning', '--json');
    expect(ran.code).toBe(0);
    const morning = await api.service.get('Morning');
    await waitFor(async () => (await api.store.runs(morning.id, 5)).length === 1, 10_000, 'manual run');
    // `cron show`: everything about one job, its next 5 runs (as `cron next` previews them) and its last runs.
    const shown = JSON.parse((await cli('show', 'morning', '--json')).stdout) as {
      id: string;
      description: string;
      next_runs: string[];
      runs: Array<{ trigger: string }>;
    };
    expect(shown).toMatchObject({ id: morning.id, description: 'At 08:00', runs: [{ trigger: 'manual' }] });
    const previewed = JSON.parse(
      (await cli('next', '0 8 * * *', '--tz', morning.tz, '--from', new Date(morning.next_run_at! - 1).toISOString(), '--json')).stdout,
    ) as string[];
    expect(shown.next_runs).toEqual(previewed);
    const showHuman = (await cli('show', morning.id)).stdout.split('\n');
    expect(showHuman).toEqual(
      expect.arrayContaining([
        `${morning.id}  Morning`,
        expect.stringMatching(/^ {2}schedule {2}0 8 \* \* \* · At 08:00 \(/),
        '  in words  At 08:00',
        'next runs',
        'last runs',
        expect.stringMatching(/^ {2}DUE \(UTC\) +JOB +TRIGGER/),
        expect.stringMatching(/^ {2}\S+ +Morning +manual +ok /),
      ]),
    );
    expect(showHuman.filter((l) => /^ {2}\d{4}-\d{2}-\d{2} 08:00 .*Z {3}in /.test(l))).toHaveLength(5);
    expect(await cli('show', 'nope')).toMatchObject({ code: 2 });
    const runs = await cli('runs', 'Morning', '--json');
    expect(JSON.parse(runs.stdout)).toEqual([
      expect.objectContaining({ job_id: morning.id, trigger: 'manual', status: 'ok', output: 'morning' }),
    ]);
    const human = await cli('history', '--limit', '5');
    expect(human.stdout.split('\n')[1]).toMatch(/Morning +manual +ok +\d+\.\ds +\d+\.\ds +delivered +morning$/);

    const status = JSON.parse((await cli('status', '--json')).stdout) as { workers_alive: number; jobs: { total: number } };
    expect(status).toMatchObject({ workers_alive: 1, jobs: { total: 2, scheduled: 2 } });
    expect(camelKeys(status)).toEqual([]);
    expect((await cli('status')).stdout).toMatch(/^workers alive {2}1\njobs {11}2 \(2 scheduled/);

    expect((await cli('rm', job.id)).stdout).toBe(`Removed ${job.id} (Inbox digest).`);
    expect((await cli('delete', 'morning')).code).toBe(0);
    expect((await cli('list', '--all', '--json')).stdout).toBe('[]');
  });

  it('reference errors, bad flags and an unreachable Redis', async () => {
    const { cli } = setup();
    const a = JSON.parse((await cli('add', 'daily at 7am', 'a', '--name', 'Report', '--json')).stdout) as { id: string };
    // Names are unique (case-insensitive): a second "report" is refused and nothing is added.
    const dup = await cli('add', 'daily at 8am', 'b', '--name', 'report', '--json');
    expect(dup).toMatchObject({
      code: 2,
      stderr: `hermes: A cron job named "Report" already exists (${a.id}); choose another --name or edit that job.`,
    });
    expect(JSON.parse((await cli('list', '--json')).stdout)).toHaveLength(1);
    expect(await cli('run', 'nope')).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^hermes: No cron job with id or name "nope"/),
    });
    expect(await cli('add', 'daily at 7am', 'x', '--misfire', 'later')).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/argument 'later' is invalid/),
    });
    expect(await cli('add', 'daily at 7am', 'x', '--repeat', '0')).toMatchObject({
      code: 2,
      stderr: 'hermes: --repeat must be a positive whole number, got "0".',
    });
    expect(await cli('edit', a.id)).toMatchObject({ code: 2, stderr: expect.stringMatching(/^hermes: Nothing to change/) });
    expect(await cli('runs', '--limit', 'x')).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/--limit must be a positive whole number/),
    });

    const down = await runCronCli(await noRedisConfig(), ['list']);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/^hermes: Redis at 127\.0\.0\.1:\d+ is unreachable\.$/);
  });

  it('F30: with no Redis reachable, add refuses bad input as bad input (exit 2) before any connection', async () => {
    const config = await noRedisConfig();
    expect(await runCronCli(config, ['add', '*/5 * * * * *', 'x'])).toEqual({
      code: 2,
      stdout: '',
      stderr: 'hermes: "*/5 * * * * *" fires as often as every 5s; the minimum is 1m (cron.min_interval_seconds).',
    });
    expect(await runCronCli(config, ['add', 'daily at 7am', 'x', '--deliver', 'telegram'])).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^hermes: Unknown delivery target "telegram"/),
    });
    expect(await runCronCli(config, ['add', 'daily at 7am', 'x', '--tz', 'Mars/Olympus'])).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^hermes: Unknown time zone "Mars\/Olympus"/),
    });
    // Good input goes on to the connection, and its failure is told as such.
    expect(await runCronCli(config, ['add', 'daily at 7am', 'x'])).toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/^hermes: Redis at 127\.0\.0\.1:\d+ is unreachable\.$/),
    });
  });

  it('F14: a pattern that fires closer than cron.min_interval_seconds is refused on add, edit and /api, exit 2', async () => {
    const env = testEnv({ 'agent.base_url': model.baseUrl }); // the default minimum, 60 s
    cleanups.push(() => env.cleanup());
    const cli = (...args: string[]) => runCronCli(env.config, args);
    const refused = await cli('add', '* * * * * *', 'x');
    expect(refused).toEqual({
      code: 2,
      stdout: '',
      stderr: 'hermes: "* * * * * *" fires as often as every 1s; the minimum is 1m (cron.min_interval_seconds).',
    });
    expect(await cli('add', 'every 10s', 'x')).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/minimum of 1m \(cron\.min_interval_seconds\)/),
    });
    const ok = JSON.parse((await cli('add', '0 */5 * * * *', 'x', '--name', 'five', '--json')).stdout) as { id: string };
    const edit = await cli('edit', ok.id, '--schedule', '*/10 * * * * *');
    expect(edit).toMatchObject({
      code: 2,
      stderr: 'hermes: "*/10 * * * * *" fires as often as every 10s; the minimum is 1m (cron.min_interval_seconds).',
    });
    const { openCronApi } = await import('../cli/gateway-cron-api.ts');
    const { createLogger } = await import('../scheduler/logger.ts');
    const api = await openCronApi(env.config, env.redisUrl, createLogger({ level: 'silent' }));
    cleanups.push(() => api.close());
    await expect(api.api.add({ schedule: '*/30 * * * * *', prompt: 'x' })).rejects.toThrow(/every 30s; the minimum is 1m/);
    const jobs = JSON.parse((await cli('list', '--json')).stdout) as Array<{ id: string; schedule: { expression: string } }>;
    expect(jobs).toEqual([expect.objectContaining({ id: ok.id, schedule: expect.objectContaining({ expression: '0 */5 * * * *' }) })]);
  });

  it("--overlap takes Temporal's policies on add and edit (default skip); a bad policy exits 2", async () => {
    const { cli } = setup();
    const job = JSON.parse((await cli('add', 'daily at 7am', 'x', '--name', 'o', '--overlap', 'buffer_all', '--json')).stdout) as {
      id: string;
      overlap: string;
    };
    expect(job.overlap).toBe('buffer_all');
    expect((await cli('show', job.id)).stdout).toMatch(/ overlap buffer_all · /);
    expect(JSON.parse((await cli('edit', job.id, '--overlap', 'cancel_other', '--json')).stdout)).toMatchObject({
      overlap: 'cancel_other',
    });
    expect(await cli('add', 'daily at 7am', 'x', '--overlap', 'buffer_one')).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/argument 'buffer_one' is invalid/),
    });
  });

  it('--notify auto|always|done|never on add and edit (default auto; the earlier failure reads as auto); a bad mode exits 2', async () => {
    const { cli } = setup();
    const job = JSON.parse((await cli('add', 'daily at 7am', 'x', '--name', 'n', '--json')).stdout) as { id: string; notify: string };
    expect(job.notify).toBe('auto');
    expect(JSON.parse((await cli('edit', job.id, '--notify', 'done', '--json')).stdout)).toMatchObject({ notify: 'done' });
    expect(JSON.parse((await cli('edit', job.id, '--notify', 'failure', '--json')).stdout)).toMatchObject({ notify: 'auto' });
    expect(JSON.parse((await cli('edit', job.id, '--notify', 'never', '--json')).stdout)).toMatchObject({ notify: 'never' });
    expect((await cli('show', job.id)).stdout).toMatch(/policy {4}misfire once · overlap skip · notify never/);
    expect(await cli('add', 'daily at 7am', 'x', '--notify', 'sometimes')).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/argument 'sometimes' is invalid/),
    });
  });

  it('a Telegram, Slack or Discord target without its bot token is warned about on add, edit and show (stderr; the job is set)', async () => {
    const { env, cli } = setup();
    const added = await cli('add', 'daily at 7am', 'x', '--deliver', 'telegram:42,local,telegram:-1001:7,slack:C0123ABCD', '--json');
    expect(added.code).toBe(0);
    const job = JSON.parse(added.stdout) as { id: string; deliver: string[] };
    expect(job.deliver).toEqual(['telegram:42', 'local', 'telegram:-1001:7', 'slack:C0123ABCD']);
    expect(added.stderr.split('\n')).toEqual([
      "Warning: this shell's configuration has no Telegram bot token (TELEGRAM_BOT_TOKEN or telegram.bot_token): deliveries to telegram:42, telegram:-1001:7 stay queued until a gateway with one runs.",
      "Warning: this shell's configuration has no Slack bot token (SLACK_BOT_TOKEN or slack.bot_token): deliveries to slack:C0123ABCD stay queued until a gateway with one runs.",
    ]);
    // An edit that names a Discord target is warned about; one that leaves the targets alone is not.
    expect((await cli('edit', job.id, '--deliver', 'discord:99')).stderr).toMatch(
      /^Warning: this shell.s configuration has no Discord bot token \(DISCORD_BOT_TOKEN or discord\.bot_token\): deliveries to discord:99 stay queued/,
    );
    expect((await cli('edit', job.id, '--name', 'renamed')).stderr).toBe('');
    // `show` says it while it holds, on stderr: its --json output stays JSON.
    const shown = await cli('show', job.id, '--json');
    expect(JSON.parse(shown.stdout)).toMatchObject({ deliver: ['discord:99'] });
    expect(shown.stderr).toMatch(/^Warning: this shell.s configuration has no Discord bot token .*discord:99 stay queued/);
    await cli('edit', job.id, '--deliver', 'local');
    expect((await cli('show', job.id)).stderr).toBe('');
    // With the platform's token in the configuration read, nothing to warn about.
    const withBot = testEnv({ 'agent.base_url': model.baseUrl, 'telegram.bot_token': '123:abc', 'redis.prefix': env.prefix });
    cleanups.push(() => withBot.cleanup());
    const quiet = await runCronCli(withBot.config, ['add', 'daily at 8am', 'y', '--deliver', 'telegram:42']);
    expect(quiet).toMatchObject({ code: 0, stderr: '' });
  });

  it('doctor exits 1 on findings and 0 when healthy', async () => {
    const { env, cli } = setup();
    await cli('add', 'daily at 7am', 'x');
    const sick = await cli('doctor');
    expect(sick.code).toBe(1);
    expect(sick.stdout).toMatch(/No worker is alive/);
    const worker = await startCronWorker(env.config);
    cleanups.push(() => worker.close());
    const healthy = await cli('doctor', '--json');
    expect(healthy).toEqual({ code: 0, stdout: '[]', stderr: '' });
  });
});
