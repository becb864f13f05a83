/**
 * One worker process of the fleet: BullMQ workers on the `ticks` (loop,
 * heartbeat and cron ticks), `inbox` (user input) and `v1-runs` queues, a
 * liveness heartbeat, start-up reconciliation, and drain.
 *
 * Fetching (docs/OPERATIONS.md, "Held ticks and running turns"): each queue's
 * BullMQ worker is driven by this process's own fetch loop (BullMQ's manual
 * fetching: `getNextJob`, then BullMQ's `processJob`, which tracks the job's
 * lock so BullMQ's lock manager renews it in batches while it waits for a slot and runs).
 * A fetched job gets a ticket (`JobAdmission`, `runtime/turn-tracker.ts`): a tick that
 * came early is held until its due time (`worker.max_held_ticks`, one timer per
 * due instant; its lock lasts past the due time without renewals, `holdLock`),
 * then it waits for a turn slot of its pool — `agent`
 * (`worker.max_agent_turns`) or `command` (`worker.max_command_turns`) — and
 * runs. A tick held or queued for longer than the lock its fetch set surely
 * lasts has its lock checked (one `extendLocks` call for every job that wakes
 * together) before it runs: a lock that lapsed while the process was starved
 * means another worker may have the job, so it is left to that worker and
 * never fired twice. A loop
 * fetches only what `JobAdmission.mayFetch` allows: no more overdue work than
 * it can start now, so a fleet shares a backlog; while jobs keep coming it
 * fetches over up to `FETCH_LANES` requests at once, so a burst is in hand
 * before it is due.
 *
 * Drain policy (docs/DESIGN.md §9), on `drain()` (SIGTERM/SIGINT):
 *   1. stop taking new work (every BullMQ worker is paused without waiting);
 *      held ticks and jobs waiting for a turn slot never started: each is
 *      handed back at once (due now, for another worker);
 *   2. scheduled turns (ticks, `/v1` runs) may finish within
 *      `agent.cron_drain_timeout` seconds, chat turns within
 *      `agent.restart_drain_timeout` (default 0: interrupted at once); the log
 *      says how many of each it waits for and for how long;
 *   3. at each deadline the remaining turns of that class are aborted through
 *      their AbortSignal; their jobs are handed back (not committed, so they
 *      run once elsewhere);
 *   4. the BullMQ workers are closed. `Worker.close()` has no timeout and
 *      memoises its first call, so it is only called once nothing is running.
 */
