/**
 * A loop's `--overlap` (scheduler/loop/loop-overlap.ts): what a tick due while the loop's previous
 * tick still runs does — `queue` (the default) waits and runs once the running tick ends, `skip`
 * is skipped (the next tick comes at the next slot), `cancel_other` cancels the running tick
 * (its command killed, recorded cancelled, no failure counted) and runs. The grammar on every surface
 * (`/loop`, `hermes loop`, `POST /api/schedules`) refuses what loops cannot do, with the reason.
 *
 * Real `hermes worker` processes and Redis; a tick that must last waits for a file the test writes.
 */
import { describe } from 'vitest';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseLoopArgs } from '../scheduler/loop/loop-command.ts';
import { ScheduleInputError } from '../scheduler/errors/schedule-input-error.ts';
import type { LoopOverlap } from '../scheduler/loop/loop-overlap.ts';
import { testEnv } from './support/env.ts';
import { clients, events, spawnWorker, waitFor, waitForEvents, type TestClients } from './support/stack.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { alive, waitForFile } from './support/child-processes.ts';

const PARSE = { minIntervalSeconds: 30, maxPromptChars: 4000 };
describe('the --overlap grammar of a loop', () => {
  it('takes queue, skip and cancel_other; queue is the default and not stored', ({ expect }) => {
    expect(parseLoopArgs('5m check the build --overlap cancel_other', PARSE)).toMatchObject({
      action: 'set',
      prompt: 'check the build',
      overlap: 'cancel_other',
    });
    expect(parseLoopArgs('5m check --overlap skip --times 3', PARSE)).toMatchObject({ overlap: 'skip', times: 3 });
    expect(parseLoopArgs('5m check --until it is green --overlap cancel-other', PARSE)).toMatchObject({
      until: 'it is green',
      overlap: 'cancel_other',
    });
    expect(parseLoopArgs('5m check --overlap queue', PARSE)).not.toHaveProperty('overlap');
  });

  it('refuses allow and buffer_all with the reason, other values, a missing value and a self-paced loop', ({ expect }) => {
    const refused = (args: string) => {
      try {
        parseLoopArgs(args, PARSE);
      } catch (err) {
        expect(err).toBeInstanceOf(ScheduleInputError);
        return (err as Error).message;
      }
      throw new Error(`accepted: ${args}`);
    };
    expect(refused('5m check --overlap allow')).toMatch(/^--overlap allow is for cron jobs: a loop's ticks never run side by side/);
    expect(refused('5m check --overlap buffer_all')).toMatch(/^--overlap buffer_all is for cron jobs/);
    expect(refused('5m check --overlap sometimes')).toBe('--overlap must be queue, skip or cancel_other for a loop, got "sometimes".');
    expect(refused('5m check --overlap')).toMatch(/^--overlap needs a value/);
    expect(refused('check the build --overlap skip')).toMatch(/^--overlap is for loops with an interval/);
  });
});

describe.concurrent('a loop tick due while the previous one runs', () => {
  /**
   * A command loop every 2 s whose first tick waits until `release` exists (its later ticks end at
   * once); resolves once the first tick runs, with its command's pid.
   */
  async function longFirstTick(cleanups: CleanUp[], session: string, overlap: LoopOverlap | undefined) {
    const env = testEnv();
    cleanups.push(() => env.cleanup());
    const c = clients(env);
    cleanups.push(() => c.close());
    const pidFile = join(env.home, 'first.pid');
    const release = join(env.home, 'release');
    const command = `if [ "$HERMES_TICK" = 1 ]; then echo $$ > ${pidFile}; ${waitForFile(release)}; fi; echo "tick $HERMES_TICK"`;
    await spawnWorker(cleanups, env);
    await c.schedules.set(
      session,
      'loop',
      { prompt: 'check', intervalSeconds: 2, times: null, until: null, notes: [], ...(overlap ? { overlap } : {}) },
      { origin: { surface: 'cli' }, runner: { kind: 'command', command, timeoutSeconds: 600 } },
    );
    const pid = await waitFor(
      () => (existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== '' ? Number(readFileSync(pidFile, 'utf8')) : undefined),
      30_000,
      'the first tick running',
    );
    return { c, pid, release };
  }

  /** Waits until a later tick's due time has passed while the first still runs (the loop's job scheduler queued it). */
  async function laterTickDue(c: TestClients, session: string): Promise<void> {
    const loop = (await c.loops.get(session, 'loop'))!;
    const dueBy = loop.createdAt + 2 * 2000;
    await waitFor(() => Date.now() > dueBy + 500 || undefined, 15_000, 'a later tick due');
  }

  it('cancel_other: the running tick is cancelled — its command killed, recorded cancelled, no failure counted — and the new one runs', async ({
    cleanups,
    expect,
  }) => {
    const { c, pid } = await longFirstTick(cleanups, 'ov-cancel', 'cancel_other');
    const [failed] = await waitForEvents(c, 'ov-cancel', 'tick.failed', 1, 30_000);
    expect(failed!.data).toMatchObject({
      tick: 1,
      cancelled: true,
      error: 'Cancelled: a newer occurrence replaced it (--overlap cancel_other).',
    });
    const [reply] = await waitForEvents(c, 'ov-cancel', 'reply', 1, 30_000);
    expect(reply!.data).toMatchObject({ tick: 2, text: 'tick 2' });
    await waitFor(() => (alive(pid) ? undefined : true), 10_000, 'the first command killed');
    expect(await c.loops.get('ov-cancel', 'loop')).toMatchObject({ status: 'active', failureStreak: 0, lastError: null });
  });

  it('skip: the tick is skipped; once the running tick ends, the next comes at its own slot, not at once', async ({ cleanups, expect }) => {
    const { c, release } = await longFirstTick(cleanups, 'ov-skip', 'skip');
    await laterTickDue(c, 'ov-skip');
    const releasedAt = Date.now();
    writeFileSync(release, '');
    const replies = await waitForEvents(c, 'ov-skip', 'reply', 2, 30_000);
    expect(replies.map((r) => r.data.tick)).toEqual([1, 2]);
    // Tick 2 is the occurrence of a slot after the release: the ones due while tick 1 ran were skipped.
    expect(Number(replies[1]!.data.dueAt)).toBeGreaterThanOrEqual(releasedAt);
    expect(await events(c, 'ov-skip', 'tick.failed')).toHaveLength(0);
  });

  it('queue (the default): the tick due meanwhile waits and runs as soon as the running one ends', async ({ cleanups, expect }) => {
    const { c, release } = await longFirstTick(cleanups, 'ov-queue', undefined);
    await laterTickDue(c, 'ov-queue');
    const releasedAt = Date.now();
    writeFileSync(release, '');
    // The loop goes on: on a busy machine the tick of the next slot may have replied too by the time this looks.
    const replies = await waitForEvents(c, 'ov-queue', 'reply', 2, 30_000);
    expect(replies.slice(0, 2).map((r) => r.data.tick)).toEqual([1, 2]);
    expect(Number(replies[1]!.data.dueAt)).toBeLessThan(releasedAt);
    // The ticks due while the first ran coalesced into tick 2: any later one is of a slot after the release.
    for (const later of replies.slice(2)) expect(Number(later.data.dueAt)).toBeGreaterThanOrEqual(releasedAt);
  });
});
