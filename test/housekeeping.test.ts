/**
 * Housekeeping (node-cron timers, docs/DESIGN.md §2): each process checks the worker liveness set
 * on an operator-settable cron expression, forgets workers whose heartbeat stopped long ago, and
 * warns while none is alive. Its timers keep no process alive, and stop with their process.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../scheduler/config/config.ts';
import { ConfigError } from '../scheduler/errors/config-error.ts';
import { getTasks, type ScheduledTask } from 'node-cron';
import { checkWorkerSet, startHousekeeping } from '../worker/runtime/housekeeping.ts';
import { memoryLogger } from './support/telegram-env.ts';
import { startWorker, waitFor } from './support/stack.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { redisTestEnv } from './support/redis-env.ts';

const cleanups = cleanupAfterEach();

/** The timers keeping this process alive (an unref'd timer is not one). */
const refTimers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

/** node-cron's tasks in this process started by `start` (node-cron keeps every task of a process in one registry). */
async function tasksStartedBy<T>(start: () => T | Promise<T>): Promise<{ started: T; tasks: ScheduledTask[] }> {
  const before = new Set(getTasks().keys());
  const started = await start();
  return { started, tasks: [...getTasks().values()].filter((t) => !before.has(t.id)) };
}

describe('worker set housekeeping', () => {
  it('forgets entries older than worker_forget_seconds, keeps the others, and warns while no worker is alive', async () => {
    const { redis, keys } = redisTestEnv(cleanups);
    const key = keys.workers;
    const now = 1_800_000_000_000;
    await redis.zadd(key, now - 2 * 3600_000, 'dead-long-ago', now - 60_000, 'dead-recently');
    const { log, lines } = memoryLogger();
    expect(await checkWorkerSet({ redis, workersKey: key, log, now: () => now }, 3600)).toEqual({ removed: 1, alive: 0 });
    expect(await redis.zrange(key, 0, -1)).toEqual(['dead-recently']);
    expect(lines.some((l) => l.level === 40 && /no worker is alive/.test(String(l.msg)))).toBe(true);

    await redis.zadd(key, now - 1000, 'alive');
    lines.length = 0;
    expect(await checkWorkerSet({ redis, workersKey: key, log, now: () => now }, 3600)).toEqual({ removed: 0, alive: 1 });
    expect(lines.some((l) => /no worker is alive/.test(String(l.msg)))).toBe(false);
  });

  it('runs in every worker process on housekeeping.workers_cron', async () => {
    const { env, redis, keys } = redisTestEnv(cleanups, {
      'housekeeping.workers_cron': '* * * * * *',
      'housekeeping.worker_forget_seconds': 60,
    });
    const key = keys.workers;
    await redis.zadd(key, Date.now() - 3600_000, 'killed-worker');
    const { started: w, tasks } = await tasksStartedBy(() => startWorker(env));
    cleanups.push(() => w.drain());
    expect(tasks.map((t) => t.getPattern())).toEqual(['* * * * * *']);
    await waitFor(async () => (await redis.zscore(key, 'killed-worker')) === null, 10_000, 'the dead worker forgotten');
    expect(await redis.zscore(key, w.deps.workerId)).not.toBeNull();

    // Stopping the process stops its timers: destroyed, and out of node-cron's registry.
    await w.drain();
    expect(tasks.map((t) => t.getStatus())).toEqual(['destroyed']);
    expect(tasks.filter((t) => getTasks().has(t.id))).toEqual([]);
  });

  it('runs on node-cron timers that keep no process alive; stop() destroys them, once however often it is called', async () => {
    let checks = 0;
    const redis = {
      zremrangebyscore: () => {
        checks++;
        return Promise.resolve(0);
      },
      zcount: () => Promise.resolve(1),
    };
    const { log } = memoryLogger();
    const refBefore = refTimers();
    const { started: housekeeping, tasks } = await tasksStartedBy(() =>
      startHousekeeping({ redis, workersKey: 'workers', log }, { workers_cron: '* * * * * *', worker_forget_seconds: 60 }),
    );
    // Counted in the same turn of the event loop as the start: its timer is armed and unref'd.
    expect(refTimers()).toBe(refBefore);
    expect(tasks).toHaveLength(1);
    expect(tasks[0]!.getNextRun()).not.toBeNull();
    await waitFor(() => checks > 0, 10_000, 'a housekeeping run');

    const stopping = housekeeping.stop();
    expect(housekeeping.stop()).toBe(stopping);
    await stopping;
    expect(tasks[0]!.getStatus()).toBe('destroyed');
    expect(getTasks().has(tasks[0]!.id)).toBe(false);

    // It runs no more: a second timer on the same expression runs at two more seconds meanwhile.
    let controlChecks = 0;
    const control = startHousekeeping(
      {
        redis: {
          ...redis,
          zremrangebyscore: () => {
            controlChecks++;
            return Promise.resolve(0);
          },
        },
        workersKey: 'workers',
        log,
      },
      { workers_cron: '* * * * * *', worker_forget_seconds: 60 },
    );
    cleanups.push(() => control.stop());
    await waitFor(() => controlChecks >= 1, 10_000, 'the control timer run');
    const stoppedChecks = checks; // a run in flight at the stop has finished by now
    await waitFor(() => controlChecks >= 3, 10_000, 'two more runs of the control timer');
    expect(checks).toBe(stoppedChecks);
  });

  it('a bad expression stops the process with a message naming the key', () => {
    const load = () =>
      loadConfig({ env: { HERMES_HOME: '/nonexistent-hermes-home', HERMES_HOUSEKEEPING_WORKERS_CRON: 'every five minutes' } });
    expect(load).toThrow(ConfigError);
    expect(load).toThrow(/housekeeping\.workers_cron|HERMES_HOUSEKEEPING_WORKERS_CRON/);
  });
});
