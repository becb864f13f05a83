/**
 * What the console's pages read, and what they use to change things: the same stores and
 * services as `/api` (loops through `LoopService`, goals through `GoalService`, cron jobs through
 * `CronApi`), so the console has no rule of its own.
 */
import type { Logger } from 'pino';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import type { GoalService } from '../../scheduler/goal/goal-service.ts';
import type { LoopService } from '../../scheduler/loop/loop-service.ts';
import type { LoopStore } from '../../scheduler/loop/loop-store.ts';
import type { SessionEvent, SessionStore } from '../../scheduler/session/session-store.ts';
import type { Keys } from '../../scheduler/store/keys.ts';
import type { HermesQueues } from '../../scheduler/store/queues.ts';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { aliveWorkerIds } from '../../scheduler/worker-liveness.ts';
import { readPlatformStates } from '../../scheduler/delivery/platform-state-store.ts';
import type { GatewayPlatforms } from '../../scheduler/delivery/platform-state.ts';
import type { CronApi } from '../http/cron-routes.ts';
import type { PageRequest } from '../../scheduler/store/list-page.ts';
import type { CronListFilter } from '../../scheduler/cron/cron-queries.ts';
import type { SseStream } from '../http/sse.ts';
import { sessionSummaryPage, type SessionSummary } from '../session-summaries.ts';
import type { StreamFanout } from '../stream-fanout.ts';
import type { HourCount, LatenessPoint } from './charts.ts';
import { ms, type CronJobView, type CronRunView } from './cron-view.ts';

/** What the console uses. */
export interface ConsoleDeps {
  config: HermesConfig;
  keys: Keys;
  redis: RedisClient;
  queues: HermesQueues;
  fanout: StreamFanout;
  loops: LoopStore;
  schedules: LoopService;
  goals: GoalService;
  sessions: SessionStore;
  /** Cron jobs; without it the console shows none and cannot make one. */
  cron?: CronApi;
  /** Open event streams (closed with the server). */
  streams: Set<SseStream>;
  /** `api_server.sse_max_buffered_bytes` */
  sseMaxBufferedBytes?: number;
  log: Logger;
}

/** A cron job with its newest run. */
export interface JobWithLastRun {
  job: CronJobView;
  lastRun: CronRunView | null;
}

/**
 * Which part of the lists the overview shows: `q` is a prefix of session ids and of cron job names
 * (the search box), each list a page from its cursor (`api_server.page_size` rows).
 */
export interface OverviewView {
  q?: string;
  sessions?: string;
  jobs?: string;
}

/** Everything the overview shows. */
export interface OverviewData {
  now: number;
  view: OverviewView;
  /** The cursor of the next page of sessions, of cron jobs (`null`: none). */
  sessionsNext: string | null;
  jobsNext: string | null;
  workers: string[];
  /** Each running gateway's platforms, as it published them. */
  gateways: GatewayPlatforms[];
  sessions: SessionSummary[];
  jobs: JobWithLastRun[];
  lateness: LatenessPoint[];
  hours: HourCount[];
}

/** The window the charts cover, ms. */
export const CHART_WINDOW_MS = 24 * 3_600_000;
/** Events read back per session for the charts. */
const CHART_EVENTS_PER_SESSION = 500;
/** Runs read back per cron job for the charts. */
const CHART_RUNS_PER_JOB = 50;

/** A page of cron jobs in list order, the first `api_server.page_size` unless asked (none without a cron service). */
export async function cronJobs(
  deps: ConsoleDeps,
  request: PageRequest = { limit: deps.config.api_server.page_size },
  filter: CronListFilter = {},
): Promise<{ jobs: CronJobView[]; nextCursor: string | null }> {
  if (!deps.cron) return { jobs: [], nextCursor: null };
  const page = await deps.cron.list(request, filter);
  return { jobs: page.data as CronJobView[], nextCursor: page.next_cursor };
}

/**
 * Read the overview: workers, each gateway's platforms, a page of sessions and one of cron jobs with their last
 * run (as `view` asks), and the charts' data of what the pages show.
 * @throws ScheduleInputError for a cursor the lists did not give
 */
