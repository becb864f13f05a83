/**
 * The hand-off of `--after` across a crash (docs/CRON.md, "Jobs that run after jobs", exactly once per parent
 * run), with real `hermes worker` processes: the parent's run is committed with its hand-off, and the worker is
 * SIGKILLed after the commit and before the child's run is queued — its Redis connections go through a proxy
 * that holds the command queueing the child's run (`cutOn`), so Redis never gets it. Other workers take the
 * parent's stalled job over, find the run committed and hand off from its record: the child runs exactly once,
 * with the parent's output.
 */
import type { ChildProcess } from 'node:child_process';
import { describe } from 'vitest';
import { afterRunDigest } from '../scheduler/cron/cron-after.ts';
import type { CronCaller } from '../scheduler/cron/cron-input.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { openTestCron } from './support/cron-worker.ts';
import { spawnWorker, waitFor } from './support/stack.ts';
import { startTcpProxy } from './support/tcp-proxy.ts';

const CLI: CronCaller = { origin: { surface: 'cli' }, trusted: true };

/** Kill `child` (a `hermes worker`) when the test ends, if it is still running. */
function killAfter(cleanups: CleanUp[], child: ChildProcess): void {
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
}

describe.concurrent('--after across a crash', () => {
  it('a worker SIGKILLed between the parent run’s commit and its hand-off: the child still runs exactly once, with the parent’s output', async ({
    cleanups,
    expect,
  }) => {
    const { env, api } = openTestCron(cleanups);
    const proxy = await startTcpProxy(env.redisUrl);
    cleanups.push(() => proxy.close());
    const parent = await api.service.add({ schedule: 'every 2h', script: 'echo "PARENT-FOUND 3 ISSUES"', name: 'scanner' }, CLI);
    const child = await api.service.add({ script: 'cat', name: 'triage', after: 'scanner' }, CLI);
    const runsOf = (id: string) => api.store.runs(id, 20);

    // The first worker reaches Redis through the proxy, which holds the command that would queue the child's run.
    const first = await spawnWorker(env, { REDIS_URL: proxy.url });
    killAfter(cleanups, first);
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
    for (let i = 0; i < 2; i++) killAfter(cleanups, await spawnWorker(env));
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
});
