/**
 * `hermes status`: everything that runs on its own, in one place — live workers, each running
 * gateway's platforms (on, or failed and why), the loops and
 * heartbeats of every session, the sessions' goals (a paused one with why), and the cron jobs
 * with their failure streaks, and the sessions' input that was set aside after failing on every
 * try, and the signed webhooks the configuration declares with each one's last delivery and what it
 * started (a turn: whether its session answered yet). Finished schedules, achieved or cleared goals and completed cron jobs only with `--all`. Loaded only when `status` runs (`main.ts`).
 */
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { cronJobView } from '../../scheduler/cron/cron-job.ts';
import { createLogger } from '../../scheduler/logger.ts';
import { hookStatuses } from '../../scheduler/hooks/hook-status.ts';
import { cronServiceFor, goalServiceFor, loopStoreFor, sessionStoreFor } from '../../scheduler/services.ts';
import { newestSetAsideInputs, setAsideView } from '../../scheduler/session/set-aside.ts';
import { pageLimit } from '../../scheduler/store/list-page.ts';
import { aliveWorkerIds } from '../../scheduler/worker-liveness.ts';
import type { CliConnection } from '../cli-context.ts';
import { cliLogLevel } from '../run-command.ts';
import { formatGoals, formatHooks, formatPlatforms, formatSchedules, formatSetAside } from '../status-format.ts';
import { readPlatformStates } from '../../scheduler/delivery/platform-state-store.ts';
import { platformStateViews } from '../../scheduler/delivery/platform-state.ts';
import { printOut, terminalJson } from '../terminal-text.ts';
import { formatJobList } from './cron-format.ts';
import { moreHint, readListPages } from '../list-pages.ts';
import { keepSchedule } from '../../scheduler/loop/schedule-list-filter.ts';
import { goalObject, scheduleObject } from '../../scheduler/loop/schedule-view.ts';

/**
 * Print the status (`--json`: one object with `workers`, `platforms`, `schedules`, `goals`, `cron_jobs`, `set_aside`, `hooks`, and
 * `schedules_next_cursor`, `goals_next_cursor` and `cron_jobs_next_cursor`, the `cursor` of `/api/schedules` and `/api/cron/jobs` for the rest).
 * Loops and heartbeats, goals, and cron jobs, are the first page of their lists (`api_server.page_size`, or `--limit`), each
 * followed by how to see more; with `--all`, every page.
 */
export async function runStatus(
  cfg: HermesConfig,
  conn: CliConnection,
  opts: { all?: boolean; json?: boolean; limit?: string },
  out: (line: string) => void = printOut,
): Promise<void> {
  const now = Date.now();
  const all = opts.all === true;
  const log = createLogger({ level: cliLogLevel(cfg), name: 'cli' });
  const workers = await aliveWorkerIds(conn.redis, conn.keys.workers, now);
  const gateways = await readPlatformStates(conn.redis, conn.keys, now);
  const store = loopStoreFor(cfg, conn);
  const flags = { all, ...(opts.limit !== undefined ? { limit: opts.limit } : {}) };
  const schedulePage = await readListPages(cfg, flags, (request) => store.page(request, { keep: keepSchedule({ hideFinished: !all }) }));
  const records = schedulePage.items;
  const next = new Map<string, number | undefined>();
  for (const r of records) next.set(`${r.sessionId}:${r.kind}`, r.status === 'active' ? await store.nextDueAt(r) : undefined);
  const goalService = goalServiceFor(cfg, conn, log);
  const goalPage = await readListPages(cfg, flags, (request) =>
    goalService.page(request, (g) => all || g.status === 'active' || g.status === 'paused'),
  );
  const goals = goalPage.items;
  const cron = cronServiceFor(cfg, conn, log);
  const jobPage = await readListPages(cfg, flags, (request) => cron.page(request, { all }));
  const jobs = jobPage.items;
  const setAsidePage = await newestSetAsideInputs(conn.redis, conn.keys, {
    ...(all
      ? {}
      : {
          limit:
            flags.limit !== undefined
              ? pageLimit(flags.limit, cfg.api_server.page_size, cfg.api_server.max_page_size)
              : cfg.api_server.page_size,
        }),
    retentionMs: cfg.worker.set_aside_retention_seconds * 1000,
    now,
  });
  const setAside = setAsidePage.inputs;
  const hooks = await hookStatuses({ ...conn, sessions: sessionStoreFor(cfg, conn.redis, conn.keys) }, cfg.hooks);
  if (opts.json) {
    const schedules = records.map((r) => scheduleObject(r, now, next.get(`${r.sessionId}:${r.kind}`)));
    out(
      terminalJson({
        workers,
        platforms: platformStateViews(gateways),
        schedules,
        goals: goals.map(goalObject),
        cron_jobs: jobs.map(cronJobView),
        set_aside: setAside.map(setAsideView),
        hooks,
        schedules_next_cursor: schedulePage.nextCursor,
        goals_next_cursor: goalPage.nextCursor,
        cron_jobs_next_cursor: jobPage.nextCursor,
      }),
    );
    return;
  }
  const lines = [
    `workers alive: ${workers.length}${workers.length ? ` (${workers.join(', ')})` : ''}`,
    ...formatPlatforms(gateways, now),
    ...formatSchedules(records, next, now, { all }),
    ...(schedulePage.nextCursor === null ? [] : [`${records.length} loops and heartbeats shown; all of them: hermes status --all`]),
    '',
    ...formatGoals(goals, { all }),
    ...(goalPage.nextCursor === null ? [] : [`${goals.length} goals shown; all of them: hermes status --all`]),
    '',
    ...(jobs.length === 0 ? ['cron jobs: none'] : ['cron jobs', ...formatJobList(jobs, now)]),
    ...moreHint('hermes cron list', jobPage, 'cron jobs'),
    ...(setAside.length === 0 ? [] : ['', ...formatSetAside(setAside, now)]),
    ...(setAsidePage.more ? [`the newest ${setAside.length} inputs set aside shown; all of them: hermes status --all`] : []),
    ...(hooks.length === 0 ? [] : ['', ...formatHooks(hooks, now)]),
  ];
  for (const line of lines) out(line);
}
