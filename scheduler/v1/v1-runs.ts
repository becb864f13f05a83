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
 *
 * Every run is in an index by creation time (`GET /v1/runs`, newest first, paged), trimmed to
 * the runs' time-to-live. A run made by `POST /v1/responses` also stores its conversation
 * (the messages it was asked with, without the request's instructions), so a later request can
 * continue it (`previous_response_id`); it lives and expires with the run's record.
 */
import { Queue, type ConnectionOptions } from 'bullmq';
import type { Logger } from '../logger.ts';
import { logBullmqErrors } from '../store/redis/bullmq-errors.ts';
import type { RedisClient } from '../store/redis/connection-factory.ts';
import { QUEUES, type Keys } from '../store/keys.ts';
import { JOB_RETENTION } from '../store/queues.ts';
import { luaScript, runLuaScript } from '../store/redis/lua-script.ts';
import { parseStreamEntry } from '../session/session-store.ts';
import type { FinishReason, ModelParams } from '../model-params.ts';

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
  /** Model name the caller asked for, echoed back (`agentModel` says which model runs it). */
  model: string;
  messages: RunMessage[];
  /** The caller reads the reply as it is written: the worker streams the model's deltas as `run.delta` events. */
  stream?: boolean;
  /** A model the operator declared (`agent.models.<name>`) to run on; unset = the primary model. */
  agentModel?: string;
  /** The caller's sampling and output parameters, sent with every model call of the turn. */
  params?: ModelParams;
}

/** Which endpoint made a run. */
export type V1RunEndpoint = 'chat.completions' | 'runs' | 'responses';

/** What `RunStore.create` stores besides the run's status. */
export interface V1RunCreateInput {
  endpoint?: V1RunEndpoint;
  /** Fields of the request the run's answer echoes (`POST /v1/responses`: instructions, previous_response_id, …). */
  request?: Record<string, unknown>;
  /** The messages of a `/v1/responses` conversation so far (this request's input included, its instructions not). */
  conversation?: RunMessage[];
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
  /** Why the model stopped its answer (`stop`, `length`, `content_filter`, …), as the endpoint said; null before it completed. */
  finishReason: FinishReason | null;
  error: RunErrorInfo | null;
  /** `POST /v1/runs/:id/stop` was called while the run was running. */
  stopRequested: boolean;
  /** Which endpoint made it (null for records of older versions). */
  endpoint: V1RunEndpoint | null;
  /** See `V1RunCreateInput.request`. */
  request: Record<string, unknown> | null;
}

/**
 * A run as it is stored when queued (`RunStore.create`): nothing started, nothing answered.
 * @param now - its creation time, epoch ms
 * @param input - the endpoint and the request fields its answer echoes (absent: `null`)
 */
export function queuedRunRecord(runId: string, model: string, now: number, input: V1RunCreateInput = {}): V1RunRecord {
  return {
    id: runId,
    status: 'queued',
    model,
    createdAt: now,
    startedAt: null,
    finishedAt: null,
    output: null,
    usage: null,
    finishReason: null,
    error: null,
    stopRequested: false,
    endpoint: input.endpoint ?? null,
    request: input.request ?? null,
  };
}

/** One page of `RunStore.list`. */
export interface V1RunPage {
  runs: V1RunRecord[];
  /** More runs follow the last one. */
  hasMore: boolean;
}

