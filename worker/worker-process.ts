/**
 * One worker process of the fleet: BullMQ workers on the `ticks` (loop,
 * heartbeat and cron ticks), `inbox` (user input) and `v1-runs` queues, a
 * liveness heartbeat, start-up reconciliation, and drain.
 *
 * Drain policy (docs/DESIGN.md §9), on `drain()` (SIGTERM/SIGINT):
 *   1. stop taking new work (every BullMQ worker is paused without waiting);
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
import { Worker, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { HermesConfig } from '../scheduler/config/config.ts';
import { checkRedis } from '../scheduler/store/redis/connect.ts';
import { chooseTopology, openRedisClient, type RedisClient, type RedisTopology } from '../scheduler/store/redis/connection-factory.ts';
import type { InboxJobData } from '../scheduler/session/inbox.ts';
import type { RunnerFactory } from './turn-runners/create-runner.ts';
import { QUEUES } from '../scheduler/store/keys.ts';
import { logBullmqErrors } from '../scheduler/store/redis/bullmq-errors.ts';
import { tickJobData, type StoredTickJobData, type TickJobData } from '../scheduler/loop/loop-store.ts';
import type { DrainClass } from './turn-tracker.ts';
import { decodeTurnAbort } from '../scheduler/session/turn-abort.ts';
import { processScheduleTick } from './tick-processor.ts';
import { processInbox, type InboxHooks } from './inbox-processor.ts';
import { processCronTick } from './cron-processor.ts';
import { processV1Run } from './v1-run-processor.ts';
import { goalHooks } from './goal-processor.ts';
import { createWorkerDeps, depsForShard } from './create-worker-deps.ts';
import { assertShardCount } from '../scheduler/store/redis/shard-count.ts';
import { cronRepeatStrategy } from '../scheduler/cron/repeat-strategy.ts';
import type { WorkerDeps } from './worker-deps.ts';
import type { McpServers } from './tools/mcp-servers.ts';
import { fleetReadings, HermesMetrics } from '../scheduler/metrics.ts';
import { v1RunsQueue } from '../scheduler/v1/v1-runs.ts';
import { startMetricsServer, type MetricsServer } from './metrics-server.ts';
import { startHousekeeping, type Housekeeping } from './housekeeping.ts';
import { WORKER_HEARTBEAT_MS } from '../scheduler/worker-liveness.ts';
import { JOB_RETENTION } from '../scheduler/store/queues.ts';
import { cronStoreFor } from '../scheduler/services.ts';


/** Options of `WorkerProcess.start`. */
export interface WorkerProcessOptions {
  config: HermesConfig;
  /** Where Redis is (single, cluster, sentinel); default: `redisUrl`, else the configuration's. */
  topology?: RedisTopology;
  /** A single Redis at this URL (shorthand for a `single` topology). */
  redisUrl?: string;
  log: Logger;
  /** Extra job processors for the ticks queue by `job.data.type` (e.g. `cron-tick`). */
  tickProcessors?: Record<string, (job: Job, token: string | undefined, signal: AbortSignal | undefined, deps: WorkerDeps) => Promise<unknown>>;
  /** Extra queues this process works on, besides ticks, inbox and `v1-runs`. */
  extraQueues?: Array<{ name: string; process: (job: Job, token: string | undefined, signal: AbortSignal | undefined, deps: WorkerDeps) => Promise<unknown> }>;
  /** Extra BullMQ `settings` for the ticks worker (the croner `repeatStrategy` is always set). */
  tickSettings?: Record<string, unknown>;
  inboxHooks?: InboxHooks;
  /** Turn runners; default from config (agent endpoint, command runners). Embedders and benchmarks may pass their own. */
  runners?: RunnerFactory;
}

export class WorkerProcess {
  readonly deps: WorkerDeps;
  /** This process's metrics (served at `worker.metrics_port` when set). */
  readonly metrics: HermesMetrics;
  /** The metrics server, when `worker.metrics_port` is set. */
  metricsServer: MetricsServer | undefined;
  private readonly workers: Worker[] = [];
  /** Housekeeping timers of this process (croner). */
  private housekeeping: Housekeeping | undefined;
  /** Queues opened only for metrics, closed with the process. */
  private readonly closeQueues: Array<() => Promise<void>> = [];
  private heartbeat: NodeJS.Timeout | undefined;
  private closing: Promise<void> | undefined;
  /** The configured MCP servers (their tools join `deps.tools`). */
  mcp: McpServers | undefined;

