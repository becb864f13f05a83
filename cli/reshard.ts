/**
 * Moving a store to another shard count (`hermes admin reshard --to N`).
 *
 * Policy (docs/DESIGN.md §2, README "Sharded key space"):
 * - Only with the fleet's workers stopped: a live worker (worker-liveness.ts)
 *   makes it refuse before anything is written, so no tick fires while a
 *   schedule exists on two layouts.
 * - `/v1` runs and the outbound queue stay on shard 0. When shard 0's prefix
 *   itself changes (to or from one shard: `{hermes}` ↔ `{hermes:0}`), their
 *   queues must hold no pending work, else it refuses.
 * - Copy, re-arm, then delete, one session (one cron job) at a time: its keys
 *   are copied to its new shard (DUMP/RESTORE, TTLs kept), its schedules are
 *   armed there through `LoopStore.arm` / `CronStore.arm`, its pending tick and
 *   inbox jobs are copied under their own ids, and only then are its job
 *   schedulers, pending jobs and keys removed from the old shard. A session
 *   still listed in an old shard's index has not finished moving; running the
 *   command again repeats its move (every step is idempotent).
 * - Marker order: `reshard-to` is written first (every process refuses to
 *   start while it exists), the shard count last, after a verification that
 *   every active schedule is armed exactly once on the new layout.
 * - A fixed-cadence loop keeps its next due time (the old job scheduler's next
 *   occurrence); ticks missed while the workers were stopped coalesce as they
 *   do after any stop. The store-wide list of recent cron runs (`cron runs`
 *   across all jobs) is not moved; each job's own history moves with it.
 */
import { Queue, type Job, type JobType } from 'bullmq';
import type { HermesConfig } from '../scheduler/config/config.ts';
import { ConfigError } from '../scheduler/errors/config-error.ts';
import { Keys, QUEUES } from '../scheduler/store/keys.ts';
import type { LoopKind } from '../scheduler/tick/tick-kind.ts';
import type { LoopStore } from '../scheduler/loop/loop-store.ts';
import { tickJobData, type StoredTickJobData } from '../scheduler/loop/tick-job.ts';
import type { HermesQueues } from '../scheduler/store/queues.ts';
import type { RedisClient } from '../scheduler/store/redis/connection-factory.ts';
import { cronStoreFor, loopStoreFor, openQueues } from '../scheduler/services.ts';
import { cronTickData, isCronTick } from '../scheduler/cron/cron-store.ts';
import { aliveWorkerIds } from '../scheduler/worker-liveness.ts';
import { resumeDueAt, type LoopRecord } from '../scheduler/loop/loop-state.ts';

/** States of a BullMQ job that has not run yet. */
const PENDING: JobType[] = ['waiting', 'delayed', 'prioritized'];

/** What a reshard did. */
export interface ReshardReport {
  from: number;
  to: number;
  sessionsMoved: number;
  cronJobsMoved: number;
  /** Pending tick and inbox jobs copied to their new shard (scheduler-made jobs are re-armed instead). */
  jobsMoved: number;
  /** Active loops/heartbeats and scheduled cron jobs verified armed on the new layout. */
  schedulesVerified: number;
}

/**
 * Move every session and cron job whose shard changes to the layout of `to`
 * shards, then record `to` as the store's shard count.
 * @param redis - commands connection
 * @param queueConnection - BullMQ connection (`maxRetriesPerRequest: null`)
 * @param config - parsed config (`redis.prefix`, prefetch lead, cron history limit)
 * @param to - the new shard count, a positive integer
 * @param progress - called with one line per step worth telling the operator
 * @throws ConfigError when `to` is invalid, a worker is alive, another reshard
 *   to a different count is under way, shard 0's `/v1` or outbound queue holds
 *   pending work while its prefix changes, or the verification fails
 */
