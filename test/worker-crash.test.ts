/**
 * A worker process killed with SIGKILL in the middle of a tick: the tick is
 * completed by another worker and delivered once; with the default lock and
 * stall settings it restarts within seconds; a worker that loses a job's lock
 * commits nothing for it.
 *
 * The killed worker is a `hermes worker` child process; the survivor runs in
 * the test process (the kill is what needs a process of its own). Turns block
 * on a file the test creates, so "mid-tick" is a state the test holds, not a
 * guess about timing.
 */
import { describe } from 'vitest';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { testEnv } from './support/env.ts';
import { clients, events, spawnWorker, startWorker, waitFor, waitForEvents, waitForNoTickJobs } from './support/stack.ts';
import type { TestEnv } from './support/env.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { alive, waitForFile } from './support/child-processes.ts';

/** An in-process worker on `env`, drained after the test. */
async function survivorWorker(cleanups: CleanUp[], env: TestEnv): Promise<void> {
  const w = await startWorker(env);
  cleanups.push(() => w.drain());
}

// Each test has its own Redis prefix, workers and files, so they run side by side (most of their time is
// spent waiting for a lock to lapse or a timeout to pass).
describe.concurrent('worker crash mid-tick', () => {
  it('SIGKILL during a tick → the tick completes on the other worker and is delivered exactly once', async ({ cleanups, expect }) => {
    const env = testEnv({ 'worker.lock_duration_ms': 2000, 'worker.stalled_interval_ms': 500 });
    const c = clients(env);
    cleanups.push(
      () => env.cleanup(),
      () => c.close(),
    );
    const release = join(env.home, 'release');
    cleanups.push(() => writeFileSync(release, '')); // never leaves a turn waiting, even when the test fails
    const a = await spawnWorker(cleanups, env);
    // Every turn waits for the release file: tick 1 stays mid-turn until the test has killed its worker.
    await c.schedules.set(
      'crash',
      'loop',
      { prompt: 'slow check', intervalSeconds: 1, times: 3, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: { kind: 'command', command: `${waitForFile(release)}; echo "checked $HERMES_TICK"`, timeoutSeconds: 30 },
      },
    );
    const [started] = await waitForEvents(c, 'crash', 'tick.started', 1);
    const victim = Number(started!.data.pid);
    const occurrence = String(started!.data.occurrenceId);
    expect(victim).toBe(a.pid); // the only worker
    await survivorWorker(cleanups, env); // the other worker, alive before the kill
    process.kill(victim, 'SIGKILL');
    await waitForEvents(c, 'crash', 'tick.started', 2, 20_000); // taken over after the lock lapsed
    writeFileSync(release, '');
    await waitFor(async () => ((await c.loops.get('crash', 'loop'))?.status === 'finished' ? true : undefined), 30_000, 'loop finished');
    await waitForNoTickJobs(c); // nothing left that could deliver it again
    const survivor = process.pid;
    const replies = await events(c, 'crash', 'reply');
    const forKilled = replies.filter((e) => e.data.occurrenceId === occurrence);
    expect(forKilled).toHaveLength(1);
    expect(forKilled[0]!.data.pid).toBe(survivor);
    expect(forKilled[0]!.data.text).toBe('checked 1');
    expect(replies.map((e) => e.data.text)).toEqual(['checked 1', 'checked 2', 'checked 3']);
    expect(new Set(replies.map((e) => e.data.occurrenceId)).size).toBe(3);
    const transcript = await c.sessions.transcript('crash');
    expect(transcript.filter((m) => m.role === 'assistant').map((m) => m.content)).toEqual(['checked 1', 'checked 2', 'checked 3']);
  });

  it("with the default lock and stall settings, a SIGKILLed worker's tick restarts on another worker within seconds and commits once", async ({
    cleanups,
    expect,
  }) => {
    // The product defaults (scheduler/config/config.ts), not the test environment's own lock settings;
    // the one test of the default recovery time (the others lower them to test the rule).
    const env = testEnv({ 'worker.lock_duration_ms': undefined, 'worker.stalled_interval_ms': undefined });
    expect(env.config.worker).toMatchObject({ lock_duration_ms: 3000, lock_renew_ms: 1000, stalled_interval_ms: 1000 });
    expect(env.childEnv.HERMES_WORKER_LOCK_DURATION_MS).toBeUndefined();
    const c = clients(env);
    cleanups.push(
      () => env.cleanup(),
      () => c.close(),
    );
    const firstRun = join(env.home, 'first-run');
    const release = join(env.home, 'release');
    cleanups.push(() => writeFileSync(release, '')); // ends the killed worker's orphaned command
    const a = await spawnWorker(cleanups, env);
    // The first run marks itself and hangs (its worker is killed); the run that takes over answers at once.
    await c.schedules.set(
      'recover',
      'loop',
      { prompt: 'slow check', intervalSeconds: 30, times: 1, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: {
          kind: 'command',
          command: `if [ ! -f ${firstRun} ]; then touch ${firstRun}; ${waitForFile(release)}; fi; echo "checked $HERMES_TICK"`,
          timeoutSeconds: 60,
        },
      },
    );
    const [started] = await waitForEvents(c, 'recover', 'tick.started', 1);
    const victim = Number(started!.data.pid);
    const occurrence = String(started!.data.occurrenceId);
    expect(victim).toBe(a.pid);
    await survivorWorker(cleanups, env);
    await waitFor(() => existsSync(firstRun), 10_000, 'the first run under way');
    process.kill(victim, 'SIGKILL');
    const killedAt = Date.now();
    const restarts = await waitForEvents(c, 'recover', 'tick.started', 2, 20_000);
    const restart = restarts[1]!;
    expect(restart.data.occurrenceId).toBe(occurrence);
    expect(restart.data.pid).not.toBe(victim);
    const recoveryMs = Number(restart.data.startedAt) - killedAt;
    // Rule: lock_duration_ms (3 s) + stalled_interval_ms (1 s) + pick-up; the bound leaves room for a loaded machine.
    expect(recoveryMs).toBeLessThan(10_000);
    await waitFor(async () => ((await c.loops.get('recover', 'loop'))?.status === 'finished' ? true : undefined), 20_000, 'loop finished');
    const replies = await events(c, 'recover', 'reply');
    expect(replies.map((e) => [e.data.occurrenceId, e.data.text, e.data.tick])).toEqual([[occurrence, 'checked 1', 1]]);
    expect(await events(c, 'recover', 'tick.failed')).toEqual([]);
  });

  it("a worker that loses a job's lock while its turn runs aborts that turn and commits nothing; the occurrence commits once elsewhere", async ({
    cleanups,
    expect,
  }) => {
    const env = testEnv();
    const c = clients(env);
    cleanups.push(
      () => env.cleanup(),
      () => c.close(),
    );
    await survivorWorker(cleanups, env); // one worker in this process: it loses the lock and takes the job over again
    const runs = join(env.home, 'runs');
    const pids = join(env.home, 'pids');
    const release = join(env.home, 'release');
    cleanups.push(() => writeFileSync(release, '')); // never leaves a turn waiting, even when the test fails
    await c.schedules.set(
      'lost',
      'loop',
      { prompt: 'slow check', intervalSeconds: 30, times: 1, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: {
          kind: 'command',
          command: `echo $$ >> ${pids}; echo start >> ${runs}; ${waitForFile(release)}; echo end >> ${runs}; echo "checked $HERMES_TICK"`,
          timeoutSeconds: 30,
        },
      },
    );
    const [started] = await waitForEvents(c, 'lost', 'tick.started', 1);
    const [active] = await c.queues.ticks.getJobs(['active']);
    const firstShell = Number(
      await waitFor(() => existsSync(pids) && readFileSync(pids, 'utf8').split('\n')[0], 10_000, 'the first run under way'),
    );
    // The lock lapses under the worker (as after a renewal that came too late): the stall check hands the job on.
    await c.redis.del(`${c.keys.bullPrefix}:ticks:${active!.id}:lock`);
    const starts = await waitForEvents(c, 'lost', 'tick.started', 2, 20_000);
    // The copy that lost its lock is aborted (its command killed) before the turns may go on.
    await waitFor(() => !alive(firstShell), 10_000, 'the first run killed');
    writeFileSync(release, '');
    await waitFor(async () => ((await c.loops.get('lost', 'loop'))?.status === 'finished' ? true : undefined), 20_000, 'loop finished');
    const replies = await events(c, 'lost', 'reply');
    expect(replies.map((e) => [e.data.occurrenceId, e.data.text])).toEqual([[started!.data.occurrenceId, 'checked 1']]);
    // The reply is the run of the copy that holds the lock, not of the one that lost it.
    expect(replies[0]!.data.startedAt).toBe(starts[1]!.data.startedAt);
    expect(await events(c, 'lost', 'tick.failed')).toEqual([]);
    expect((await c.sessions.transcript('lost')).map((m) => m.role)).toEqual(['user', 'assistant']);
    // Started twice (the copy that lost its lock, then the one that took the job over), run to the end once.
    expect(readFileSync(runs, 'utf8').trim().split('\n').sort()).toEqual(['end', 'start', 'start']);
  });

  it('the command of a SIGKILLed worker does not outlive its own timeout: the backstop ends its whole process group', async ({
    cleanups,
    expect,
  }) => {
    const env = testEnv();
    const c = clients(env);
    cleanups.push(
      () => env.cleanup(),
      () => c.close(),
    );
    const pids = join(env.home, 'pids');
    const a = await spawnWorker(cleanups, env);
    // The shell and a grandchild it started in the background, both far longer than the 2 s timeout;
    // and a child left behind (output elsewhere, so nothing waits for it) by a command that ends a second
    // after the kill, when no worker is left to end its group.
    const left = join(env.home, 'left');
    await c.schedules.set(
      'orphan',
      'loop',
      { prompt: 'slow check', intervalSeconds: 30, times: 1, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: { kind: 'command', command: `echo $$ >> ${pids}; sleep 600 & echo $! >> ${pids}; wait`, timeoutSeconds: 2 },
      },
    );
    await c.schedules.set(
      'left-behind',
      'loop',
      { prompt: 'check', intervalSeconds: 30, times: 1, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: { kind: 'command', command: `sleep 600 >/dev/null 2>&1 & echo $! > ${left}; sleep 1`, timeoutSeconds: 2 },
      },
    );
    const [shell, grandchild] = await waitFor(
      () => {
        const lines = existsSync(pids) ? readFileSync(pids, 'utf8').trim().split('\n').filter(Boolean) : [];
        return lines.length === 2 ? lines.map(Number) : undefined;
      },
      15_000,
      'the command and its background child under way',
    );
    const leftBehind = Number(
      await waitFor(() => existsSync(left) && readFileSync(left, 'utf8').trim(), 15_000, 'the left-behind child started'),
    );
    process.kill(a.pid!, 'SIGKILL');
    const killedAt = Date.now();
    expect(alive(shell!) && alive(grandchild!) && alive(leftBehind)).toBe(true); // nothing else ends them: no worker is left
    // The worker's own deadline (2 s) is gone with it; the backstop comes 5 s after it (then SIGKILL 2 s later).
    await waitFor(
      () => (!alive(shell!) && !alive(grandchild!) && !alive(leftBehind) ? true : undefined),
      20_000,
      'the orphaned groups ended',
    );
    expect(Date.now() - killedAt).toBeLessThan(20_000);
  });
});
