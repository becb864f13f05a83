/**
 * Pause, resume, replace and stop of a loop while its ticks run: one chain of ticks, the new loop
 * fires at once, and a stop is never overridden by the tick that was running.
 */
import { describe } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startWorkerStack, waitForEvents, waitForNoTickJobs } from './support/stack.ts';
import { it } from './support/cleanup.ts';

// Each test has its own Redis prefix, worker and files, so they run side by side (most of their time is spent
// waiting for ticks to come due).
describe.concurrent('loop control while ticks run', () => {
  it('pause then resume of a self-paced loop keeps one chain of ticks (no doubled rate)', async ({ cleanups, expect }) => {
    const { env, c } = await startWorkerStack(cleanups, { 'loops.self_paced_floor_seconds': 1, 'loops.self_paced_ceiling_seconds': 1 });
    const release = join(env.home, 'release');
    cleanups.push(() => writeFileSync(release, ''));
    // Tick 2 stays mid-turn until released, so the second pause and resume land while it runs.
    await c.schedules.set(
      'sp',
      'loop',
      { prompt: 'p', intervalSeconds: null, times: null, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: {
          kind: 'command',
          command: `if [ "$HERMES_TICK" = 2 ]; then while [ ! -f ${release} ]; do sleep 0.05; done; fi; echo same`,
          timeoutSeconds: 10,
        },
      },
    );
    await waitForEvents(c, 'sp', 'reply', 1);
    await c.schedules.pause('sp', 'loop'); // between ticks
    await c.schedules.resume('sp', 'loop');
    await waitForEvents(c, 'sp', 'tick.started', 2);
    await c.schedules.pause('sp', 'loop'); // while a tick runs: its commit must not start a second chain
    await c.schedules.resume('sp', 'loop');
    writeFileSync(release, '');
    // Three ticks after that: a second chain would fire between them, less than the delay apart.
    const replies = (await waitForEvents(c, 'sp', 'reply', 5, 15_000)).slice(0, 5);
    for (let i = 1; i < replies.length; i++) {
      // the rule: each tick is due the delay (floor = ceiling = 1 s) after the previous one finished, or later
      expect(Number(replies[i]!.data.startedAt) - Number(replies[i - 1]!.data.finishedAt)).toBeGreaterThanOrEqual(1000);
    }
  });

  it('replacing a loop with one of the same interval fires the new loop now, not at the old slot', async ({ cleanups, expect }) => {
    const { c } = await startWorkerStack(cleanups);
    const run = (text: string) => ({
      origin: { surface: 'cli' as const },
      runner: { kind: 'command' as const, command: `echo ${text}`, timeoutSeconds: 5 },
    });
    await c.schedules.set('rp', 'loop', { prompt: 'a', intervalSeconds: 20, times: null, until: null, notes: [] }, run('A'));
    await waitForEvents(c, 'rp', 'reply', 1);
    const replacedAt = Date.now();
    const reply = await c.schedules.set('rp', 'loop', { prompt: 'b', intervalSeconds: 20, times: null, until: null, notes: [] }, run('B'));
    expect(reply).toMatch(/Replaced the previous loop/);
    const replies = await waitForEvents(c, 'rp', 'reply', 2, 15_000);
    expect(replies[1]!.data.text).toBe('B');
    // Now, not at the old slot 20 s on: within half the interval (a loaded machine took 2.6 s to start it).
    expect(Number(replies[1]!.data.startedAt) - replacedAt).toBeLessThan(10_000);
  });

  it('a stop that arrives while a tick runs is not overridden by the tick (budget pause)', async ({ cleanups, expect }) => {
    const { env, c } = await startWorkerStack(cleanups, { 'loops.max_ticks': 1 });
    const release = join(env.home, 'release');
    cleanups.push(() => writeFileSync(release, ''));
    // The tick stays mid-turn until the stop has been written.
    await c.schedules.set(
      'st',
      'loop',
      { prompt: 'p', intervalSeconds: 10, times: null, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: { kind: 'command', command: `while [ ! -f ${release} ]; do sleep 0.05; done; echo x`, timeoutSeconds: 10 },
      },
    );
    await waitForEvents(c, 'st', 'tick.started', 1);
    expect(await c.schedules.stop('st', 'loop')).toMatch(/Loop stopped/);
    writeFileSync(release, '');
    await waitForEvents(c, 'st', 'reply', 1);
    await waitForNoTickJobs(c);
    expect(await c.loops.get('st', 'loop')).toMatchObject({ status: 'finished', statusReason: 'stopped by user', ticksUsed: 1 });
    expect(await c.schedules.resume('st', 'loop')).toMatch(/Loop is finished; nothing to resume/);
  });

  it('F29: a stop or pause while a tick runs counts that tick and says its reply will still come', async ({ cleanups, expect }) => {
    const { env, c } = await startWorkerStack(cleanups);
    const release = join(env.home, 'release');
    cleanups.push(() => writeFileSync(release, ''));
    const blocked = (text: string) => ({
      origin: { surface: 'cli' as const },
      runner: { kind: 'command' as const, command: `while [ ! -f ${release} ]; do sleep 0.05; done; echo ${text}`, timeoutSeconds: 20 },
    });
    await c.schedules.set('f29', 'loop', { prompt: 'p', intervalSeconds: 30, times: null, until: null, notes: [] }, blocked('late'));
    await waitForEvents(c, 'f29', 'tick.started', 1);
    expect(await c.schedules.stop('f29', 'loop')).toBe(
      'Loop stopped after 1 tick(s): tick #1 is still running, and its reply will still come.',
    );
    writeFileSync(release, '');
    expect((await waitForEvents(c, 'f29', 'reply', 1))[0]!.data.text).toBe('late');
    await waitForNoTickJobs(c);
    expect(await c.loops.get('f29', 'loop')).toMatchObject({ status: 'finished', ticksUsed: 1 });

    // The same for a pause; once nothing runs, the count is the ticks done, with nothing promised.
    const release2 = join(env.home, 'release2');
    cleanups.push(() => writeFileSync(release2, ''));
    await c.schedules.set(
      'f29p',
      'loop',
      { prompt: 'p', intervalSeconds: 30, times: null, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: { kind: 'command', command: `while [ ! -f ${release2} ]; do sleep 0.05; done; echo p`, timeoutSeconds: 20 },
      },
    );
    await waitForEvents(c, 'f29p', 'tick.started', 1);
    expect(await c.schedules.pause('f29p', 'loop')).toBe(
      'Loop paused after 1 tick(s): tick #1 is still running, and its reply will still come. /loop resume continues it.',
    );
    writeFileSync(release2, '');
    await waitForEvents(c, 'f29p', 'reply', 1);
    await waitForNoTickJobs(c);
    expect(await c.schedules.stop('f29p', 'loop')).toBe('Loop stopped after 1 tick(s).');
  });
});
