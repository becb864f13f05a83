/**
 * `/v1` runs: the record and event stream shared by the gateway (which creates
 * a run, queues it and waits) and the worker (which runs it as a turn). The two
 * processes meet only here, in Redis (docs/DESIGN.md §2).
 *
 * A run moves `queued → running → completed | failed | cancelled | interrupted`.
 * Every transition is one Lua script that checks the current status, writes the
 * record and appends the matching event, so the record and the stream never
 * disagree and the first terminal state wins (a late reply after a stop or a
 * drain abort changes nothing).
 *
 * Hand-back (docs/DESIGN.md §9, like loop ticks): a run cut by a worker's drain was
 * never completed, so it goes `running → queued` again (`run.requeued` event)
 * and its job is handed back to the queue; another worker completes it and
 * the caller still waiting gets that answer. A retry with the same
 * Idempotency-Key attaches to the unfinished run.
 *
 * `interrupted` is the terminal state of a run aborted without a hand-back
 * (kept for records written by older versions); a retry with the run's
 * Idempotency-Key re-queues it rather than replaying it as final.
 */
import { Queue, type ConnectionOptions } from 'bullmq';
import type { Logger } from '../logger.ts';
import { logBullmqErrors } from '../store/redis/bullmq-errors.ts';
import type { RedisClient } from '../store/redis/connection-factory.ts';
import { QUEUES, type Keys } from '../store/keys.ts';
import { JOB_RETENTION } from '../store/queues.ts';
import { luaScript, runLuaScript } from '../store/redis/lua-script.ts';
import { parseStreamEntry } from '../session/session-store.ts';

/** Where a `/v1` run is (`V1RunRecord.status`, and `run.<status>` events). The last four are terminal. */
export const V1_RUN_STATUSES = ['queued', 'running', 'completed', 'failed', 'cancelled', 'interrupted'] as const;
export type V1RunStatus = (typeof V1_RUN_STATUSES)[number];

/** Terminal statuses: nothing changes a run after one of these. */
export const TERMINAL_V1_RUN_STATUSES = ['completed', 'failed', 'cancelled', 'interrupted'] as const satisfies readonly V1RunStatus[];
/** How a run that did not complete ends (`V1RunStore.end`). */
export type V1RunEndStatus = Extract<V1RunStatus, 'failed' | 'cancelled' | 'interrupted'>;
/** The statuses a run is handed back from (`V1RunStore.requeue`): a drained `running` run, or a retry of an `interrupted` one. */
export type V1RunRequeueStatus = Extract<V1RunStatus, 'running' | 'interrupted'>;
/** What `POST /v1/runs/:id/stop` found: cancelled now, stopping (running), missing, or the terminal status it already had. */
export type V1StopOutcome = 'stopping' | 'missing' | V1RunStatus;

/** A chat message of a run's input (same shape as the runners' `ChatMessage`). */
export interface RunMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** Data of a `v1-runs` job. The input lives only here; the record holds the outcome. */
export interface V1RunJobData {
  runId: string;
  /** Model name the caller asked for (echoed back; the configured agent runs it). */
  model: string;
  messages: RunMessage[];
  /** The caller reads the reply as it is written: the worker streams the model's deltas as `run.delta` events. */
  stream?: boolean;
}

/** Why a run did not complete, with the HTTP status the gateway answers with. */
export interface RunErrorInfo {
  /** Stable code, e.g. `server_draining`, `model_error`, `run_cancelled`. */
  code: string;
  /** One or two sentences for the caller; no secrets. */
  message: string;
  /** 503 for drains, 502 for model failures, 409 for cancelled runs, 500 otherwise. */
  httpStatus: number;
}

/** Token usage as reported by the model. */
export interface RunUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** A run as stored. Times are epoch ms. */
export interface V1RunRecord {
  id: string;
  status: V1RunStatus;
  model: string;
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  output: string | null;
  usage: RunUsage | null;
  error: RunErrorInfo | null;
  /** `POST /v1/runs/:id/stop` was called while the run was running. */
  stopRequested: boolean;
}

/** One event of a run's stream; `id` is the Redis stream id. */
export interface RunEvent {
  id: string;
  /**
   * `run.queued`, `run.started`, `run.requeued`, `run.completed`, `run.failed`, `run.cancelled`, `run.interrupted`;
   * while running also `tool.called`, `tool.result` and (streamed runs) `run.delta`.
   */
  type: string;
  data: Record<string, unknown>;
}

/** The error of a run aborted by a drain (docs/DESIGN.md §9): retryable, 503. */
export const DRAIN_ERROR: RunErrorInfo = {
  code: 'server_draining',
  message: 'The server is shutting down and the run was interrupted before it finished; retry the request.',
  httpStatus: 503,
};

/** The error of a run stopped through `POST /v1/runs/:id/stop`. */
export const CANCELLED_ERROR: RunErrorInfo = {
  code: 'run_cancelled',
  message: 'The run was stopped before it finished.',
  httpStatus: 409,
};