export async function reshard(
  redis: RedisClient,
  queueConnection: RedisClient,
  config: HermesConfig,
  to: number,
  progress: (line: string) => void = () => {},
): Promise<ReshardReport> {
  if (!Number.isInteger(to) || to < 1)
    throw new ConfigError(`--to must be a positive whole number of shards, got ${to}.`, { key: 'redis.shards' });
  const probe = new Keys(config.redis.prefix);
  const under = await redis.get(probe.reshardTarget);
  if (under !== null && Number(under) !== to) {
    throw new ConfigError(`A reshard to ${under} shard(s) was interrupted; finish it first: hermes admin reshard --to ${under}`, {
      key: 'redis.shards',
    });
  }
  const from = await storedCount(redis, probe);
  const oldKeys = new Keys(config.redis.prefix, { shards: from });
  const newKeys = new Keys(config.redis.prefix, { shards: to });
  const report: ReshardReport = { from, to, sessionsMoved: 0, cronJobsMoved: 0, jobsMoved: 0, schedulesVerified: 0 };
  if (from === to && under === null) return report;
  // The marker before the liveness check: from here on no process starts (assertShardCount), so a
  // worker cannot come up between the check and the move. Taken back when the move is refused.
  const created = under === null && (await redis.set(probe.reshardTarget, String(to), 'NX')) === 'OK';
  const oldQueues = openQueues(oldKeys, queueConnection);
  const newQueues = openQueues(newKeys, queueConnection);
  try {
    try {
      const alive = await aliveWorkerIds(redis, probe.workers);
      if (alive.length > 0) {
        throw new ConfigError(
          `Stop every worker before resharding: ${alive.length} worker(s) alive (${alive.join(', ')}). ` +
            'A worker that fires ticks while schedules move could fire one twice or miss one.',
          { key: 'redis.shards' },
        );
      }
      if (oldKeys.shard(0).prefix !== newKeys.shard(0).prefix) await assertShardZeroIdle(oldKeys, queueConnection);
    } catch (err) {
      if (created) await redis.del(probe.reshardTarget);
      throw err;
    }
    const oldLoops = loopStoreFor(config, { redis, keys: oldKeys, queues: oldQueues });
    const newLoops = loopStoreFor(config, { redis, keys: newKeys, queues: newQueues });
    const oldCron = cronStoreFor(config, { redis, keys: oldKeys, queues: oldQueues });
    const newCron = cronStoreFor(config, { redis, keys: newKeys, queues: newQueues });
    const moves = (prefixOld: string, prefixNew: string) => prefixOld !== prefixNew;

    for (const ok of oldKeys.shards()) {
      // Every session this old shard knows of, from any of its indexes.
      const sessions = new Set<string>(await redis.smembers(ok.sessionIndex));
      for (const id of await redis.smembers(ok.goalIndex)) sessions.add(id);
      for (const m of await redis.smembers(ok.scheduleIndex)) sessions.add(ok.parseScheduleIndexMember(m).sessionId);
      const cronIds = await redis.smembers(ok.cronJobIndex);
      const pending = await pendingJobs(oldQueues.forShard(ok.shardIndex));

      for (const sessionId of sessions) {
        const nk = newKeys.forSession(sessionId);
        if (!moves(ok.prefix, nk.prefix)) continue;
        // 1. copy keys and index memberships
        await copyKeys(redis, ok.sessionKeys(sessionId), nk.sessionKeys(sessionId));
        const memberships = await indexMemberships(redis, ok, nk, sessionId);
        for (const [, newIndex, member] of memberships) await redis.sadd(newIndex, member);
        // 2. pending input and self-paced / other non-scheduler tick jobs, under their own ids
        const own = pending.filter((j) => sessionOfJob(j.job) === sessionId);
        report.jobsMoved += await copyJobs(own, newQueues.forShard(nk.shardIndex));
        // 3. re-arm on the new shard through the store
        for (const kind of ['loop', 'heartbeat'] as LoopKind[]) {
          const record = await newLoops.get(sessionId, kind);
          if (!record || record.status !== 'active') continue;
          const due = await dueOf(record, oldLoops, newLoops);
          if (record.mode === 'fixed' || !(await hasSelfPacedJob(newQueues.forShard(nk.shardIndex), record)))
            await newLoops.arm(record, due);
        }
        // 4. remove from the old shard: schedulers, pending jobs, keys, index memberships
        for (const kind of ['loop', 'heartbeat'] as LoopKind[]) await oldLoops.removeScheduler(sessionId, kind);
        for (const j of own) await j.job.remove().catch(() => undefined);
        await redis.del(...ok.sessionKeys(sessionId));
        for (const [oldIndex, , member] of memberships) await redis.srem(oldIndex, member);
        report.sessionsMoved++;
      }

      for (const id of cronIds) {
        const nk = newKeys.forCronJob(id);
        if (!moves(ok.prefix, nk.prefix)) continue;
        await copyKeys(redis, ok.cronJobKeys(id), nk.cronJobKeys(id));
        await redis.sadd(nk.cronJobIndex, id);
        const own = pending.filter((j) => isCronTick(j.job) && cronJobOf(j.job) === id);
        report.jobsMoved += await copyJobs(own, newQueues.forShard(nk.shardIndex));
        const job = await newCron.get(id);
        if (job?.state === 'scheduled') await newCron.arm(job);
        const old = await oldCron.get(id);
        if (old) await oldCron.disarm(old);
        for (const j of own) await j.job.remove().catch(() => undefined);
        await redis.del(...ok.cronJobKeys(id));
        await redis.srem(ok.cronJobIndex, id);
        report.cronJobsMoved++;
      }
      // Jobs made by a job scheduler that was removed above (`repeat:…`) may be left in the wait list.
      for (const j of await pendingJobs(oldQueues.forShard(ok.shardIndex))) {
        const cronJobId = isCronTick(j.job) ? cronJobOf(j.job) : undefined;
        const sessionId = sessionOfJob(j.job);
        const target =
          cronJobId !== undefined ? newKeys.forCronJob(cronJobId) : sessionId !== undefined ? newKeys.forSession(sessionId) : undefined;
        if (target && moves(ok.prefix, target.prefix) && j.job.id?.startsWith('repeat:')) await j.job.remove().catch(() => undefined);
      }
    }
    progress(`moved ${report.sessionsMoved} session(s) and ${report.cronJobsMoved} cron job(s); copied ${report.jobsMoved} pending job(s)`);

    // The list orders (scheduler/store/lex-index.ts) are made again from the moved indexes at their next list.
    for (const k of [...oldKeys.shards(), ...newKeys.shards()]) await redis.del(...k.listOrders);

    report.schedulesVerified = await verify(oldQueues, newKeys, newQueues, newLoops, newCron);
    progress(`verified ${report.schedulesVerified} schedule(s) armed once on ${to} shard(s)`);
    // The count last: until it is written every process refuses to start (reshard-to exists).
    await redis.multi().set(probe.shardCountMarker, String(to)).del(probe.reshardTarget).exec();
    return report;
  } finally {
    await oldQueues.close();
    await newQueues.close();
  }
}

