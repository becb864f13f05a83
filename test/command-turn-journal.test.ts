/**
 * A command turn is one step of its occurrence's journal (docs/RELIABILITY.md, "A command turn is one
 * step"): a recorded result is used and the command never runs again; a command that started on a
 * worker that died before its result was recorded is in doubt — run again under
 * `worker.command_turn_on_doubt: rerun` (the default) with the same `HERMES_STEP_ID`, or, under
 * `report`, not run again and the tick recorded failed with its outcome unknown.
 *
 * Real `hermes worker` processes, real Redis; every wait is on an observed state.
 */
import { describe } from 'vitest';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { cronOccurrenceId, cronSessionId } from '../scheduler/cron/cron-job.ts';
import { TurnJournalStore } from '../scheduler/journal/turn-journal-store.ts';
import { cronServiceFor } from '../scheduler/services.ts';
import { createLogger } from '../scheduler/logger.ts';
import { PRODUCT_LOCK, testEnv } from './support/env.ts';
import { clients, events, spawnWorker, waitFor, waitForEvents } from './support/stack.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { lines, waitForFile } from './support/child-processes.ts';

const cli = { origin: { surface: 'cli' as const }, trusted: true };

describe.concurrent('a command turn in doubt', () => {
  /**
   * A one-tick command loop whose command records its step id, then waits for a file that never comes
   * on its first run (its second run ends at once); the only worker is SIGKILLed while it waits.
   */
  async function killedMidCommand(cleanups: CleanUp[], onDoubt: 'rerun' | 'report') {
    const env = testEnv(PRODUCT_LOCK);
    cleanups.push(() => env.cleanup());
    const c = clients(env);
    cleanups.push(() => c.close());
    const runs = join(env.home, 'runs');
    const seen = join(env.home, 'seen');
    const command = `echo "$HERMES_STEP_ID" >> ${runs}; [ -f ${seen} ] && { echo ran again; exit 0; }; touch ${seen}; ${waitForFile(join(env.home, 'never'))}`;
    const workerEnv = { HERMES_WORKER_COMMAND_TURN_ON_DOUBT: onDoubt };
    const a = await spawnWorker(cleanups, env, workerEnv);
    await c.schedules.set(
      'cmd',
      'loop',
      { prompt: 'deploy', intervalSeconds: 30, times: 2, until: null, notes: [] },
      { origin: { surface: 'cli' }, runner: { kind: 'command', command, timeoutSeconds: 60 } },
    );
    await waitFor(() => lines(runs).length === 1 || undefined, 30_000, 'the command started');
    a.kill('SIGKILL');
    await new Promise((r) => a.once('exit', r));
    await spawnWorker(cleanups, env, workerEnv);
    return { c, runs };
  }

  it('under the default `rerun`, it runs again on the next worker with the same HERMES_STEP_ID; one reply', async ({
    cleanups,
    expect,
  }) => {
    const { c, runs } = await killedMidCommand(cleanups, 'rerun');
    const [reply] = await waitForEvents(c, 'cmd', 'reply', 1, 30_000);
    expect(reply!.data.text).toBe('ran again');
    const occurrence = String(reply!.data.occurrenceId);
    expect(lines(runs)).toEqual([`${occurrence}:1`, `${occurrence}:1`]);
    expect(await events(c, 'cmd', 'tick.failed')).toHaveLength(0);
  });

  it("under `report`, it is not run again: the tick is recorded failed, its outcome unknown, counted as the loop's tick but not as a failure", async ({
    cleanups,
    expect,
  }) => {
    const { c, runs } = await killedMidCommand(cleanups, 'report');
    const [failed] = await waitForEvents(c, 'cmd', 'tick.failed', 1, 30_000);
    expect(String(failed!.data.error)).toMatch(/^The command's outcome is unknown: .*worker\.command_turn_on_doubt: report/);
    expect(lines(runs)).toHaveLength(1);
    expect(await events(c, 'cmd', 'reply')).toHaveLength(0);
    // Its journal went with the commit; the loop's next tick runs the command as usual (a new step id).
    expect(await c.redis.exists(c.keys.turnJournal('cmd', String(failed!.data.occurrenceId)))).toBe(0);
    const loop = await c.loops.get('cmd', 'loop');
    expect(loop).toMatchObject({ ticksUsed: 1, failureStreak: 0, nextDueAt: null }); // no failure: no back-off either
  });
});

describe.concurrent('a command turn with its result recorded', () => {
  it('a cron script run whose result a crashed worker recorded before its commit is committed with that result; the script never runs', async ({
    cleanups,
    expect,
  }) => {
    const env = testEnv(PRODUCT_LOCK);
    cleanups.push(() => env.cleanup());
    const c = clients(env);
    cleanups.push(() => c.close());
    const cron = cronServiceFor(env.config, c, createLogger({ level: 'silent' }));
    const ran = join(env.home, 'ran');
    const job = await cron.add({ schedule: 'every 1h', name: 'report', paused: true, script: `touch ${ran}; echo fresh` }, cli);
    // The run is queued before any worker runs; its journal is as a worker left it that died between the result and the commit.
    const { dueAt } = await cron.runNow(job.id, cli);
    const occurrenceId = cronOccurrenceId(job.id, dueAt, 'manual');
    const journals = new TurnJournalStore(c.redis, c.keys, 60_000);
    const step = { call: 1, id: 'command', name: 'command' };
    await journals.append(cronSessionId(job.id), occurrenceId, { type: 'started', ...step, at: Date.now() });
    await journals.append(cronSessionId(job.id), occurrenceId, { type: 'result', ...step, content: 'recorded', at: Date.now() });

    await spawnWorker(cleanups, env);
    const [run] = await waitFor(
      async () => {
        const all = await cron.runs(job.id, 5);
        return all.length > 0 ? all : undefined;
      },
      30_000,
      'the run recorded',
    );
    expect(run).toMatchObject({ occurrence_id: occurrenceId, status: 'ok', output: 'recorded' });
    expect(existsSync(ran)).toBe(false);
    expect(await c.redis.exists(c.keys.turnJournal(cronSessionId(job.id), occurrenceId))).toBe(0);
  });
});