import { LockFence } from './runtime/lock-fence.ts';
import { DelayedError, Worker, type AdvancedOptions, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { HermesConfig } from '../scheduler/config/config.ts';
import { resolveApiAuth } from '../scheduler/config/api-key.ts';
import { checkRedis } from '../scheduler/store/redis/connect.ts';
import {
  chooseTopology,
  holdWritesThisTurn,
  openRedisClient,
  type RedisClient,
  type RedisTopology,
} from '../scheduler/store/redis/connection-factory.ts';
import { logBullmqErrors } from '../scheduler/store/redis/bullmq-errors.ts';
import { assertShardCount } from '../scheduler/store/redis/shard-count.ts';
import { deferJob } from '../scheduler/store/defer-job.ts';
import { JOB_RETENTION } from '../scheduler/store/queues.ts';
import { listenForTurnAborts } from './runtime/turn-abort-listener.ts';
import { sleep } from '../scheduler/time/sleep.ts';
import { fleetReadings, HermesMetrics } from '../scheduler/metrics.ts';
import { modelStateFor } from '../scheduler/services.ts';
import { v1RunsQueue } from '../scheduler/v1/v1-runs.ts';
import { WORKER_HEARTBEAT_MS } from '../scheduler/worker-liveness.ts';
import { ATTR, SPAN, carrierOf, tracing } from '../scheduler/telemetry/tracing.ts';
import { startTracing } from '../scheduler/telemetry/start-tracing.ts';
import type { RunnerFactory } from './turn-runners/create-runner.ts';
import type { McpServers } from './tools/mcp-servers.ts';
import { TURN_POOLS, type DrainClass, type JobTicket, type TurnPool } from './runtime/turn-tracker.ts';
import { DUE_NOW, type JobProcessor, type TicketTerms } from './runtime/job-processor.ts';
import { startMetricsServer, type MetricsServer } from './runtime/metrics-server.ts';
import { startHousekeeping, type Housekeeping } from './runtime/housekeeping.ts';
import { scheduleTickJobs } from './loop/tick-jobs.ts';
import { cronTickJobs } from './cron/cron-tick-jobs.ts';
import { inboxJobs } from './chat/inbox-jobs.ts';
import { v1RunJobs } from './v1/v1-run-jobs.ts';
import { createWorkerDeps, depsForShard } from './create-worker-deps.ts';
import type { WorkerDeps } from './worker-deps.ts';

/** Options of `WorkerProcess.start`. */
export interface WorkerProcessOptions {
  config: HermesConfig;
  /** Where Redis is (single, cluster, sentinel); default: `redisUrl`, else the configuration's. */
  topology?: RedisTopology;
  /** A single Redis at this URL (shorthand for a `single` topology). */
  redisUrl?: string;
  log: Logger;
  /** Turn runners; default from config (agent endpoint, command runners). Embedders and benchmarks may pass their own. */
  runners?: RunnerFactory;
}

/**
 * Every kind of job a worker process runs (`runtime/job-processor.ts`), the one place they are
 * registered; the process starts one BullMQ worker per queue and shard, in this order.
 */
const JOB_PROCESSORS: readonly JobProcessor[] = [scheduleTickJobs, cronTickJobs, inboxJobs, v1RunJobs];

export class WorkerProcess {
  readonly deps: WorkerDeps;
  /** This process's metrics (served at `worker.metrics_port` when set). */
  readonly metrics: HermesMetrics;
  /** The metrics server, when `worker.metrics_port` is set. */
  metricsServer: MetricsServer | undefined;
  private readonly workers: Worker[] = [];
  /** Housekeeping timers of this process (node-cron). */
  private housekeeping: Housekeeping | undefined;
  /** Queues opened only for metrics, closed with the process. */
  private readonly closeQueues: Array<() => Promise<void>> = [];
  /** Sends the traces still buffered and stops tracing (`scheduler/telemetry/start-tracing.ts`). */
  private stopTracing: () => Promise<void> = async () => {};
  private heartbeat: NodeJS.Timeout | undefined;
  private closing: Promise<void> | undefined;
  /** Aborted when the drain begins: the fetch loops stop asking for jobs. */
  private readonly stopFetching = new AbortController();
  /** The ticket of each fetched job, for its processor (BullMQ hands the processor the same job object). */
  private readonly tickets = new WeakMap<Job, { ticket: JobTicket; previous: Promise<void> | undefined; kind: JobProcessor | undefined }>();
  /** Each job id's newest `processJob` call in this process (see `admit`: BullMQ tracks a job's lock by its id). */
  private readonly processing = new Map<string, Promise<unknown>>();
  /** Tokens of fetches, per process (BullMQ's form: `<worker id>:<n>`). */
  private fetches = 0;
  /** Fetches of the fetch loops not yet answered (the drain waits for them before closing). */
  private readonly fetchesInFlight = new Set<Promise<void>>();
  /** The configured MCP servers (their tools join `deps.tools`). */
  mcp: McpServers | undefined;
  /** Self-fencing: a turn whose job lock could not be renewed in time is stopped before the lock lapses (`runtime/lock-fence.ts`). */
  private readonly fence: LockFence;

  private constructor(
    deps: WorkerDeps,
    private readonly connections: RedisClient[],
    private readonly topology: RedisTopology,
  ) {
    this.deps = deps;
    this.metrics = deps.metrics!;
    this.fence = new LockFence(deps.config.worker.fence_margin_ms, (jobId, heldUntil) => {
      if (deps.turns.fence(jobId))
        deps.log.warn(
          { jobId, lockHeldUntil: new Date(heldUntil).toISOString(), marginMs: deps.config.worker.fence_margin_ms },
          'job lock not renewed in time; its turn is fenced off (commands killed) before the lock can lapse',
        );
    });
  }

  /**
   * Connect, check Redis, re-arm missing schedulers and start working.
   * @throws StoreUnavailableError when Redis is too old or unreachable
   */
  static async start(options: WorkerProcessOptions): Promise<WorkerProcess> {
    const { config, log } = options;
    const topology = chooseTopology(config, options);
    const redis = openRedisClient(topology, 'commands');
    const queueConn = openRedisClient(topology, 'bullmq');
    redis.on('error', (err: Error) => log.warn({ err: err.message }, 'redis connection error'));
    queueConn.on('error', () => {});
    await checkRedis(redis, log);
    const deps = createWorkerDeps({ config, redis, queueConnection: queueConn, log, runners: options.runners });
    await assertShardCount(redis, deps.keys);
    const closeMetricsQueues = openMetrics(deps, queueConn);
    const wp = new WorkerProcess(deps, [redis, queueConn], topology);
    wp.closeQueues.push(closeMetricsQueues);
    wp.stopTracing = await startTracing(config.telemetry);
    const shards = consumedShards(deps);
    await wp.rearm(shards);
    await wp.listenForStop();
    await wp.startMcp();
    wp.startProcessors(shards);
    await wp.startHeartbeat();
    wp.housekeeping = startHousekeeping({ redis, workersKey: deps.keys.workers, log: deps.log }, config.housekeeping);
    await wp.serveMetrics();
    const w = config.worker;
    deps.log.info(
      {
        maxHeldTicks: w.max_held_ticks,
        maxAgentTurns: w.max_agent_turns,
        maxCommandTurns: w.max_command_turns,
        prefetchLeadMs: w.prefetch_lead_ms,
        pid: process.pid,
        shards,
      },
      'worker started',
    );
    return wp;
  }

  /** Re-arm the active schedules of `shards` whose job scheduler (or a cron job's BullMQ job) is missing. */
  private async rearm(shards: number[]): Promise<void> {
    const { loops, cron, log } = this.deps;
    const rearmed = await loops.reconcile(Date.now(), shards);
    if (rearmed > 0) log.warn({ rearmed }, 're-armed active schedules whose job scheduler was missing');
    const cronRearmed = await cron.reconcile(Date.now(), shards);
    if (cronRearmed > 0) log.warn({ rearmed: cronRearmed }, 're-armed cron jobs whose BullMQ job was missing');
  }

  /** `/stop` in a session (or `--overlap cancel_other`) aborts its running turn wherever it runs: every worker listens. */
  private async listenForStop(): Promise<void> {
    this.connections.push(await listenForTurnAborts(this.topology, this.deps));
  }

  /**
   * The configured MCP servers, their tools joining the toolbox: listed once per start (and on reconnect);
   * a server that fails is logged and skipped.
   */
  private async startMcp(): Promise<void> {
    const { config, log, tools } = this.deps;
    if (Object.keys(config.mcp_servers).length === 0) return;
    // Loaded only when configured: the MCP client is heavy to import, and most processes need none.
    const { McpServers } = await import('./tools/mcp-servers.ts');
    this.mcp = new McpServers(config.mcp_servers, log, (set) => tools.processEnv(set));
    await this.mcp.start();
    tools.addSource(this.mcp);
  }

  /**
   * One BullMQ worker per queue and shard for the kinds registered on it (`JOB_PROCESSORS`). Each shard's
   * jobs are processed with that shard's keys and queues (a session's scripts stay in its slot).
   */
  private startProcessors(shards: number[]): void {
    const byQueue = new Map<string, JobProcessor[]>();
    for (const kind of JOB_PROCESSORS) byQueue.set(kind.queue, [...(byQueue.get(kind.queue) ?? []), kind]);
    for (const shard of shards) {
      const shardDeps = depsForShard(this.deps, shard);
      for (const [queue, kinds] of byQueue) {
        if (shard !== 0 && kinds.some((k) => k.firstShardOnly)) continue;
        this.addWorker(queue, shardDeps, kinds);
      }
    }
  }

  /** Record liveness now and every `WORKER_HEARTBEAT_MS` (`hermes status`, `cron status`). */
  private async startHeartbeat(): Promise<void> {
    await this.beat();
    this.heartbeat = setInterval(() => void this.beat().catch(() => {}), WORKER_HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  /** Serve the metrics at `worker.metrics_port`, when set; a port that cannot be bound stops the process. */
  private async serveMetrics(): Promise<void> {
    const { config, log } = this.deps;
    if (config.worker.metrics_port === undefined) return;
    try {
      // The gateway's key: API_SERVER_KEY, else the home's key file (made here when the gateway has not yet).
      const auth = config.metrics.public ? undefined : resolveApiAuth(config);
      this.metricsServer = await startMetricsServer({
        host: config.api_server.host,
        port: config.worker.metrics_port,
        key: auth?.mode === 'key' ? auth.key : undefined,
        public: config.metrics.public,
        metrics: this.metrics,
        log,
      });
    } catch (err) {
      await this.drain();
      throw err;
    }
  }

  /**
   * A BullMQ worker on queue `name` of `shardDeps`' shard for the `kinds` of job registered on it,
   * driven by this process's fetch loop (`fetchLoop`): each job it fetches is admitted (its kind's
   * `admit`: its pool and due time), held or made to wait for a slot as its ticket says, then given
   * to its kind's processor through BullMQ's `processJob` (lock renewal, completion, failure, `DelayedError`).
   */
  private addWorker(name: string, shardDeps: WorkerDeps, kinds: readonly JobProcessor[]): void {
    const { config, log } = this.deps;
    const queue: FetchedQueue = {
      name,
      deps: shardDeps,
      kinds,
      pools: TURN_POOLS.filter((p) => kinds.some((k) => (k.pools ?? ['agent']).includes(p))),
      holdable: kinds.some((k) => k.holdable === true),
    };
    const settings = kinds.reduce<AdvancedOptions | undefined>((all, k) => (k.settings ? { ...all, ...k.settings } : all), undefined);
    const connection = openRedisClient(this.topology, 'bullmq');
    // Two parameters: BullMQ then makes no AbortController per job (its signal would only serve `cancelJob`, which
    // nothing here calls; a turn's own controller is the turn tracker's).
    const worker: FetchingWorker = new FetchingWorker(
      name,
      // The jobs that end together (the occurrences of one instant) complete together: BullMQ's completion scripts,
      // each with the next fetch, leave in one write (`holdWritesThisTurn`) instead of one each.
      (job: Job, token: string | undefined): Promise<unknown> =>
        this.runAdmitted(queue, worker, job, token).finally(() => holdWritesThisTurn(connection)),
      {
        connection,
        prefix: shardDeps.keys.bullPrefix,
        autorun: false,
        lockDuration: config.worker.lock_duration_ms,
        lockRenewTime: config.worker.lock_renew_ms,
        stalledInterval: config.worker.stalled_interval_ms,
        maxStalledCount: config.worker.max_stalled_count,
        ...JOB_RETENTION,
        ...(settings ? { settings } : {}),
      },
    );
    logBullmqErrors(worker, name, log);
    worker.onRenewed = (jobId, heldUntil) => this.fence.heldUntil(jobId, heldUntil);
    // A lock that could not be renewed has lapsed: the stall check may already have handed the job
    // to another worker. Abort this copy's turn (or end its hold or its wait for a slot) so the
    // occurrence runs to its commit on one worker only.
    worker.on('lockRenewalFailed', (jobIds: string[]) => {
      for (const jobId of jobIds) {
        if (this.deps.turns.abortLockLost(jobId))
          log.warn({ queue: name, jobId }, 'job lock lost; its turn is aborted here and left to the worker that took the job over');
      }
    });
    worker.on('failed', (job, err) => log.warn({ queue: name, jobId: job?.id, err: err.message }, 'job failed'));
    this.workers.push(worker);
    this.connections.push(connection);
    worker.startLockRenewal();
    void worker.startStalledCheckTimer();
    void this.fetchLoop(worker, queue);
  }

  /**
   * Fetch jobs for `worker` while the fetch policy allows (`JobAdmission.mayFetch`): one request at
   * a time while the queue is empty (a blocking wait, as BullMQ's own loop), up to `FETCH_LANES` at
   * once while each brings a job (a burst being released), never more than the free slots allow.
   */
  private async fetchLoop(worker: FetchingWorker, queue: FetchedQueue): Promise<void> {
    const { pools, holdable } = queue;
    const admission = this.deps.turns.admission;
    const stop = this.stopFetching.signal;
    let lanes = 0;
    let more = false;
    while (!stop.aborted) {
      if (lanes >= (more ? FETCH_LANES : 1) || !admission.mayFetch(pools, holdable)) {
        await admission.whenChanged();
        continue;
      }
      lanes++;
      admission.fetchStarted(holdable);
      const token = `${worker.id}:${this.fetches++}`;
      const fetched: Promise<void> = worker
        .getNextJob(token, { block: true })
        .then(
          (job) => {
            more = Boolean(job);
            if (job) this.admit(worker, job, token, queue);
          },
          async (err: unknown) => {
            more = false;
            worker.emit('error', err as Error);
            await sleep(FETCH_RETRY_MS, stop, { unref: true });
          },
        )
        .finally(() => {
          lanes--;
          this.fetchesInFlight.delete(fetched);
          admission.fetchEnded(holdable);
        });
      this.fetchesInFlight.add(fetched);
    }
  }

  /**
   * Give a fetched job its ticket and hand it to BullMQ's `processJob` (which runs `runAdmitted`).
   * When the job ends and the fetch policy allows, BullMQ fetches the next job in the same call that
   * completes this one (its `fetchNext`), as its own loop does: one round trip less per job.
   */
  private admit(worker: FetchingWorker, job: Job, token: string, queue: FetchedQueue): void {
    const { turns } = this.deps;
    const { admission } = turns;
    const { pools, holdable } = queue;
    const kind = kindOf(queue, job);
    let terms: TicketTerms;
    try {
      terms = kind?.admit?.(job, queue.deps, () => this.lockSurelyHeld(job) || this.lockHeld(worker, job.id!, token)) ?? DUE_NOW;
    } catch {
      terms = DUE_NOW; // the processor fails it with the reason
    }
    // This process had the job already (its lock lapsed and it came back here): that copy ends first.
    if (turns.admission.ticket(job.id!)) turns.abortLockLost(job.id!);
    this.tickets.set(job, { ...admission.admit(job.id!, terms.pool, terms.dueAt), kind });
    let fetchesNext = false;
    const fetchNext = () => {
      if (fetchesNext) return true;
      if (this.stopFetching.signal.aborted || !admission.mayFetch(pools, holdable)) return false;
      fetchesNext = true;
      admission.fetchStarted(holdable);
      return true;
    };
    const id = job.id!;
    const earlier = this.processing.get(id);
    // The lock the fetch set lasts from the time the fetch was sent (`processedOn`): fenced before it lapses unless renewed.
    this.fence.heldUntil(id, (job.processedOn || Date.now()) + this.deps.config.worker.lock_duration_ms);
    const run = worker.processJob(job, token, fetchNext);
    this.processing.set(id, run);
    // BullMQ renews one lock per job id, and the earlier copy's end stops renewing it (`untrackJob(id)`):
    // this copy's lock would lapse under its turn. Once that copy has ended, this one's is renewed again.
    if (earlier) {
      const renew = () => {
        // A copy still held is renewed again when it wakes (`holdLock`).
        if (this.processing.get(id) === run && !this.heldLocks.get(job)?.paused) worker.renewLockOf(id, token, job.processedOn);
      };
      earlier.then(renew, renew); // the earlier copy's failure is its own chain's to report
    }
    void run
      .then(
        (next) => {
          if (next) this.admit(worker, next, token, queue);
        },
        (err: unknown) => worker.emit('error', err as Error),
      )
      .finally(() => {
        if (this.processing.get(id) === run) {
          this.processing.delete(id);
          this.fence.forget(id);
        }
        if (fetchesNext) admission.fetchEnded(holdable);
      });
  }

  /**
   * The processor BullMQ calls for an admitted job: wait as its ticket says (due time, then a slot),
   * hand it back when the drain began meanwhile, leave it when its lock was lost, else run it.
   * @throws DelayedError when handed back or left (BullMQ then neither completes nor fails it)
   */
  private async runAdmitted(queue: FetchedQueue, worker: FetchingWorker, job: Job, token: string | undefined): Promise<unknown> {
    const admitted = this.tickets.get(job);
    if (!admitted) return await processTraced(processorOf(queue, job), queue, job, token);
    const { ticket, previous, kind } = admitted;
    const { turns, log } = this.deps;
    // `processJob` has just set BullMQ's renewal of the job's lock up: a held tick's is taken off until it wakes.
    if (ticket.phase === 'held') this.holdLock(worker, job, token!, ticket, kind);
    try {
      if (previous) await previous;
      if (ticket.phase === 'starting' && kind?.waitingForSlot) void this.whileWaitingForSlot(kind, queue, job, ticket);
      // A paused worker's blocking fetch in flight can still bring a job (even one just handed back): not held here.
      const waited = turns.draining ? 'drain' : await ticket.ready(() => this.resumeRenewal(worker, job, token!));
      if (waited === 'drain' || turns.draining) {
        // Drain: not started, so handed back at once, due now, for another worker.
        await kind?.release?.(job, queue.deps, true);
        return await deferJob(job, token, 0);
      }
      // Held or queued: its lock may have lapsed meanwhile (a starved process renews late), and then another
      // worker may hold the job. Unless the lock its fetch set is surely still there, it is checked, for every
      // job that wakes together in one call; a job whose lock is not this process's any more is left to whoever has it.
      if (waited === 'lost' || (ticket.waited && !this.lockSurelyHeld(job) && !(await this.lockHeld(worker, job.id!, token!)))) {
        log.warn({ queue: queue.name, jobId: job.id }, 'job lock lost while it waited; left to the worker that took it over');
        await kind?.release?.(job, queue.deps, false);
        throw new DelayedError();
      }
      return await processTraced(kind ?? processorOf(queue, job), queue, job, token);
    } finally {
      // A job whose processor ended before its turn forgets what was done for it ahead (a tick's claim); the turn lock
      // is not released here, after the job may have been moved on: its holder is the job, whose next run takes it over.
      await kind?.release?.(job, queue.deps, false);
      ticket.release();
    }
  }

  /** Call the kind's `waitingForSlot` while the job's ticket waits for a slot (`JobProcessor.waitingForSlot`). */
  private async whileWaitingForSlot(kind: JobProcessor, queue: FetchedQueue, job: Job, ticket: JobTicket): Promise<void> {
    while (ticket.phase === 'starting' && !this.deps.turns.draining) {
      await kind.waitingForSlot!(job, queue.deps).catch((err: unknown) =>
        this.deps.log.warn({ err, queue: queue.name, jobId: job.id }, 'job waiting for a turn slot: its wait step failed'),
      );
      await sleep(this.deps.config.worker.defer_ms, undefined, { unref: true });
    }
  }

  /**
   * Whether the lock the fetch of `job` set (or `holdLock` set while it was held) cannot have lapsed yet:
   * BullMQ sets it for `lock_duration_ms` in the same script that stamps `processedOn` with the time the fetch
   * was sent, so it lasts at least until `processedOn + lock_duration_ms` whatever the renewals did;
   * `lock_renew_ms` is kept as a margin. A tick held for less (the default lead is 1 s, the lock 3 s), or
   * whose lock was set to last past its due time, needs no round trip before its turn when it wakes on time.
   */
  private lockSurelyHeld(job: Job): boolean {
    const { lock_duration_ms: lockMs, lock_renew_ms: renewMs } = this.deps.config.worker;
    const fetched = typeof job.processedOn === 'number' && job.processedOn > 0 ? job.processedOn + lockMs : 0;
    return Date.now() < Math.max(fetched, this.heldLocks.get(job)?.until ?? 0) - renewMs;
  }

  /**
   * Held ticks whose lock BullMQ's lock manager does not renew (`holdLock`): until when each one's lock surely
   * lasts (epoch ms: when the call that set it was sent, plus its duration), and whether its renewal is still off.
   */
  private readonly heldLocks = new WeakMap<Job, { until: number; paused: boolean }>();

  /** Held ticks whose locks `holdLock` sets in the next `extendLocks` call, per worker and due time. */
  private readonly lockSets = new Map<FetchingWorker, Map<number, HeldLockSet[]>>();

  /**
   * A tick held until its due time: BullMQ's lock manager stops renewing its lock (renewed every
   * `lock_renew_ms` through a 10 s cron lead, that was 10–20 `extendLocks` rounds an occurrence). Its lock
   * lasts past the due time instead:
   *  - held for no longer than `lock_renew_ms` (loop ticks at the default 1 s lead), the lock its fetch set
   *    already does, by `lock_duration_ms - lock_renew_ms` as a renewal leaves it: no call;
   *  - for a kind `lockedUntilDue` (cron), it is set once to last until the due time plus `lock_duration_ms`, in
   *    one `extendLocks` call for the ticks of the worker with the same due time admitted within `lock_renew_ms / 2`
   *    (a burst's fetches come one job each: the period of BullMQ's own renewal rounds, well inside the fetch's lock);
   *  - else (a loop lead longer than the lock) it is renewed as any job's.
   * At the due time the renewal resumes (`resumeRenewal`) and the check before the turn (`lockSurelyHeld`,
   * else `lockHeld`) decides whether the lock is still this process's; a drain hands the job back with its lock.
   *
   * Policy (docs/RELIABILITY.md, "A held tick's lock lasts past its due time"): a worker lost during the lead
   * leaves its held cron occurrences locked until due + `lock_duration_ms`, so another worker takes them over about
   * `lock_duration_ms + stalled_interval_ms` after their due time (late, inside the misfire grace: they still
   * run once) instead of before it; a worker starved through the lead keeps them, and runs them late itself.
   */
  private holdLock(worker: FetchingWorker, job: Job, token: string, ticket: JobTicket, kind: JobProcessor | undefined): void {
    const { lock_duration_ms: lockMs, lock_renew_ms: renewMs } = this.deps.config.worker;
    const dueAt = ticket.dueAt!;
    const fetchedAt = job.processedOn || Date.now();
    if (dueAt > fetchedAt + renewMs) {
      if (!kind?.lockedUntilDue) return;
      let byDue = this.lockSets.get(worker);
      if (!byDue) {
        this.lockSets.set(worker, (byDue = new Map<number, HeldLockSet[]>()));
        setTimeout(() => this.setHeldLocks(worker), renewMs / 2).unref();
      }
      const batch = byDue.get(dueAt) ?? [];
      byDue.set(dueAt, batch);
      batch.push({ job, token, ticket });
    }
    worker.pauseRenewalOf(job.id!);
    this.heldLocks.set(job, { until: fetchedAt + lockMs, paused: true });
  }

  /**
   * Set the locks of the held ticks `holdLock` gathered for `worker` to last until their due time plus
   * `lock_duration_ms`: one `extendLocks` call per due time, for the ticks still held (not woken, handed back
   * or lost meanwhile). A tick whose lock is not this process's any more (it lapsed between the fetch and now)
   * is left to whoever has it; when Redis does not answer, the ticks' locks are renewed by BullMQ as before.
   */
  private setHeldLocks(worker: FetchingWorker): void {
    const byDue = this.lockSets.get(worker) ?? new Map<number, HeldLockSet[]>();
    this.lockSets.delete(worker);
    if (this.deps.turns.draining) return; // held ticks are handed back with the lock their fetch set
    const lockMs = this.deps.config.worker.lock_duration_ms;
    for (const [dueAt, gathered] of byDue) {
      const batch = gathered.filter((b) => b.ticket.phase === 'held' && this.deps.turns.admission.ticket(b.job.id!) === b.ticket);
      if (batch.length === 0) continue;
      const sentAt = Date.now();
      const duration = dueAt + lockMs - sentAt;
      worker
        .extendJobLocks(
          batch.map((b) => b.job.id!),
          batch.map((b) => b.token),
          duration,
        )
        .then(
          (failed) => {
            const lost = new Set(failed);
            for (const { job, ticket } of batch) {
              const held = this.heldLocks.get(job);
              if (!lost.has(job.id!)) {
                if (held) held.until = Math.max(held.until, sentAt + duration);
              } else if (this.deps.turns.admission.ticket(job.id!) === ticket) {
                ticket.interrupt('lost'); // `runAdmitted` leaves it (and says so)
              }
            }
          },
          (err: unknown) => {
            worker.emit('error', err as Error);
            for (const { job, token, ticket } of batch)
              if (this.deps.turns.admission.ticket(job.id!) === ticket) this.resumeRenewal(worker, job, token);
          },
        );
    }
  }

  /**
   * A held tick woke (or its lock could not be set ahead): BullMQ's lock manager renews its lock again, first
   * by `lock_renew_ms` after the lock's time less `lock_duration_ms` — as if set then, as a fetch sets it.
   */
  private resumeRenewal(worker: FetchingWorker, job: Job, token: string): void {
    const held = this.heldLocks.get(job);
    if (!held?.paused) return;
    held.paused = false;
    worker.renewLockOf(job.id!, token, held.until - this.deps.config.worker.lock_duration_ms);
  }

  /** Jobs whose locks are checked in the next `extendLocks` call of each worker. */
  private readonly lockChecks = new Map<FetchingWorker, Array<{ jobId: string; token: string; answer: (held: boolean) => void }>>();

  /**
   * Whether this process still holds job `jobId`'s lock, renewing it: one BullMQ `extendLocks` call
   * (atomic per job, as BullMQ's own renewal) for every job of `worker` asking in the same turn of
   * the event loop. When Redis does not answer, the job runs (its claim will tell).
   */
  private lockHeld(worker: FetchingWorker, jobId: string, token: string): Promise<boolean> {
    return new Promise<boolean>((answer) => {
      let batch = this.lockChecks.get(worker);
      if (!batch) {
        this.lockChecks.set(worker, (batch = []));
        setImmediate(() => {
          const asked = this.lockChecks.get(worker) ?? [];
          this.lockChecks.delete(worker);
          worker
            .extendJobLocks(
              asked.map((a) => a.jobId),
              asked.map((a) => a.token),
              this.deps.config.worker.lock_duration_ms,
            )
            .then(
              (failed) => {
                const lost = new Set(failed);
                for (const a of asked) a.answer(!lost.has(a.jobId));
              },
              (err: unknown) => {
                worker.emit('error', err as Error);
                for (const a of asked) a.answer(true);
              },
            );
        });
      }
      batch.push({ jobId, token, answer });
    });
  }

  /** Record liveness (sorted set scored by time) for `hermes status` and `cron status`. */
  private async beat(): Promise<void> {
    await this.deps.redis.zadd(this.deps.keys.workers, Date.now(), this.deps.workerId);
  }

  /** Resolves once this process has started its workers (they are running after `start`). */
  get running(): boolean {
    return this.closing === undefined;
  }

  /**
   * Drain, then close (see the policy at the top of this file). Idempotent:
   * a second call returns the first call's promise.
   */
  drain(): Promise<void> {
    this.closing ??= this.runDrain();
    return this.closing;
  }

  /** Alias of `drain()`. */
  close(): Promise<void> {
    return this.drain();
  }

  private async runDrain(): Promise<void> {
    const { config, turns } = this.deps;
    const log = this.deps.log;
    turns.draining = true;
    this.stopFetching.abort();
    turns.admission.changed(); // the fetch loops waiting for a change see the stop
    await Promise.allSettled(this.workers.map((w) => w.pause(true)));
    // A blocking fetch still waiting would take one of the jobs handed back below: interrupt it, as BullMQ's own
    // pause does (its dedicated blocking connection; a fetch that got a job already hands it back, `runAdmitted`).
    await Promise.allSettled(this.workers.map((w) => w.backend.disconnectBlocking(false)));
    // Held ticks and jobs waiting for a slot never started: handed back at once (`runAdmitted`).
    const waiting = turns.admission.waiting();
    if (waiting.length > 0)
      log.info(
        { handedBack: waiting.length },
        `draining: handing back ${waiting.length} job(s) not started (held ticks, jobs waiting for a turn slot)`,
      );
    for (const t of waiting) t.interrupt('drain');
    const budgets: Record<DrainClass, number> = {
      deadline: config.agent.cron_drain_timeout * 1000,
      chat: config.agent.restart_drain_timeout * 1000,
    };
    const deadline = turns.list('deadline').length;
    const chat = turns.list('chat').length;
    if (deadline + chat > 0) {
      log.info(
        { deadline, chat, deadlineTimeoutS: budgets.deadline / 1000, chatTimeoutS: budgets.chat / 1000 },
        `draining: waiting up to ${budgets.deadline / 1000}s for ${deadline} deadline turn(s) (ticks, /v1 runs) and up to ${budgets.chat / 1000}s for ${chat} chat turn(s)`,
      );
    }
    await Promise.all((['deadline', 'chat'] as const).map((cls) => this.drainClass(cls, budgets[cls])));
    // Aborted turns and handed-back tickets put their jobs back; give them a moment to do so before closing
    // (with the jobs of fetches that were in flight: their tickets come once those fetches end).
    const closeBy = Date.now() + 5_000;
    await Promise.race([Promise.allSettled(this.fetchesInFlight), sleep(closeBy - Date.now(), undefined, { unref: true })]);
    const rest = [...turns.list(), ...turns.admission.all()];
    if (rest.length > 0)
      await Promise.race([Promise.allSettled(rest.map((t) => t.done)), sleep(closeBy - Date.now(), undefined, { unref: true })]);
    clearInterval(this.heartbeat);
    this.fence.close();
    const steps: Array<[string, () => Promise<unknown>]> = [
      ['close workers', () => Promise.all(this.workers.map((w) => w.close(true)))],
      ['forget worker', () => this.deps.redis.zrem(this.deps.keys.workers, this.deps.workerId)],
      ['close queues', () => this.deps.queues.close()],
      [
        'close outbound queues',
        () => Promise.all([this.deps.outboundTelegram.close(), this.deps.outboundSlack.close(), this.deps.outboundDiscord.close()]),
      ],
      ['close MCP servers', async () => await this.mcp?.close()],
      ['stop housekeeping', async () => this.housekeeping?.stop()],
      ['close metrics server', async () => this.metricsServer?.close()],
      ['close metrics queues', () => Promise.all(this.closeQueues.map((c) => c()))],
      [
        'close connections',
        async () => {
          for (const c of this.connections) c.disconnect();
        },
      ],
      ['send traces', () => this.stopTracing()],
    ];
    for (const [name, step] of steps) {
      try {
        await step();
      } catch (err) {
        log.warn({ step: name, err: (err as Error).message }, 'shutdown step failed; continuing');
      }
    }
    log.info('worker stopped');
  }

  private async drainClass(cls: DrainClass, budgetMs: number): Promise<void> {
    const pending = this.deps.turns.list(cls);
    if (pending.length === 0) return;
    const all = Promise.allSettled(pending.map((t) => t.done));
    const finished =
      budgetMs > 0 ? await Promise.race([all.then(() => true), sleep(budgetMs, undefined, { unref: true }).then(() => false)]) : false;
    if (finished) return;
    const left = this.deps.turns.list(cls);
    if (left.length > 0) {
      this.deps.log.warn({ drainClass: cls, aborted: left.length }, `drain deadline: aborting ${left.length} ${cls} turn(s)`);
      for (const t of left) {
        t.abortedByDrain = true;
        t.controller.abort(new Error('drain deadline'));
      }
    }
  }
}

/**
 * This process's metrics (`deps.metrics`), with the fleet's job counts per queue name, summed over every
 * shard's queue of that name. @returns what closes the queue opened for them
 */
function openMetrics(deps: WorkerDeps, queueConn: RedisClient): () => Promise<void> {
  const v1Counts = v1RunsQueue(deps.keys, queueConn, deps.log);
  deps.metrics = new HermesMetrics({
    fleet: fleetReadings({
      redis: deps.redis,
      workersKey: deps.keys.workers,
      queues: [deps.queues.acrossShards('ticks'), deps.queues.acrossShards('inbox'), deps.outboundTelegram, v1Counts],
      models: modelStateFor(deps.redis, deps.keys),
    }),
  });
  return () => v1Counts.close();
}

/** The shards this process consumes (docs/DESIGN.md §2): `worker.shards`, else every shard of `redis.shards`. */
function consumedShards({ config, keys }: WorkerDeps): number[] {
  return config.worker.shards.length > 0
    ? [...new Set(config.worker.shards)].sort((a, b) => a - b)
    : keys.shards().map((k) => k.shardIndex);
}

/** Fetch requests one worker keeps in flight at most while each brings a job (a burst being released). */
export const FETCH_LANES = 8;

/** Wait after a fetch that failed (Redis unreachable, a script error) before the next, ms. */
const FETCH_RETRY_MS = 1000;

/** A held tick whose lock `WorkerProcess.holdLock` sets to last past its due time. */
interface HeldLockSet {
  job: Job;
  token: string;
  ticket: JobTicket;
}

/** A queue's worker on one shard: the kinds of job it runs, and how its jobs are fetched (`WorkerProcess.addWorker`). */
interface FetchedQueue {
  name: string;
  /** The shard's dependencies, which its jobs are processed with. */
  deps: WorkerDeps;
  kinds: readonly JobProcessor[];
  /** The pools of turn slots its jobs may need (of all its kinds). */
  pools: readonly TurnPool[];
  /** Its jobs may come early and be held (one of its kinds' may). */
  holdable: boolean;
}

/** The kind of job `job` is on `queue` (`JobProcessor.accepts`); `undefined` when none takes it. */
function kindOf(queue: FetchedQueue, job: Job): JobProcessor | undefined {
  return queue.kinds.find((k) => k.accepts?.(job) ?? true);
}

/** @throws Error when no kind registered on `queue` takes `job` */
function processorOf(queue: FetchedQueue, job: Job): JobProcessor {
  const kind = kindOf(queue, job);
  if (!kind) throw new Error(`no processor on the ${queue.name} queue for job type ${String((job.data as { type?: unknown }).type)}`);
  return kind;
}

/**
 * Run `job` with its kind's processor in the job's span: the root of the trace of a tick or a cron run,
 * or the continuation of the trace its data carries (an inbound message's, docs/OPERATIONS.md, "Traces").
 */
async function processTraced(kind: JobProcessor, queue: FetchedQueue, job: Job, token: string | undefined): Promise<unknown> {
  const attributes = {
    [ATTR.queue]: queue.name,
    [ATTR.jobId]: job.id,
    'messaging.operation.name': job.name,
    [ATTR.sessionId]: (job.data as { sessionId?: unknown } | undefined)?.sessionId as string | undefined,
  };
  return await tracing().continued(SPAN.job, carrierOf(job.data), attributes, () => kind.process(job, token, undefined, queue.deps));
}

/**
 * A BullMQ worker whose jobs this process fetches itself (BullMQ's manual fetching) and processes
 * with BullMQ's `processJob`; started without BullMQ's main loop (`autorun: false`), so it starts
 * BullMQ's own lock manager, which renews the locks of every job `processJob` tracks in batches.
 */
class FetchingWorker extends Worker {
  /** Told of each lock renewal that was taken: the job and until when its lock surely lasts (epoch ms). */
  onRenewed: ((jobId: string, heldUntil: number) => void) | undefined;

  /**
   * BullMQ's lock renewal (its timer's and `lockHeld`'s), telling `onRenewed` of each lock renewed:
   * it lasts `duration` from when the renewal was sent, at least (the lock was written after that).
   */
  override async extendJobLocks(jobIds: string[], tokens: string[], duration: number): Promise<string[]> {
    const sentAt = Date.now();
    const failed = await super.extendJobLocks(jobIds, tokens, duration);
    for (const id of jobIds) if (!failed.includes(id)) this.onRenewed?.(id, sentAt + duration);
    return failed;
  }

  /** Start renewing the locks of the jobs being processed (what `Worker.run` does besides its main loop). */
  startLockRenewal(): void {
    this.lockManager.start();
  }

  /** Stop renewing job `jobId`'s lock (a held tick's, `WorkerProcess.holdLock`) until `renewLockOf` renews it again. */
  pauseRenewalOf(jobId: string): void {
    this.lockManager.untrackJob(jobId);
  }

  /** Renew job `jobId`'s lock with `token` from now on (what `processJob` sets up when it starts the job). */
  renewLockOf(jobId: string, token: string, processedOn: number | undefined): void {
    this.lockManager.trackJob(jobId, token, processedOn ?? Date.now());
  }
}
