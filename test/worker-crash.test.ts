/**
 * A worker process killed with SIGKILL in the middle of a tick: the tick is
 * completed by another worker and delivered once; with the default lock and
 * stall settings it restarts within seconds; a worker that loses a job's lock
 * commits nothing for it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { testEnv } from './support/env.ts';
import { clients, events, sleep, spawnWorker, waitFor, waitForEvents } from './support/stack.ts';

const children: ChildProcess[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('worker crash mid-tick', () => {
  it('SIGKILL during a tick → the tick completes on the other worker and is delivered exactly once', async () => {
    const env = testEnv({ 'worker.lock_duration_ms': 2000, 'worker.stalled_interval_ms': 500 });
    const c = clients(env);
    cleanups.push(() => env.cleanup(), () => c.close());
    const a = await spawnWorker(env);
    const b = await spawnWorker(env);
    children.push(a, b);
    await c.schedules.set('crash', 'loop', { prompt: 'slow check', intervalSeconds: 2, times: 3, until: null, notes: [] }, {
      origin: { surface: 'cli' }, runner: { kind: 'command', command: 'sleep 2.5; echo "checked $HERMES_TICK"', timeoutSeconds: 10 },
    });
    const [started] = await waitForEvents(c, 'crash', 'tick.started', 1);
    const victim = Number(started!.data.pid);
    const occurrence = String(started!.data.occurrenceId);
    expect([a.pid, b.pid]).toContain(victim);
    await sleep(300); // mid-tick: the command sleeps 2.5 s, so a late-seen start still leaves room
    process.kill(victim, 'SIGKILL');
    const survivor = victim === a.pid ? b.pid : a.pid;
    await waitFor(async () => ((await c.loops.get('crash', 'loop'))?.status === 'finished' ? true : undefined), 30_000, 'loop finished');
    await sleep(1_000);
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

  it('with the default lock and stall settings, a SIGKILLed worker\'s tick restarts on another worker within seconds and commits once', async () => {
    const env = testEnv();
    // The product defaults (scheduler/config.ts), not the test environment's own lock settings.
    delete env.childEnv.HERMES_WORKER_LOCK_DURATION_MS;
    delete env.childEnv.HERMES_WORKER_STALLED_INTERVAL_MS;
    const c = clients(env);
    cleanups.push(() => env.cleanup(), () => c.close());
    const a = await spawnWorker(env);
    const b = await spawnWorker(env);
    children.push(a, b);
    await c.schedules.set('recover', 'loop', { prompt: 'slow check', intervalSeconds: 30, times: 1, until: null, notes: [] }, {
      origin: { surface: 'cli' }, runner: { kind: 'command', command: 'sleep 2; echo "checked $HERMES_TICK"', timeoutSeconds: 10 },
    });
    const [started] = await waitForEvents(c, 'recover', 'tick.started', 1);
    const victim = Number(started!.data.pid);
    const occurrence = String(started!.data.occurrenceId);
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

  it('a worker that loses a job\'s lock while its turn runs aborts that turn and commits nothing; the occurrence commits once elsewhere', async () => {
    const env = testEnv();
    const c = clients(env);
    cleanups.push(() => env.cleanup(), () => c.close());
    const a = await spawnWorker(env);
    children.push(a);
    const runs = join(env.home, 'runs');
    await c.schedules.set('lost', 'loop', { prompt: 'slow check', intervalSeconds: 30, times: 1, until: null, notes: [] }, {
      origin: { surface: 'cli' },
      runner: { kind: 'command', command: `echo start >> ${runs}; sleep 3; echo end >> ${runs}; echo "checked $HERMES_TICK"`, timeoutSeconds: 10 },
    });
    const [started] = await waitForEvents(c, 'lost', 'tick.started', 1);
    const [active] = await c.queues.ticks.getJobs(['active']);
    // The lock lapses under the worker (as after a renewal that came too late): the stall check hands the job on.
    await c.redis.del(`${c.keys.bullPrefix}:ticks:${active!.id}:lock`);
    const starts = await waitForEvents(c, 'lost', 'tick.started', 2, 20_000);
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
});