/** The hash fields `get` reads (the conversation is read on its own: it may be large). */
const RECORD_FIELDS = [
  'status',
  'model',
  'created_at',
  'started_at',
  'finished_at',
  'output',
  'usage',
  'finish_reason',
  'error',
  'stop_requested',
  'endpoint',
  'request',
] as const;

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
export type IdempotencyClaim = { status: 'new' } | { status: 'replay'; runId: string } | { status: 'conflict'; runId: string };

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
      this.redis,
      CLAIM_IDEMPOTENCY_KEY,
      [this.keys.runIdempotency(keyDigest)],
      [`${runId} ${payloadDigest}`, String(this.ttlSeconds)],
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

  /** Store a new queued run and its `run.queued` event, and index it. */
  async create(runId: string, model: string, now = Date.now(), input: V1RunCreateInput = {}): Promise<V1RunRecord> {
    const record = queuedRunRecord(runId, model, now, input);
    const ttl = String(this.ttlSeconds);
    const fields: Record<string, string> = { id: runId, status: 'queued', model, created_at: String(now) };
    if (input.endpoint) fields.endpoint = input.endpoint;
    if (input.request) fields.request = JSON.stringify(input.request);
    if (input.conversation) fields.conversation = JSON.stringify(input.conversation);
    await this.redis
      .multi()
      .hset(this.keys.run(runId), fields)
      .expire(this.keys.run(runId), ttl)
      .xadd(this.keys.runEvents(runId), '*', 'type', 'run.queued', 'data', JSON.stringify({ model, created_at: now }))
      .expire(this.keys.runEvents(runId), ttl)
      .zadd(this.keys.runIndex, now, runId)
      // Runs older than the time-to-live have expired: the index forgets them too.
      .zremrangebyscore(this.keys.runIndex, '-inf', `(${now - this.ttlSeconds * 1000}`)
      .expire(this.keys.runIndex, ttl)
      .exec();
    return record;
  }

  /** The run, or `null` when unknown or expired. */
  async get(runId: string): Promise<V1RunRecord | null> {
    const values = await this.redis.hmget(this.keys.run(runId), ...RECORD_FIELDS);
    return recordOf(runId, values);
  }

  /** The conversation a `/v1/responses` run stored (see `V1RunCreateInput.conversation`), or null. */
  async conversation(runId: string): Promise<RunMessage[] | null> {
    const v = await this.redis.hget(this.keys.run(runId), 'conversation');
    return v ? (JSON.parse(v) as RunMessage[]) : null;
  }

  /**
   * Runs newest first, `limit` at a time.
   * @param after - the id of the last run of the previous page; `undefined` = from the newest
   * @returns null when `after` names no run in the index
   */
  async list(limit: number, after?: string): Promise<V1RunPage | null> {
    let start = 0;
    if (after !== undefined) {
      const rank = await this.redis.zrevrank(this.keys.runIndex, after);
      if (rank === null) return null;
      start = rank + 1;
    }
    const runs: V1RunRecord[] = [];
    // One more than a page tells whether more follow. Ids whose record expired or was deleted
    // are skipped and dropped from the index (the ranks after them move up by as many).
    for (let pos = start, rounds = 0; runs.length <= limit && rounds < 20; rounds++) {
      const ids = await this.redis.zrevrange(this.keys.runIndex, pos, pos + limit);
      if (ids.length === 0) break;
      const pipe = this.redis.pipeline();
      for (const id of ids) pipe.hmget(this.keys.run(id), ...RECORD_FIELDS);
      const results = (await pipe.exec()) ?? [];
      const gone: string[] = [];
      for (const [i, id] of ids.entries()) {
        const [err, values] = results[i] ?? [];
        const record = err ? null : recordOf(id, values as Array<string | null>);
        if (record) runs.push(record);
        else gone.push(id);
      }
      if (gone.length > 0) await this.redis.zrem(this.keys.runIndex, ...gone);
      if (ids.length <= limit) break;
      pos += ids.length - gone.length;
    }
    return { runs: runs.slice(0, limit), hasMore: runs.length > limit };
  }

  /**
   * Delete a run's record, events and index entry (`DELETE /v1/responses/:id`); a running run
   * sees its record gone and stops (`stopRequested`).
   * @returns false when there was no such run
   */
  async delete(runId: string): Promise<boolean> {
    const res = await this.redis.multi().del(this.keys.run(runId)).del(this.keys.runEvents(runId)).zrem(this.keys.runIndex, runId).exec();
    return Number(res?.[0]?.[1] ?? 0) > 0;
  }

  /**
   * `queued → running`.
   * @param retake - also take a run that is `running` (its job stalled: the previous worker died)
   * @returns false when the run is no longer queued (cancelled, ended, or taken by another worker)
   */
  async markRunning(runId: string, workerId: string, options: { retake?: boolean; now?: number } = {}): Promise<boolean> {
    const now = options.now ?? Date.now();
    return await this.transition(
      runId,
      'running',
      'run.started',
      { started_at: now },
      options.retake ? ['queued', 'running'] : ['queued'],
      {
        started_at: String(now),
        worker: workerId,
      },
    );
  }

  /**
   * Hand a run back: `running → queued` (or `interrupted → queued` for a retry of a run an
   * older version ended so), with a `run.requeued` event; the caller re-queues its job.
   * @param reason - why, for the event (`drain`, `retry`)
   * @returns false when the run is not in one of `from` (it completed, was cancelled, …)
   */
  async requeue(runId: string, from: V1RunRequeueStatus[], reason: string, now = Date.now()): Promise<boolean> {
    const code = (await runLuaScript(
      this.redis,
      REQUEUE,
      [this.keys.run(runId), this.keys.runEvents(runId)],
      [String(this.ttlSeconds), JSON.stringify({ reason, at: now }), from.join(',')],
    )) as number;
    return code === 1;
  }

  /**
   * `running → completed` with the reply and why the model stopped it (`finishReason`, default `stop`).
   * @returns false when the run already ended (stopped, interrupted)
   */
  async complete(
    runId: string,
    output: string,
    usage: RunUsage | undefined,
    now = Date.now(),
    finishReason: FinishReason = 'stop',
  ): Promise<boolean> {
    const fields: Record<string, string> = { output, finished_at: String(now), finish_reason: finishReason };
    if (usage) fields.usage = JSON.stringify(usage);
    return await this.transition(
      runId,
      'completed',
      'run.completed',
      { output, usage: usage ?? null, finish_reason: finishReason, finished_at: now },
      ['running'],
      fields,
    );
  }

  /**
   * End a run that did not complete: `failed`, `cancelled` or `interrupted`.
   * A queued run can end this way too (a drain before it started).
   * @returns false when the run had already ended
   */
  async end(runId: string, status: V1RunEndStatus, error: RunErrorInfo, now = Date.now()): Promise<boolean> {
    return await this.transition(runId, status, `run.${status}`, { error, finished_at: now }, ['queued', 'running'], {
      error: JSON.stringify(error),
      finished_at: String(now),
    });
  }

  /**
   * Ask a run to stop. A queued run is cancelled at once; a running one is
   * flagged and its worker aborts it (it polls the flag).
   * @returns `cancelled`, `stopping`, `missing`, or the terminal status it already had
   */
  async requestStop(runId: string, now = Date.now()): Promise<V1StopOutcome> {
    return (await runLuaScript(
      this.redis,
      STOP,
      [this.keys.run(runId), this.keys.runEvents(runId)],
      [String(this.ttlSeconds), JSON.stringify(CANCELLED_ERROR), String(now)],
    )) as V1StopOutcome;
  }

  /** Whether a stop was requested for a running run, or its record is gone (deleted, expired): nobody waits for it. */
  async stopRequested(runId: string): Promise<boolean> {
    const [stop, status] = await this.redis.hmget(this.keys.run(runId), 'stop_requested', 'status');
    return stop === '1' || status === null;
  }

  /**
   * Append an event of a running run (`tool.called`, `tool.result`, `run.delta`).
   * Nothing is appended once the run has ended, so a terminal event is always last.
   * @returns the event id, or `null` when the run is not running
   */
  async addEvent(runId: string, type: string, data: Record<string, unknown>): Promise<string | null> {
    const id = (await runLuaScript(
      this.redis,
      APPEND_RUNNING_EVENT,
      [this.keys.run(runId), this.keys.runEvents(runId)],
      [type, JSON.stringify(data)],
    )) as string;
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
      this.redis,
      TRANSITION,
      [this.keys.run(runId), this.keys.runEvents(runId)],
      [status, String(this.ttlSeconds), eventType, JSON.stringify(eventData), from.join(','), ...pairs],
    )) as [number, string];
    return code === 1;
  }
}

/** A record from its `RECORD_FIELDS` values, or null when it has none (unknown, expired, deleted). */
function recordOf(runId: string, values: ReadonlyArray<string | null | undefined>): V1RunRecord | null {
  const h = Object.fromEntries(RECORD_FIELDS.map((f, i) => [f, values[i] ?? undefined])) as Partial<
    Record<(typeof RECORD_FIELDS)[number], string>
  >;
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
    finishReason: h.finish_reason ?? (h.status === 'completed' ? 'stop' : null),
    error: h.error ? (JSON.parse(h.error) as RunErrorInfo) : null,
    stopRequested: h.stop_requested === '1',
    endpoint: (h.endpoint as V1RunEndpoint | undefined) ?? null,
    request: h.request ? (JSON.parse(h.request) as Record<string, unknown>) : null,
  };
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
  return logBullmqErrors(
    new Queue<V1RunJobData>(QUEUES.v1Runs, {
      connection,
      prefix: keys.bullPrefix,
      defaultJobOptions: { ...JOB_RETENTION, attempts: 1 },
    }),
    QUEUES.v1Runs,
    log,
  );
}
