/**
 * `hermes status` shows everything that runs on its own — loops and heartbeats, the sessions' goals
 * (a paused one with why) and the cron jobs with their failure streaks — and `cron doctor` reports a
 * job in a failure streak from its first failed run.
 */
import { describe, expect, it } from 'vitest';
import { runCronCli } from './support/cron-cli.ts';
import { openCronService, startCronWorker } from './support/cron-worker.ts';
import { testEnv } from './support/env.ts';
import { clients, runHermes } from './support/stack.ts';
import { waitFor } from './support/wait-for.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { runLoopCli } from './support/loop-cli.ts';
import { camelKeys } from './support/wire-case.ts';

const cleanups = cleanupAfterEach();

describe('hermes status', () => {
  it('lists loops, goals (a paused one with why) and cron jobs with their streaks; cron doctor reports the streak', async () => {
    const e = testEnv({ 'cron.min_interval_seconds': 1 });
    cleanups.push(() => e.cleanup());
    const c = clients(e);
    cleanups.push(() => c.close());
    const worker = await startCronWorker(e.config);
    cleanups.push(() => worker.close());
    const api = openCronService(e.config);
    cleanups.push(() => api.close());
    const cli = (...args: string[]) => runCronCli(e.config, args);

    await c.schedules.set(
      'ops',
      'loop',
      { prompt: 'watch the build', intervalSeconds: 600, times: null, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: { kind: 'command', command: 'true', timeoutSeconds: 5 },
      },
    );
    expect((await runLoopCli(e.config, ['goal', 'get', 'the', 'suite', 'green', '--session', 'dev'])).code).toBe(0);
    expect((await runLoopCli(e.config, ['goal', 'pause', '--session', 'dev'])).code).toBe(0);
    expect((await runLoopCli(e.config, ['goal', 'ship', 'the', 'release', '--session', 'rel'])).code).toBe(0);
    expect((await cli('add', 'every 1h', '--script', 'echo fine', '--name', 'disk')).code).toBe(0);
    expect((await cli('add', 'every 1h', '--script', 'echo broken >&2; exit 3', '--name', 'backup')).code).toBe(0);
    const backup = await api.service.get('backup');
    expect((await cli('run', 'backup')).code).toBe(0);
    await waitFor(async () => ((await api.service.get('backup')).failure_streak === 1 ? true : null), 15_000, 'the failed run');

    const r = await runHermes(e, ['status']);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^workers alive: 1 /);
    expect(lines[1]).toMatch(/^platforms: no gateway running/);
    expect(lines[2]).toMatch(/^SESSION +KIND +STATE +CADENCE +TICKS +NEXT +TOKENS +PROMPT$/);
    expect(lines[3]).toMatch(/^ops +loop +active +every 10m +/);
    const goals = lines.indexOf('') + 1;
    expect(lines[goals]).toMatch(/^SESSION +GOAL +STATE +TURNS +TOKENS$/);
    expect(lines[goals + 1]).toMatch(/^dev +get the suite green +paused \(paused by user\) +0\/20 +—$/);
    expect(lines[goals + 2]).toMatch(/^rel +ship the release +active +0\/20 +—$/);
    const cron = lines.indexOf('cron jobs');
    expect(cron).toBeGreaterThan(goals);
    expect(lines[cron + 1]).toMatch(/^ID +NAME +SCHEDULE +NEXT RUN +LAST +STREAK +STATE$/);
    const row = (name: string) =>
      lines
        .slice(cron + 2)
        .find((l) => l.split(/ {2,}/)[1] === name)!
        .split(/ {2,}/);
    expect(row('backup').slice(4)).toEqual(['error', '1', 'scheduled']);
    expect(row('disk').slice(4)).toEqual(['—', '0', 'scheduled']);

    const raw = JSON.parse((await runHermes(e, ['status', '--json'])).stdout) as unknown;
    // One casing on every wire: the CLI's JSON is /api's shape, at every depth (docs/GATEWAY.md, "One casing").
    expect(camelKeys(raw)).toEqual([]);
    const runs = JSON.parse((await cli('runs', '--json')).stdout) as unknown[];
    expect(runs.length).toBeGreaterThan(0);
    expect(camelKeys([runs, JSON.parse((await cli('show', 'backup', '--json')).stdout)])).toEqual([]);
    const json = raw as {
      goals: Array<{ session_id: string; status: string; status_reason: string | null }>;
      schedules: Array<Record<string, unknown>>;
      cron_jobs: Array<{ name: string; failure_streak: number }>;
    };
    expect(json.goals.map((g) => [g.session_id, g.status]).sort()).toEqual([
      ['dev', 'paused'],
      ['rel', 'active'],
    ]);
    expect(json.cron_jobs.map((j) => [j.name, j.failure_streak]).sort()).toEqual([
      ['backup', 1],
      ['disk', 0],
    ]);

    // cron doctor: a streak is a finding from the first failure, with the error and where to look.
    const doctor = await cli('doctor');
    const reports = [JSON.parse((await cli('doctor', '--json')).stdout), JSON.parse((await cli('status', '--json')).stdout)] as unknown[];
    expect(reports[0]).toEqual(expect.arrayContaining([expect.objectContaining({ job_id: backup.id })]));
    expect(camelKeys(reports)).toEqual([]);
    expect(doctor.code).toBe(1);
    expect(doctor.stdout).toContain(`  ${backup.id}: in a failure streak: its last run failed; last error: `);
    expect(doctor.stdout).toContain(`(\`hermes cron logs ${backup.id}\` shows the runs).`);
    expect(doctor.stdout).not.toMatch(new RegExp(`${(await api.service.get('disk')).id}: in a failure streak`));
  });
});
