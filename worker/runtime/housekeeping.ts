/**
 * In-process housekeeping on `node-cron`: timers that each process runs for itself and that need
 * no durability (docs/DESIGN.md §2). Missing a run changes nothing (the next one does the same
 * work), so they are not BullMQ job schedulers — those are for the durable schedules users set,
 * whose every occurrence must run once across the fleet, at fire times croner decides. Running in
 * every process is harmless: each job is idempotent.
 *
 * Jobs (expressions under `housekeeping:` in config.yaml):
 * - `workers_cron`: the worker liveness set. Entries older than
 *   `worker_forget_seconds` belong to workers that died without saying so
 *   (SIGKILL, lost host); they are removed so the set does not grow forever.
 *   When no worker is alive, a WARNING says that schedules are waiting.
 */
import { schedule, type Logger as CronLogger, type ScheduledTask } from 'node-cron';
import type { Logger } from 'pino';
import { countAliveWorkers } from '../../scheduler/worker-liveness.ts';

/** What the housekeeping jobs need. */
export interface HousekeepingDeps {
  redis: {
    zremrangebyscore(key: string, min: number | string, max: number | string): Promise<number>;
    zcount(key: string, min: number | string, max: number | string): Promise<number>;
  };
  /** Key of the worker liveness sorted set (scored by the last heartbeat, epoch ms). */
  workersKey: string;
  log: Logger;
  now?: () => number;
}

/** Settings: `housekeeping.*`. */
export interface HousekeepingSettings {
  workers_cron: string;
  worker_forget_seconds: number;
}

/** What one pass over the worker set did. */
export interface WorkerSetCheck {
  removed: number;
  alive: number;
}

/**
 * One pass of the `workers_cron` job: forget long-dead workers, count the live ones.
 * @throws whatever Redis throws (the scheduled run logs it and tries again next time)
 */
export async function checkWorkerSet(deps: HousekeepingDeps, forgetSeconds: number): Promise<WorkerSetCheck> {
  const now = (deps.now ?? Date.now)();
  const removed = await deps.redis.zremrangebyscore(deps.workersKey, '-inf', `(${now - forgetSeconds * 1000}`);
  const alive = await countAliveWorkers(deps.redis, deps.workersKey, now);
  if (removed > 0) deps.log.info({ removed }, 'forgot workers whose liveness heartbeat stopped long ago');
  if (alive === 0) deps.log.warn('no worker is alive: schedules wait until one starts (hermes worker)');
  return { removed, alive };
}

/** Running housekeeping timers. */
export interface Housekeeping {
  /** Stop every timer; a run in progress finishes on its own. Idempotent. */
  stop(): Promise<void>;
}

/** Start the housekeeping timers of this process. */
export function startHousekeeping(deps: HousekeepingDeps, settings: HousekeepingSettings): Housekeeping {
  // `noOverlap`: a run never overlaps the previous one; `unref`: the timer never keeps a process alive.
  const options = { noOverlap: true, unref: true, logger: cronLogger(deps.log) };
  const tasks: ScheduledTask[] = [
    schedule(
      settings.workers_cron,
      async () => {
        try {
          await checkWorkerSet(deps, settings.worker_forget_seconds);
        } catch (err) {
          deps.log.warn({ err: (err as Error).message }, 'housekeeping: worker set check failed; trying again at the next run');
        }
      },
      options,
    ),
  ];
  let stopping: Promise<void> | undefined;
  return {
    stop() {
      // `destroy`: stopped, and out of node-cron's registry of the process's tasks (a process may run several workers).
      stopping ??= (async () => {
        for (const task of tasks) await task.destroy();
      })();
      return stopping;
    },
  };
}

/** node-cron's logger, onto the process's: its messages are about the timers (a missed or overlapping run). */
function cronLogger(log: Logger): CronLogger {
  const timers = log.child({ timers: 'housekeeping' });
  return {
    info: (message) => timers.debug(message),
    debug: (message) => timers.debug(String(message)),
    warn: (message) => timers.warn(message),
    error: (message, err) => {
      const cause = err ?? (message instanceof Error ? message : undefined);
      timers.warn({ err: cause?.message }, message instanceof Error ? 'housekeeping timer failed' : message);
    },
  };
}