/** The count the store was written with (a store without a marker counts as one shard). */
async function storedCount(redis: RedisClient, keys: Keys): Promise<number> {
  const raw = await redis.get(keys.shardCountMarker);
  return raw === null ? 1 : Number(raw);
}

/** Refuse while `/v1` runs or outbound replies wait on shard 0 (their queues do not move). */
async function assertShardZeroIdle(keys: Keys, connection: RedisClient): Promise<void> {
  for (const name of [QUEUES.v1Runs, QUEUES.outboundTelegram, QUEUES.outboundSlack, QUEUES.outboundDiscord]) {
    const q = new Queue(name, { connection, prefix: keys.shard(0).bullPrefix });
    try {
      const counts = await q.getJobCounts('waiting', 'delayed', 'active', 'prioritized', 'waiting-children');
      const n = Object.values(counts).reduce((a, b) => a + b, 0);
      if (n > 0) {
        throw new ConfigError(
          `The ${name} queue still holds ${n} job(s), and its shard's prefix changes with this shard count. ` +
            'Let the gateway and workers finish them (or wait for them to expire), stop the fleet, then reshard again.',
          { key: 'redis.shards' },
        );
      }
    } finally {
      await q.close();
    }
  }
}

/** Copy each key to its counterpart (value and time-to-live); absent keys are skipped. */
async function copyKeys(redis: RedisClient, from: string[], to: string[]): Promise<void> {
  for (let i = 0; i < from.length; i++) {
    const dump = await redis.dumpBuffer(from[i]!);
    if (dump === null) continue;
    const ttl = await redis.pttl(from[i]!);
    await redis.restore(to[i]!, ttl > 0 ? ttl : 0, dump, 'REPLACE');
  }
}

/** `[old index, new index, member]` of each index the session is listed in on its old shard. */
async function indexMemberships(redis: RedisClient, ok: Keys, nk: Keys, sessionId: string): Promise<Array<[string, string, string]>> {
  const out: Array<[string, string, string]> = [];
  const candidates: Array<[string, string, string]> = [
    [ok.sessionIndex, nk.sessionIndex, sessionId],
    [ok.goalIndex, nk.goalIndex, sessionId],
    [ok.scheduleIndex, nk.scheduleIndex, ok.scheduleIndexMember(sessionId, 'loop')],
    [ok.scheduleIndex, nk.scheduleIndex, ok.scheduleIndexMember(sessionId, 'heartbeat')],
  ];
  for (const c of candidates) if (await redis.sismember(c[0], c[2])) out.push(c);
  return out;
}

/**
 * The session a pending job belongs to: its data's `sessionId`, or, for a
 * loop or heartbeat job scheduler's job (whose data holds none), the session
 * its scheduler id names; `undefined` for a job of no session (cron ticks).
 */
function sessionOfJob(job: Job): string | undefined {
  const data = job.data as { sessionId?: unknown; type?: string };
  if (typeof data.sessionId === 'string') return data.sessionId;
  if (data.type !== undefined && data.type !== 'schedule-tick') return undefined;
  try {
    return tickJobData(job as Job<StoredTickJobData>).sessionId;
  } catch {
    return undefined;
  }
}

/** The cron job a cron tick job belongs to (`cronTickData`), or `undefined` when it names none. */
function cronJobOf(job: Job): string | undefined {
  try {
    return cronTickData(job).jobId;
  } catch {
    return undefined;
  }
}