export async function readOverview(deps: ConsoleDeps, view: OverviewView = {}): Promise<OverviewData> {
  const now = Date.now();
  const limit = deps.config.api_server.page_size;
  const [workers, gateways, sessionPage, jobPage] = await Promise.all([
    aliveWorkerIds(deps.redis, deps.keys.workers, now),
    readPlatformStates(deps.redis, deps.keys, now),
    sessionSummaryPage(
      { redis: deps.redis, keys: deps.keys, loops: deps.loops, goals: deps.goals, sessions: deps.sessions },
      { limit, ...(view.sessions ? { cursor: view.sessions } : {}) },
      view.q,
    ),
    cronJobs(deps, { limit, ...(view.jobs ? { cursor: view.jobs } : {}) }, view.q ? { name: view.q } : {}),
  ]);
  const sessions = sessionPage.items;
  const jobs = jobPage.jobs;
  const runs = await Promise.all(
    jobs.map(async (job) => (deps.cron ? ((await deps.cron.runs(job.id, CHART_RUNS_PER_JOB)) as CronRunView[]) : [])),
  );
  const { lateness, hours } = await chartData(
    deps,
    sessions.map((s) => s.id),
    runs.flat(),
    now,
  );
  return {
    now,
    view,
    sessionsNext: sessionPage.nextCursor,
    jobsNext: jobPage.nextCursor,
    workers,
    gateways,
    sessions,
    jobs: jobs.map((job, i) => ({ job, lastRun: runs[i]![0] ?? null })),
    lateness,
    hours,
  };
}

/** The charts' data from what the product keeps (`chartsFrom`). */
async function chartData(
  deps: ConsoleDeps,
  sessionIds: string[],
  runs: CronRunView[],
  now: number,
): Promise<{ lateness: LatenessPoint[]; hours: HourCount[] }> {
  const events = await Promise.all(sessionIds.map((id) => deps.sessions.recentEvents(id, CHART_EVENTS_PER_SESSION)));
  return chartsFrom(events.flat(), runs, now);
}

/**
 * The charts over the last {@link CHART_WINDOW_MS}: turns and failures per hour (`reply`,
 * `tick.unchanged`, `tick.failed`, `error` end a turn) and lateness — a loop or heartbeat tick's from
 * the event that committed it (its `latenessMs`, taken when its turn started: `tick.started` is written
 * at the claim, which for a held tick comes before the due time, `worker/loop/claim-ahead.ts`), a cron run's
 * from its run record.
 */
export function chartsFrom(events: SessionEvent[], runs: CronRunView[], now: number): { lateness: LatenessPoint[]; hours: HourCount[] } {
  const since = now - CHART_WINDOW_MS;
  const lateness: LatenessPoint[] = [];
  const firstHour = Math.floor(since / 3_600_000) * 3_600_000;
  const hours: HourCount[] = Array.from({ length: 25 }, (_, i) => ({ hourStart: firstHour + i * 3_600_000, turns: 0, failures: 0 }));
  const count = (at: number, failed: boolean) => {
    const h = hours[Math.floor((at - firstHour) / 3_600_000)];
    if (!h || at < since) return;
    h.turns++;
    if (failed) h.failures++;
  };
  for (const e of events) {
    const at = Number(e.id.split('-')[0]);
    if (at < since) continue;
    const ended = e.type === 'reply' || e.type === 'tick.unchanged' || e.type === 'tick.failed' || e.type === 'error';
    if (!ended) continue;
    count(at, e.type === 'tick.failed' || e.type === 'error');
    const d = e.data;
    if ((d.source === 'tick' || d.source === 'heartbeat') && typeof d.latenessMs === 'number' && typeof d.startedAt === 'number')
      lateness.push({ at: d.startedAt, latenessMs: Math.max(0, d.latenessMs), kind: typeof d.kind === 'string' ? d.kind : 'loop' });
  }
  for (const r of runs) {
    const started = ms(r.started_at);
    if (started === null || started < since) continue;
    lateness.push({ at: started, latenessMs: Math.max(0, r.lateness_ms), kind: 'cron' });
    if (r.status === 'ok' || r.status === 'error') count(ms(r.finished_at) ?? started, r.status === 'error');
  }
  return { lateness, hours };
}