  private constructor(
    deps: WorkerDeps,
    private readonly connections: RedisClient[],
    private readonly topology: RedisTopology,
  ) {
    this.deps = deps;
    this.metrics = deps.metrics!;
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
    redis.on('error', (err) => log.warn({ err: err.message }, 'redis connection error'));
    queueConn.on('error', () => {});
    await checkRedis(redis, log);
    const deps = createWorkerDeps({ config, redis, queueConnection: queueConn, log, runners: options.runners });
    await assertShardCount(redis, deps.keys);
    const { keys, queues, loops } = deps;
    // Shards this process consumes (docs/DESIGN.md §2): `worker.shards`, else every shard of `redis.shards`.
    const shards = config.worker.shards.length > 0 ? [...new Set(config.worker.shards)].sort((a, b) => a - b) : keys.shards().map((k) => k.shardIndex);
    const v1Counts = v1RunsQueue(keys, queueConn, log);
    deps.metrics = new HermesMetrics({
      // Job counts per queue name, summed over every shard's queue of that name.
      fleet: fleetReadings({ redis, workersKey: keys.workers, queues: [queues.acrossShards('ticks'), queues.acrossShards('inbox'), deps.outboundTelegram, v1Counts] }),
    });
    const wp = new WorkerProcess(deps, [redis, queueConn], topology);
    wp.closeQueues.push(() => v1Counts.close());
    const rearmed = await loops.reconcile(Date.now(), shards);
    if (rearmed > 0) log.warn({ rearmed }, 're-armed active schedules whose job scheduler was missing');
    // `/stop` in a session aborts its running turn wherever it runs: every worker listens.
    const abortListener = openRedisClient(topology, 'commands');
    wp.connections.push(abortListener);
    abortListener.on('message', (_channel: string, message: string) => {
      const request = decodeTurnAbort(message);
      if (!request) return;
      const n = deps.turns.abortTurns(request);
      if (n > 0) deps.log.info({ sessionId: request.sessionId, by: request.by, turns: n }, 'running turn stopped by the user');
    });
    await abortListener.subscribe(deps.keys.turnAbortChannel);
    if (Object.keys(config.mcp_servers).length > 0) {
      // Listed once per start (and on reconnect); a server that fails is logged and skipped.
      // Loaded only when configured: the MCP client is heavy to import, and most processes need none.
      const { McpServers } = await import('./tools/mcp-servers.ts');
      wp.mcp = new McpServers(config.mcp_servers, deps.log, (set) => deps.tools.processEnv(set));
      await wp.mcp.start();
      deps.tools.addSource(wp.mcp);
    }
    const cronRearmed = await cronStoreFor(config, { redis, keys, queues }).reconcile(Date.now(), shards);
    if (cronRearmed > 0) log.warn({ rearmed: cronRearmed }, 're-armed cron jobs whose BullMQ job was missing');
    const tickProcessors: NonNullable<WorkerProcessOptions['tickProcessors']> = {
      'cron-tick': processCronTick as never,
      ...options.tickProcessors,
    };
    const inboxHooks = options.inboxHooks ?? goalHooks;
    // Each shard's jobs are processed with that shard's keys and queues (a session's scripts stay in its slot).
    for (const shard of shards) {
      const sd = depsForShard(deps, shard);
      wp.addWorker(QUEUES.ticks, sd, async (job, token, signal) => {
        const type = (job.data as { type?: string }).type ?? 'schedule-tick';
        if (type === 'schedule-tick') {
          // A job scheduler's jobs carry no session id (its scheduler id names it): complete the data once, here.
          job.data = tickJobData(job as Job<StoredTickJobData>);
          return await processScheduleTick(job as Job<TickJobData>, token, signal, sd);
        }
        const processor = tickProcessors[type];
        if (!processor) throw new Error(`no processor for tick type ${type}`);
        return await processor(job, token, signal, sd);
      }, { repeatStrategy: cronRepeatStrategy, ...options.tickSettings });
      wp.addWorker(QUEUES.inbox, sd, (job, token, signal) => processInbox(job as Job<InboxJobData>, token, signal, sd, inboxHooks));
    }
    // `/v1` runs belong to no session: they live on the first shard, whose consumers run them.
    if (shards.includes(0)) {
      wp.addWorker(QUEUES.v1Runs, deps, (job, token, signal) => processV1Run(job as never, token, signal, deps));
      for (const q of options.extraQueues ?? []) wp.addWorker(q.name, deps, (job, token, signal) => q.process(job, token, signal, deps));
    }
    await wp.beat();
    wp.heartbeat = setInterval(() => void wp.beat().catch(() => {}), WORKER_HEARTBEAT_MS);
    wp.heartbeat.unref();
    wp.housekeeping = startHousekeeping({ redis, workersKey: keys.workers, log: deps.log }, config.housekeeping);
    if (config.worker.metrics_port !== undefined) {
      try {
        wp.metricsServer = await startMetricsServer({
          host: config.api_server.host, port: config.worker.metrics_port, key: config.api_server.key,
          public: config.metrics.public, metrics: wp.metrics, log: deps.log,
        });
      } catch (err) {
        await wp.drain();
        throw err;
      }
    }
    deps.log.info({ concurrency: config.worker.concurrency, pid: process.pid, shards }, 'worker started');
    return wp;
  }