/** Pending tick and inbox jobs of one shard's queues. */
async function pendingJobs(q: HermesQueues): Promise<Array<{ queue: 'ticks' | 'inbox'; job: Job }>> {
  const out: Array<{ queue: 'ticks' | 'inbox'; job: Job }> = [];
  for (const queue of ['ticks', 'inbox'] as const) {
    for (const job of await q[queue].getJobs(PENDING)) if (job) out.push({ queue, job });
  }
  return out;
}

/**
 * Add each job to the same queue of the new shard under its own id (a no-op
 * when it is there already), with the delay it has left. Jobs made by a job
 * scheduler (`repeat:…`) are not copied: the scheduler is re-armed instead.
 * @returns how many were copied
 */
async function copyJobs(jobs: Array<{ queue: 'ticks' | 'inbox'; job: Job }>, to: HermesQueues): Promise<number> {
  let n = 0;
  for (const { queue, job } of jobs) {
    if (job.id?.startsWith('repeat:')) continue;
    const delay = Math.max(0, job.timestamp + (job.opts.delay ?? 0) - Date.now());
    await to[queue].add(job.name, job.data, { ...job.opts, jobId: job.id, delay, repeat: undefined, repeatJobKey: undefined } as never);
    n++;
  }
  return n;
}

/** The due time to re-arm a loop at: the old (or already new) job scheduler's next occurrence, else as `reconcile` decides. */
async function dueOf(record: LoopRecord, oldLoops: LoopStore, newLoops: LoopStore): Promise<number> {
  if (record.mode !== 'fixed') return record.nextDueAt ?? Date.now();
  const next = (await oldLoops.nextDueAt(record)) ?? (await newLoops.nextDueAt(record));
  return next ?? resumeDueAt(record, Date.now());
}

/** Whether a self-paced loop's next tick job waits on this shard. */
async function hasSelfPacedJob(q: HermesQueues, record: LoopRecord): Promise<boolean> {
  for (const job of await q.ticks.getJobs(PENDING)) {
    const d = job?.data as { sessionId?: string; kind?: string; loopId?: string } | undefined;
    if (d?.sessionId === record.sessionId && d.kind === record.kind && d.loopId === record.loopId) return true;
  }
  return false;
}

/**
 * Every active loop/heartbeat and scheduled cron job is armed on its new shard
 * and no job scheduler of a moved schedule is left on a shard it left.
 * @returns how many schedules were checked
 * @throws ConfigError naming the first one that is not
 */
async function verify(
  oldQueues: HermesQueues,
  newKeys: Keys,
  newQueues: HermesQueues,
  newLoops: LoopStore,
  newCron: ReturnType<typeof cronStoreFor>,
): Promise<number> {
  let checked = 0;
  const fail = (what: string) => {
    throw new ConfigError(`Reshard verification failed: ${what}. Nothing was lost; run the same command again to finish.`, {
      key: 'redis.shards',
    });
  };
  const newPrefixes = new Set(newKeys.shards().map((k) => k.prefix));
  // Job schedulers left on old shards that are not part of the new layout, or on the wrong new shard.
  const seen = new Map<string, number>();
  for (const q of [...oldQueues.shards().filter((q) => !newPrefixes.has(q.keys.prefix)), ...newQueues.shards()]) {
    for (const s of await q.ticks.getJobSchedulers(0, -1)) {
      seen.set(s.key, (seen.get(s.key) ?? 0) + 1);
      if (!newPrefixes.has(q.keys.prefix)) fail(`job scheduler ${s.key} is still on ${q.keys.prefix}`);
    }
  }
  for (const record of await newLoops.list()) {
    if (record.status !== 'active') continue;
    checked++;
    if (record.mode === 'fixed') {
      const schedulerId = newKeys.loopSchedulerId(record.sessionId, record.kind);
      if ((await newLoops.nextDueAt(record)) === undefined)
        fail(`the ${record.kind} of session ${record.sessionId} has no job scheduler on its new shard`);
      if (seen.get(schedulerId) !== 1)
        fail(`the ${record.kind} of session ${record.sessionId} has ${seen.get(schedulerId) ?? 0} job schedulers`);
    } else if (!(await hasSelfPacedJob(newQueues.forSession(record.sessionId), record))) {
      fail(`the self-paced ${record.kind} of session ${record.sessionId} has no pending tick on its new shard`);
    }
  }
  for (const job of await newCron.list()) {
    if (job.state !== 'scheduled') continue;
    checked++;
    const armed =
      job.schedule.kind === 'after' || job.schedule.kind === 'once'
        ? job.next_run_at !== null && (await newCron.hasOnceJob(job.id, job.next_run_at))
        : (await newCron.schedulerNext(job.id)) !== undefined && seen.get(newKeys.cronSchedulerId(job.id)) === 1;
    if (!armed) fail(`cron job ${job.id} is not armed once on its new shard`);
  }
  return checked;
}
