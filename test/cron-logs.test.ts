/**
 * Where a cron job's output goes and how a user reads it: `cron add` names the place, `cron logs`
 * (and `cron runs --output`) prints each run's whole output — what the `local` target got, however
 * long — and a run on the job's stream is labelled as the cron run it is (a script run, not
 * "agent · cron tick #undefined").
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatEvent } from '../cli/event-format.ts';
import { cronSessionId } from '../scheduler/cron/cron-job.ts';
import { sessionStoreFor } from '../scheduler/services.ts';
import { runCronCli } from './support/cron-cli.ts';
import { openCronService, startCronWorker } from './support/cron-worker.ts';
import { testEnv } from './support/env.ts';
import { waitFor } from './support/wait-for.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const cleanups = cleanupAfterEach();

async function setup() {
  const env = testEnv({ 'cron.min_interval_seconds': 1 });
  cleanups.push(() => env.cleanup());
  const worker = await startCronWorker(env.config);
  cleanups.push(() => worker.close());
  const api = openCronService(env.config);
  cleanups.push(() => api.close());
  const cli = (...args: string[]) => runCronCli(env.config, args);
  /** Run `name` now and wait for its run record. */
  const runOnce = async (name: string, count = 1) => {
    const job = await api.service.get(name);
    expect((await cli('run', name)).code).toBe(0);
    return waitFor(
      async () => ((await api.store.runs(job.id, count)).length >= count ? api.store.runs(job.id, count) : null),
      15_000,
      `run of ${name}`,
    );
  };
  return { env, api, cli, runOnce };
}

describe('cron output delivered local is reachable', () => {
  it('cron add says where the output goes; a job with other targets says cron logs shows it too', async () => {
    const { cli } = await setup();
    const local = await cli('add', 'every 1h', '--script', 'echo hi', '--name', 'disk');
    expect(local.code).toBe(0);
    const id = /^([0-9a-f]{12}) {2}disk$/m.exec(local.stdout)![1];
    expect(local.stdout).toContain(
      `  deliver   local\n  output    local: \`hermes cron logs ${id}\` shows each run's whole output (--follow waits for new runs)`,
    );
    const remote = await cli('add', 'every 1h', '--script', 'echo hi', '--name', 'tg', '--deliver', 'telegram:123');
    expect(remote.stdout).toMatch(/ {2}output {4}to the targets above; `hermes cron logs [0-9a-f]{12}` shows each run's output too/);
  });

  it('cron logs prints a 12,000-character local output whole, oldest run first, labelled as a script run; runs --output too', async () => {
    const { env, api, cli, runOnce } = await setup();
    const lines = Array.from({ length: 120 }, (_, i) => `line ${String(i + 1).padStart(4, '0')} ${'x'.repeat(89)}`);
    const whole = lines.join('\n');
    const file = join(env.home, 'out.txt');
    writeFileSync(file, whole);
    expect((await cli('add', 'every 1h', '--script', `cat ${file}`, '--name', 'report')).code).toBe(0);
    await runOnce('report');
    writeFileSync(file, 'second run');
    await runOnce('report', 2);

    const logs = await cli('logs', 'report');
    expect(logs.code).toBe(0);
    const out = logs.stdout.split('\n');
    const at = out.flatMap((l, i) => (l.startsWith('── ') ? [i] : []));
    const heads = at.map((i) => out[i]!);
    expect(heads).toHaveLength(2);
    expect(heads[0]).toMatch(/^── \S+ \S+ \S+ \(.+\) · report · manual · ok · script run · took \d+\.\ds · local delivered$/);
    // The whole first output (over the record's 8,000-character cap), then the second run.
    const first = out.slice(at[0]! + 1, at[1]! - 1).join('\n');
    expect(first).toBe(whole);
    expect(out.slice(at[1]! + 1)).toEqual(['second run', '']);
    const job = await api.service.get('report');
    const [record] = (await api.store.runs(job.id, 2)).slice(-1);
    expect(record!.output!.endsWith('\n[output cut]')).toBe(true); // the record alone would not have it

    const json = JSON.parse((await cli('logs', 'report', '--json')).stdout) as Array<{ output: string; output_whole: boolean }>;
    expect(json.map((r) => [r.output.length, r.output_whole])).toEqual([
      [whole.length, true],
      ['second run'.length, true],
    ]);

    const runs = await cli('runs', 'report', '--output', '--limit', '1');
    expect(runs.stdout.split('\n')).toEqual([expect.stringMatching(/^── .* · report · manual · ok · script run · /), 'second run', '']);

    // The same runs on the job's stream (`hermes chat --session cron:<id>`): a script run of the job, no tick number.
    const events = await sessionStoreFor(env.config, api.redis, api.keys).recentEvents(cronSessionId(job.id), 5);
    const shown = events.filter((e) => e.type === 'reply').map((e) => formatEvent(e)!.split('\n')[0]);
    expect(shown).toEqual([
      expect.stringMatching(/^\[\d\d:\d\d:\d\d\] cron report · script run \(manual\)$/),
      expect.stringMatching(/^\[\d\d:\d\d:\d\d\] cron report · script run \(manual\)$/),
    ]);
    for (const line of shown) expect(line).not.toContain('undefined');
  });

  it('cron logs of a job without runs says so; an old event without name or runner still reads as a cron run', async () => {
    const { cli } = await setup();
    await cli('add', 'every 1h', '--script', 'echo x', '--name', 'quiet');
    const r = await cli('logs', 'quiet');
    expect(r).toMatchObject({ code: 0, stdout: expect.stringMatching(/^No runs of [0-9a-f]{12} \(quiet\) recorded yet\.$/) });
    const old = formatEvent({
      id: '1700000000000-0',
      type: 'reply',
      data: { text: 'hi', source: 'cron', job_id: 'abc123', trigger: 'schedule' },
    })!;
    expect(old.split('\n')[0]).toMatch(/cron abc123 · run \(schedule\)$/);
  });
});