  private addWorker(
    name: string,
    shardDeps: WorkerDeps,
    processor: (job: Job, token: string | undefined, signal: AbortSignal | undefined) => Promise<unknown>,
    settings?: Record<string, unknown>,
  ): void {
    const { config, log } = this.deps;
    const { keys } = shardDeps;
    const connection = openRedisClient(this.topology, 'bullmq');
    const worker = new Worker(name, processor, {
      connection: connection as never,
      prefix: keys.bullPrefix,
      concurrency: config.worker.concurrency,
      lockDuration: config.worker.lock_duration_ms,
      lockRenewTime: config.worker.lock_renew_ms,
      stalledInterval: config.worker.stalled_interval_ms,
      maxStalledCount: config.worker.max_stalled_count,
      ...JOB_RETENTION,
      ...(settings ? { settings } : {}),
    });
    logBullmqErrors(worker, name, log);
    // A lock that could not be renewed has lapsed: the stall check may already have handed the job
    // to another worker. Abort this copy's turn so the occurrence runs to its commit on one worker only.
    worker.on('lockRenewalFailed', (jobIds: string[]) => {
      for (const jobId of jobIds) {
        if (this.deps.turns.abortLockLost(jobId)) log.warn({ queue: name, jobId }, 'job lock lost; its turn is aborted here and left to the worker that took the job over');
      }
    });
    worker.on('failed', (job, err) => log.warn({ queue: name, jobId: job?.id, err: err.message }, 'job failed'));
    this.workers.push(worker);
    this.connections.push(connection);
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
    await Promise.allSettled(this.workers.map((w) => w.pause(true)));
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
    // Aborted turns hand their jobs back; give them a moment to do so before closing.
    const rest = turns.list();
    if (rest.length > 0) await Promise.race([Promise.allSettled(rest.map((t) => t.done)), delay(5_000)]);
    clearInterval(this.heartbeat);
    const steps: Array<[string, () => Promise<unknown>]> = [
      ['close workers', () => Promise.all(this.workers.map((w) => w.close(true)))],
      ['forget worker', () => this.deps.redis.zrem(this.deps.keys.workers, this.deps.workerId)],
      ['close queues', () => this.deps.queues.close()],
      ['close outbound queue', () => this.deps.outboundTelegram.close()],
      ['close MCP servers', async () => await this.mcp?.close()],
      ['stop housekeeping', async () => this.housekeeping?.stop()],
      ['close metrics server', async () => this.metricsServer?.close()],
      ['close metrics queues', () => Promise.all(this.closeQueues.map((c) => c()))],
      ['close connections', async () => { for (const c of this.connections) c.disconnect(); }],
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
    const finished = budgetMs > 0 ? await Promise.race([all.then(() => true), delay(budgetMs).then(() => false)]) : false;
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

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}

