/**
 * The hand-off of `--after` across a crash (docs/CRON.md, "Jobs that run after jobs", exactly once per parent
 * run), with real `hermes worker` processes: the parent's run is committed with its hand-off, and the worker is
 * SIGKILLed after the commit and before the child's run is queued — its Redis connections go through a proxy
 * that holds the command queueing the child's run (`cutOn`), so Redis never gets it. Other workers take the
 * parent's stalled job over, find the run committed and hand off from its record: the child runs exactly once,
 * with the parent's output. The same for `--after-all`, killed after the child's run is queued and before it takes
 * the parents' runs out of its window: the child runs once, and the runs it took start no second run.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe } from 'vitest';
import { afterRunDigest } from '../scheduler/cron/cron-after.ts';
import type { CronCaller } from '../scheduler/cron/cron-input.ts';
import { it } from './support/cleanup.ts';
import { openTestCron } from './support/cron-worker.ts';
import { PRODUCT_LOCK } from './support/env.ts';
import { spawnWorker, waitFor } from './support/stack.ts';
import { startTcpProxy } from './support/tcp-proxy.ts';

const CLI: CronCaller = { origin: { surface: 'cli' }, trusted: true };

describe.concurrent('--after across a crash', () => {
  it('a worker SIGKILLed between the parent run’s commit and its hand-off: the child still runs exactly once, with the parent’s output', async ({
    cleanups,
    expect,
  }) => {
    const { env, api } = openTestCron(cleanups, PRODUCT_LOCK);
    const proxy = await startTcpProxy(env.redisUrl);
    cleanups.push(() => proxy.close());
    const parent = await api.service.add({ schedule: 'every 2h', script: 'echo "PARENT-FOUND 3 ISSUES"', name: 'scanner' }, CLI);
    const child = await api.service.add({ script: 'cat', name: 'triage', after: 'scanner' }, CLI);
    const runsOf = (id: string) => api.store.runs(id, 20);

    // The first worker reaches Redis through the proxy, which holds the command that would queue the child's run.
    const first = await spawnWorker(cleanups, env, { REDIS_URL: proxy.url });
    const queueing = proxy.cutOn(api.keys.cronAfterJobId(child.id, 'DIGEST').replace(/DIGEST$/, ''));
    await api.service.runNow('scanner', CLI);
    await queueing;
    first.kill('SIGKILL');
    await new Promise((r) => (first.exitCode === null && first.signalCode === null ? first.once('exit', r) : r(null)));
    // Killed in the window: the parent's run is committed with its hand-off named, and nothing of the child exists.
    const [run] = await runsOf(parent.id);
    expect(run).toMatchObject({ status: 'ok', handoff: [child.id] });
    const childJobId = api.keys.cronAfterJobId(child.id, afterRunDigest(run!.occurrence_id));
    const ticks = api.queues.forCronJob(parent.id).ticks;
    expect(await ticks.getJob(childJobId)).toBeUndefined();
    expect(await runsOf(child.id)).toEqual([]);

    // Two workers take over (a fleet): the parent's job comes back as stalled, one of them finishes it.
    for (let i = 0; i < 2; i++) await spawnWorker(cleanups, env);
    const childRuns = await waitFor(
      async () => ((await runsOf(child.id)).length > 0 ? await runsOf(child.id) : undefined),
      40_000,
      'the child ran',
    );
    // Quiet: no job left to run now (the parent's scheduler keeps its next one, 2 h away), so the counts are final.
    await waitFor(
      async () => Object.values(await ticks.getJobCounts('active', 'waiting', 'prioritized')).every((n) => n === 0) || undefined,
      20_000,
      'the queue idle',
    );
    expect((await ticks.getDelayed()).map((j) => j.id)).not.toContain(childJobId);
    expect(await runsOf(parent.id)).toHaveLength(1);
    expect(await runsOf(child.id)).toHaveLength(1);
    expect(childRuns[0]).toMatchObject({
      trigger: 'after',
      status: 'ok',
      parent: { job_id: parent.id, occurrence_id: run!.occurrence_id, status: 'ok' },
    });
    // A script child reads its prompt with the parent's output on stdin (`cat` prints it).
    expect(childRuns[0]!.output).toContain('PARENT-FOUND 3 ISSUES');
  });

  it('--after-all: a worker SIGKILLed after queueing the child’s run and before taking the parents’ runs out of its window: the child runs once, and those runs start no second run', async ({
    cleanups,
    expect,
  }) => {
    const { env, api } = openTestCron(cleanups, PRODUCT_LOCK);
    const proxy = await startTcpProxy(env.redisUrl);
    cleanups.push(() => proxy.close());
    const a = await api.service.add({ schedule: 'every 2h', script: 'echo "A-OUT"', name: 'A' }, CLI);
    const b = await api.service.add({ schedule: 'every 2h', script: 'echo "B-OUT"', name: 'B' }, CLI);
    const c = await api.service.add({ script: 'cat', name: 'C', after: ['A', 'B'], after_all: true }, CLI);
    const runsOf = (id: string) => api.store.runs(id, 20);
    const window = async () => Object.keys(await api.redis.hgetall(api.keys.cronAfterAll(c.id))).sort();

    // The first worker reaches Redis through the proxy, which holds the script that takes the runs out of C's window
    // (ioredis sends its source with EVAL the first time, then EVALSHA of its SHA-1).
    const first = await spawnWorker(cleanups, env, { REDIS_URL: proxy.url });
    const take = readFileSync(new URL('../scheduler/store/redis/scripts/take-after-all-1.lua', import.meta.url), 'utf8');
    const taking = proxy.cutOn([createHash('sha1').update(take).digest('hex'), take.slice(0, 200)]);
    await api.service.runNow('A', CLI);
    await waitFor(async () => ((await window()).includes(`run:${a.id}`) ? true : undefined), 15_000, "A's run in C's window");
    await api.service.runNow('B', CLI);
    await taking;
    first.kill('SIGKILL');
    await new Promise((r) => (first.exitCode === null && first.signalCode === null ? first.once('exit', r) : r(null)));
    // Killed in the window: C's run is queued, both parents' runs still wait in its window, nothing taken.
    expect(await window()).toEqual([`run:${a.id}`, `run:${b.id}`].sort());
    const [aRun] = await runsOf(a.id);
    const [bRun] = await runsOf(b.id);
    expect(bRun).toMatchObject({ status: 'ok', handoff: [c.id] });

    // Two workers take over: C's queued run runs, B's stalled job hands off again and adds nothing.
    for (let i = 0; i < 2; i++) await spawnWorker(cleanups, env);
    const [cRun] = await waitFor(async () => ((await runsOf(c.id)).length > 0 ? await runsOf(c.id) : undefined), 40_000, 'C ran');
    expect(cRun!.parents!.map((p) => p.occurrence_id).sort()).toEqual([aRun!.occurrence_id, bRun!.occurrence_id].sort());
    expect(cRun!.output).toContain('A-OUT');
    expect(cRun!.output).toContain('B-OUT');
    // B's job finished by another worker took the runs out of the window; A alone now starts nothing.
    await waitFor(async () => ((await window()).some((f) => f.startsWith('run:')) ? undefined : true), 20_000, "C's window emptied");
    const ticks = api.queues.forCronJob(a.id).ticks;
    await api.service.runNow('A', CLI);
    await waitFor(async () => ((await runsOf(a.id)).length > 1 ? true : undefined), 15_000, 'A ran again');
    await waitFor(async () => ((await window()).includes(`run:${a.id}`) ? true : undefined), 15_000, "A's second run in C's window");
    await waitFor(
      async () => Object.values(await ticks.getJobCounts('active', 'waiting', 'prioritized')).every((n) => n === 0) || undefined,
      20_000,
      'the queue idle',
    );
    expect(await runsOf(c.id)).toHaveLength(1);
  });
});