const TRANSITION = luaScript('transition-v1-run-2.lua');
const APPEND_RUNNING_EVENT = luaScript('append-running-v1-event-2.lua');
const STOP = luaScript('stop-v1-run-2.lua');
const REQUEUE = luaScript('requeue-v1-run-2.lua');
const CLAIM_IDEMPOTENCY_KEY = luaScript('claim-idempotency-key-1.lua');

/** Outcome of `claimIdempotencyKey`. */
export type IdempotencyClaim =
  | { status: 'new' }
  | { status: 'replay'; runId: string }
  | { status: 'conflict'; runId: string };

/** Records, events and idempotency keys of `/v1` runs. */
export class RunStore {
  /**
   * @param redis - non-blocking client
   * @param ttlSeconds - how long records, events and idempotency keys live (`gateway.run_ttl_seconds`)
   */
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly ttlSeconds: number,
  ) {}

  /**
   * Claim an `Idempotency-Key` for a new run.
   * @param keyDigest - SHA-256 of the key (keys are caller secrets of a sort; never stored raw)
   * @param payloadDigest - SHA-256 of the canonical request body
   * @returns `new` when the key was free (now bound to `runId`), `replay` when the same
   *   payload was sent before under it, `conflict` when a different payload was
   */
  async claimIdempotencyKey(keyDigest: string, payloadDigest: string, runId: string): Promise<IdempotencyClaim> {
    const cur = (await runLuaScript(
      this.redis, CLAIM_IDEMPOTENCY_KEY, [this.keys.runIdempotency(keyDigest)], [`${runId} ${payloadDigest}`, String(this.ttlSeconds)],
    )) as string;
    if (cur === '') return { status: 'new' };
    const [existingRun = '', existingDigest = ''] = cur.split(' ');
    return existingDigest === payloadDigest ? { status: 'replay', runId: existingRun } : { status: 'conflict', runId: existingRun };
  }

  /** Release a claimed key whose run could not be queued (so a retry is not replayed to nothing). */
  async releaseIdempotencyKey(keyDigest: string, runId: string): Promise<void> {
    const key = this.keys.runIdempotency(keyDigest);
    const cur = await this.redis.get(key);
    if (cur?.startsWith(`${runId} `)) await this.redis.del(key);
  }

  /** Store a new queued run and its `run.queued` event. */
  async create(runId: string, model: string, now = Date.now()): Promise<V1RunRecord> {
    const record: V1RunRecord = {
      id: runId, status: 'queued', model, createdAt: now, startedAt: null, finishedAt: null,
      output: null, usage: null, error: null, stopRequested: false,
    };
    const ttl = String(this.ttlSeconds);
    await this.redis
      .multi()
      .hset(this.keys.run(runId), { id: runId, status: 'queued', model, created_at: String(now) })
      .expire(this.keys.run(runId), ttl)
      .xadd(this.keys.runEvents(runId), '*', 'type', 'run.queued', 'data', JSON.stringify({ model, created_at: now }))
      .expire(this.keys.runEvents(runId), ttl)
      .exec();
    return record;
  }

  /** The run, or `null` when unknown or expired. */
  async get(runId: string): Promise<V1RunRecord | null> {
    const h = await this.redis.hgetall(this.keys.run(runId));
    if (!h.status) return null;
    const num = (v: string | undefined) => (v === undefined || v === '' ? null : Number(v));
    return {
      id: runId,
      status: h.status as V1RunStatus,
      model: h.model ?? '',
      createdAt: Number(h.created_at ?? 0),
      startedAt: num(h.started_at),
      finishedAt: num(h.finished_at),
      output: h.output ?? null,
      usage: h.usage ? (JSON.parse(h.usage) as RunUsage) : null,
      error: h.error ? (JSON.parse(h.error) as RunErrorInfo) : null,
      stopRequested: h.stop_requested === '1',
    };
  }

  /**
   * `queued → running`.
   * @param retake - also take a run that is `running` (its job stalled: the previous worker died)
   * @returns false when the run is no longer queued (cancelled, ended, or taken by another worker)
   */
  async markRunning(runId: string, workerId: string, options: { retake?: boolean; now?: number } = {}): Promise<boolean> {
    const now = options.now ?? Date.now();
    return await this.transition(runId, 'running', 'run.started', { started_at: now }, options.retake ? ['queued', 'running'] : ['queued'], {
      started_at: String(now), worker: workerId,
    });
  }

  /**
   * Hand a run back: `running → queued` (or `interrupted → queued` for a retry of a run an
   * older version ended so), with a `run.requeued` event; the caller re-queues its job.
   * @param reason - why, for the event (`drain`, `retry`)
   * @returns false when the run is not in one of `from` (it completed, was cancelled, …)
   */
  async requeue(runId: string, from: V1RunRequeueStatus[], reason: string, now = Date.now()): Promise<boolean> {
    const code = (await runLuaScript(
      this.redis, REQUEUE, [this.keys.run(runId), this.keys.runEvents(runId)],
      [String(this.ttlSeconds), JSON.stringify({ reason, at: now }), from.join(',')],
    )) as number;
    return code === 1;
  }

  /** `running → completed` with the reply. @returns false when the run already ended (stopped, interrupted). */
  async complete(runId: string, output: string, usage: RunUsage | undefined, now = Date.now()): Promise<boolean> {
    const fields: Record<string, string> = { output, finished_at: String(now) };
    if (usage) fields.usage = JSON.stringify(usage);
    return await this.transition(runId, 'completed', 'run.completed', { output, usage: usage ?? null, finished_at: now }, ['running'], fields);
  }

  /**
   * End a run that did not complete: `failed`, `cancelled` or `interrupted`.
   * A queued run can end this way too (a drain before it started).
   * @returns false when the run had already ended
   */
  async end(runId: string, status: V1RunEndStatus, error: RunErrorInfo, now = Date.now()): Promise<boolean> {
    return await this.transition(runId, status, `run.${status}`, { error, finished_at: now }, ['queued', 'running'], {
      error: JSON.stringify(error), finished_at: String(now),
    });
  }

  /**
   * Ask a run to stop. A queued run is cancelled at once; a running one is
   * flagged and its worker aborts it (it polls the flag).
   * @returns `cancelled`, `stopping`, `missing`, or the terminal status it already had
   */
  async requestStop(runId: string, now = Date.now()): Promise<V1StopOutcome> {
    return (await runLuaScript(
      this.redis, STOP, [this.keys.run(runId), this.keys.runEvents(runId)], [String(this.ttlSeconds), JSON.stringify(CANCELLED_ERROR), String(now)],
    )) as V1StopOutcome;
  }

  /** Whether a stop was requested for a running run. */
  async stopRequested(runId: string): Promise<boolean> {
    return (await this.redis.hget(this.keys.run(runId), 'stop_requested')) === '1';
  }

  /**
   * Append an event of a running run (`tool.called`, `tool.result`, `run.delta`).
   * Nothing is appended once the run has ended, so a terminal event is always last.
   * @returns the event id, or `null` when the run is not running
   */
  async addEvent(runId: string, type: string, data: Record<string, unknown>): Promise<string | null> {
    const id = (await runLuaScript(this.redis, APPEND_RUNNING_EVENT, [this.keys.run(runId), this.keys.runEvents(runId)], [type, JSON.stringify(data)])) as string;
    return id === '' ? null : id;
  }

  /**
   * Events after `afterId` (exclusive; `0` = from the start).
   * @param blocking - a connection of its own when `blockMs` is set (XREAD BLOCK holds it)
   * @param blockMs - wait up to this long for the next event
   */
  async readEvents(blocking: RedisClient, runId: string, afterId: string, blockMs?: number): Promise<RunEvent[]> {
    const key = this.keys.runEvents(runId);
    const res =
      blockMs !== undefined
        ? await blocking.xread('COUNT', '100', 'BLOCK', String(Math.max(1, Math.round(blockMs))), 'STREAMS', key, afterId)
        : await blocking.xread('COUNT', '100', 'STREAMS', key, afterId);
    if (!res) return [];
    return res[0]![1].map(([id, fields]) => parseStreamEntry(id, fields));
  }

  private async transition(
    runId: string,
    status: V1RunStatus,
    eventType: string,
    eventData: Record<string, unknown>,
    from: V1RunStatus[],
    fields: Record<string, string>,
  ): Promise<boolean> {
    const pairs = Object.entries(fields).flat();
    const [code] = (await runLuaScript(
      this.redis, TRANSITION, [this.keys.run(runId), this.keys.runEvents(runId)],
      [status, String(this.ttlSeconds), eventType, JSON.stringify(eventData), from.join(','), ...pairs],
    )) as [number, string];
    return code === 1;
  }
}

/** True for `run.completed`, `run.failed`, `run.cancelled`, `run.interrupted`. */
export function isTerminalRunEvent(type: string): boolean {
  return TERMINAL_V1_RUN_STATUSES.some((s) => type === `run.${s}`);
}

/**
 * Open the `v1-runs` queue (producer side; workers attach a BullMQ Worker to
 * `QUEUES.v1Runs`). Jobs run once: a run whose caller already got an answer is
 * never retried; only a stalled job (dead worker) is taken over.
 * @param log - where its connection errors are logged (rate-limited, see `logBullmqErrors`)
 */
export function v1RunsQueue(keys: Keys, connection: RedisClient | ConnectionOptions, log?: Logger): Queue<V1RunJobData> {
  return logBullmqErrors(new Queue<V1RunJobData>(QUEUES.v1Runs, {
    connection: connection as ConnectionOptions,
    prefix: keys.bullPrefix,
    defaultJobOptions: { ...JOB_RETENTION, attempts: 1 },
  }), QUEUES.v1Runs, log);
}
