/**
 * A worker process killed with SIGKILL in the middle of a tick: the tick is
 * completed by another worker and delivered once (issue: Foundation, point 8).
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
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
});
