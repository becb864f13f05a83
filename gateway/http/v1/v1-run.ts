/**
 * What every `/v1` endpoint that runs the agent shares (`/v1/chat/completions`, `/v1/responses`,
 * `/v1/runs`): the run machinery — queue a run (or attach to the run of an `Idempotency-Key`),
 * wait for it with the drain and the caller's disconnect, follow its deltas — and the model a
 * request may name. The endpoints differ only in how they read a request and write an answer.
 *
 * - `Idempotency-Key`: the same key with the same body (and endpoint) attaches to the same run
 *   (its result when it has one, else the caller waits for it; an `interrupted` run is queued
 *   again); with a different body it is a 409. Keys are stored as SHA-256.
 * - A run cut by a worker's drain is handed back and completed by another worker
 *   (worker/v1/v1-run-processor.ts): a caller still waiting gets that answer (`run.requeued` is not
 *   an end), and a streaming caller gets only the unsent rest of the final text.
 * - Waiting callers are tracked for the drain (gateway/drain.ts): at its deadline they get a
 *   503, never a hang; a run that outlives the wait keeps its result in `GET /v1/runs/:id`.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Request, Response } from 'express';
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { Keys } from '../../../scheduler/store/keys.ts';
import type { StreamEntry, StreamFanout } from '../../stream-fanout.ts';
import {
  isTerminalRunEvent,
  type RunEvent,
  type RunMessage,
  type RunStore,
  type V1RunCreateInput,
  type V1RunEndpoint,
  type V1RunJobData,
  type V1RunRecord,
} from '../../../scheduler/v1/v1-runs.ts';
import type { ModelParams } from '../../../scheduler/model-params.ts';
import { DrainAbort, type InflightRuns } from '../../drain.ts';
import { HttpError, storeUnavailableError, typeForStatus } from '../errors.ts';
import { entryFrame, openSse, type SseStream } from '../sse.ts';

/** What the `/v1` routes use. */
export interface V1Deps {
  runs: RunStore;
  queue: Queue<V1RunJobData>;
  /** Key names (run event streams). */
  keys: Keys;
  /** The gateway's one shared blocking reader: run event streams and waiting callers subscribe to it. */
  fanout: StreamFanout;
  inflight: InflightRuns;
  /** Model the agent runs (`agent.model`); listed by `/v1/models` next to `hermes-agent`. */
  model: string;
  /** Names of the models the operator declared (`agent.models`); listed by `/v1/models`, and a request may name one. */
  models?: readonly string[];
  /** `agent.max_prompt_chars`, per message. */
  maxPromptChars: number;
  /** `gateway.run_timeout_seconds` in ms. */
  runTimeoutMs: number;
  /** `gateway.redis_timeout_ms`: longest wait for queueing a run's job (BullMQ's connection has no command timeout). */
  queueTimeoutMs: number;
  /** Open SSE streams, closed when the server closes. */
  streams: Set<SseStream>;
  /** Unsent bytes an event stream may hold before its client is dropped (`api_server.sse_max_buffered_bytes`). */
  sseMaxBufferedBytes?: number;
  log: Logger;
}

/** The model id the gateway always lists: the agent on its primary model. */
export const HERMES_MODEL_ID = 'hermes-agent';

/** The ids `/v1/models` lists, in order: `hermes-agent`, the primary model, the declared names. */
export function servedModels(deps: Pick<V1Deps, 'model' | 'models'>): string[] {
  return [...new Set([HERMES_MODEL_ID, deps.model, ...(deps.models ?? [])])];
}

/** A request's model: the id echoed in the answer, and the declared name the worker runs (none = the primary model). */
export interface ResolvedModel {
  id: string;
  agentModel?: string;
}

/**
 * The model a request names, which must be one `/v1/models` lists; none = `hermes-agent`.
 * @throws HttpError 404 `model_not_found` (param `model`) for any other name
 */
export function resolveModel(deps: Pick<V1Deps, 'model' | 'models'>, name: string | undefined | null): ResolvedModel {
  if (name === undefined || name === null) return { id: HERMES_MODEL_ID };
  if (deps.models?.includes(name)) return { id: name, agentModel: name };
  if (name === HERMES_MODEL_ID || name === deps.model) return { id: name };
  throw new HttpError(
    404,
    `The model \`${name}\` does not exist on this server; it serves ${servedModels(deps)
      .map((m) => `\`${m}\``)
      .join(', ')} (GET /v1/models).`,
    'invalid_request_error',
    'model_not_found',
    'model',
  );
}

/** What `startRun` queues. */
export interface RunJob {
  model: ResolvedModel;
  messages: RunMessage[];
  stream?: boolean;
  params?: ModelParams;
}

/** A zero usage, for answers of runs whose model reported none. */
export const NO_USAGE = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } as const;

/** JSON with sorted keys, so equal bodies digest equally whatever their key order. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

/** A new run id: `run_` + 24 hex chars. */
export function newRunId(): string {
  return `run_${randomBytes(12).toString('hex')}`;
}

function jobData(runId: string, job: RunJob): V1RunJobData {
  return {
    runId,
    model: job.model.id,
    messages: job.messages,
    ...(job.stream ? { stream: true } : {}),
    ...(job.model.agentModel !== undefined ? { agentModel: job.model.agentModel } : {}),
    ...(job.params && Object.keys(job.params).length > 0 ? { params: job.params } : {}),
  };
}

/**
 * Queue a run's job, waiting at most `deps.queueTimeoutMs`.
 *
 * Policy: the BullMQ connection retries forever and has no command timeout, so
 * a Redis that died after the run record was written would hold the request
 * until Redis came back. Past the bound the caller gets the store-unavailable
 * 503 with `Retry-After` (as when Redis is away at the start of a request,
 * server.ts). The add may still reach Redis when it returns (ioredis replays
 * queued commands): the run then runs once with no caller waiting, and a retry
 * with the same `Idempotency-Key` (released on this error) starts a new run.
 * @throws HttpError 503 `store_unavailable` when the add did not finish in time
 */
async function queueRun(deps: V1Deps, data: V1RunJobData, jobId: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(storeUnavailableError(`queueing the run took over ${deps.queueTimeoutMs} ms`)), deps.queueTimeoutMs);
  });
  try {
    await Promise.race([deps.queue.add('v1-run', data, { jobId, attempts: 1 }), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Create and queue a run, or replay the run of an `Idempotency-Key`.
 * @param record - what the run's record keeps besides its status and endpoint (a response's conversation)
 * @throws HttpError 409 when the key was used with a different body
 */
export async function startRun(
  deps: V1Deps,
  req: Request,
  endpoint: V1RunEndpoint,
  job: RunJob,
  body: unknown,
  record: Omit<V1RunCreateInput, 'endpoint'> = {},
): Promise<{ runId: string; replayed: boolean }> {
  const runId = newRunId();
  const idemKey = req.get('idempotency-key')?.trim();
  let keyDigest: string | undefined;
  if (idemKey) {
    if (idemKey.length > 255)
      throw new HttpError(400, 'Idempotency-Key is longer than 255 characters.', 'invalid_request_error', 'invalid_idempotency_key');
    keyDigest = sha256(idemKey);
    const claim = await deps.runs.claimIdempotencyKey(keyDigest, sha256(`${endpoint}\n${canonicalJson(body)}`), runId);
    if (claim.status === 'replay') {
      deps.log.info({ runId: claim.runId }, 'v1 request replayed by Idempotency-Key');
      // An unfinished run is attached to, never replayed as final: a run an older version
      // left `interrupted` is queued again (its input is this same request).
      if (await deps.runs.requeue(claim.runId, ['interrupted'], 'retry')) {
        await queueRun(deps, jobData(claim.runId, job), `${claim.runId}-retry-${Date.now()}`);
        deps.log.info({ runId: claim.runId }, 'v1 run re-queued by a retry with its Idempotency-Key');
      }
      return { runId: claim.runId, replayed: true };
    }
    if (claim.status === 'conflict') {
      throw new HttpError(
        409,
        'This Idempotency-Key was already used with a different request body.',
        'conflict_error',
        'idempotency_key_reused',
      );
    }
  }
  try {
    await deps.runs.create(runId, job.model.id, Date.now(), { endpoint, ...record });
    await queueRun(deps, jobData(runId, job), runId);
  } catch (err) {
    if (keyDigest) await deps.runs.releaseIdempotencyKey(keyDigest, runId).catch(() => {});
    throw err;
  }
  deps.log.info({ runId, endpoint, messages: job.messages.length }, 'v1 run queued');
  return { runId, replayed: false };
}

/**
 * Wait until the run ends.
 * @param onEvent - sees every event of the run on the way (streamed deltas, tool calls)
 * @returns the completed run
 * @throws HttpError with the run's own error (503 when a drain interrupted it), 503 when
 *   the gateway's drain deadline passed, 504 after `runTimeoutMs`
 */
export async function waitForRun(deps: V1Deps, runId: string, signal: AbortSignal, onEvent?: (e: RunEvent) => void): Promise<V1RunRecord> {
  if (signal.aborted) throw abortError(runId, signal);
  let sub: { close(): void } | undefined;
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  try {
    await new Promise<StreamEntry>((resolve, reject) => {
      onAbort = () => reject(abortError(runId, signal));
      signal.addEventListener('abort', onAbort, { once: true });
      timer = setTimeout(
        () =>
          reject(
            new HttpError(
              504,
              `Run ${runId} did not finish within ${Math.round(deps.runTimeoutMs / 1000)}s; GET /v1/runs/${runId} shows its result later.`,
              'server_error',
              'run_timeout',
            ),
          ),
        deps.runTimeoutMs,
      );
      timer.unref();
      // `run.requeued` (a drain handed the run back) is not an end: the caller keeps waiting.
      sub = deps.fanout.subscribe(deps.keys.runEvents(runId), '0', (events) => {
        for (const e of events) onEvent?.(e);
        const end = events.find((e) => isTerminalRunEvent(e.type));
        if (end) resolve(end);
      });
    });
    const record = await getRun(deps, runId);
    if (record.status === 'completed') return record;
    const info = record.error ?? { code: 'run_failed', message: `Run ${runId} ${record.status}.`, httpStatus: 500 };
    throw new HttpError(info.httpStatus, info.message, typeForStatus(info.httpStatus), info.code);
  } finally {
    sub?.close();
    clearTimeout(timer);
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}

/**
 * Follows a streamed run's text for a caller: the deltas as they arrive, and after the run
 * completes, what of its final text the caller has not been sent. Once a run was handed back
 * to another worker after deltas went out, later deltas would repeat them, so only the final
 * text's unsent rest follows.
 */
export class DeltaFollower {
  private sent = '';
  private requeuedAfterDeltas = false;

  /** @param send - gets each piece of text to send */
  constructor(private readonly send: (text: string) => void) {}

  /** For `waitForRun`'s `onEvent`. */
  readonly onEvent = (e: RunEvent): void => {
    if (e.type === 'run.requeued' && this.sent.length > 0) this.requeuedAfterDeltas = true;
    if (e.type !== 'run.delta' || this.requeuedAfterDeltas) return;
    const text = typeof e.data.text === 'string' ? e.data.text : '';
    if (text.length === 0) return;
    this.sent += text;
    this.send(text);
  };

  /** Send what of the final `output` was not sent yet. */
  finish(output: string): void {
    if (this.sent.length === 0) {
      if (output) this.send(output);
    } else if (this.requeuedAfterDeltas && output.startsWith(this.sent) && output.length > this.sent.length) {
      this.send(output.slice(this.sent.length));
    }
  }
}

function abortError(runId: string, signal: AbortSignal): HttpError {
  if (signal.reason instanceof DrainAbort) {
    return new HttpError(
      503,
      `The gateway is shutting down and stopped waiting for run ${runId}; GET /v1/runs/${runId} shows its result once it finishes.`,
      'service_unavailable',
      'server_draining',
    );
  }
  return new HttpError(499, 'The client closed the request.', 'invalid_request_error', 'client_closed');
}

/** An AbortSignal fired when the client goes away before the answer was sent. */
export function closeSignal(res: Response): AbortSignal {
  const c = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) c.abort();
  });
  return c.signal;
}

/** Count an open event stream in `deps.streams` until it closes. */
export function trackStream(deps: V1Deps, sse: SseStream): SseStream {
  deps.streams.add(sse);
  sse.signal.addEventListener('abort', () => deps.streams.delete(sse), { once: true });
  return sse;
}

/** @throws HttpError 404 `run_not_found` for an unknown or expired run */
export async function getRun(deps: V1Deps, runId: string): Promise<V1RunRecord> {
  const record = await deps.runs.get(runId);
  if (!record) throw runNotFound(runId);
  return record;
}

export function runNotFound(runId: string): HttpError {
  return new HttpError(404, `No run ${runId} (unknown or expired).`, 'not_found_error', 'run_not_found', 'id');
}

/** How often an open run event stream checks that its run has not expired, ms. */
const RUN_EXPIRY_CHECK_MS = 30_000;

/**
 * Stream run `runId`'s events to the caller as SSE, from after event id `after`, on the gateway's
 * shared reader: the stream closes after the run's terminal event, or once the run has expired
 * (a run that expires while a client follows it has no terminal event to end the stream).
 */
export function followRunEvents(deps: V1Deps, req: Request, res: Response, runId: string, after: string): void {
  let sse: SseStream | undefined;
  const sub = deps.fanout.subscribe(deps.keys.runEvents(runId), after, (events) => {
    for (const e of events) {
      sse?.sendFrame(entryFrame(e));
      if (isTerminalRunEvent(e.type)) sse?.close();
    }
  });
  const expiry = setInterval(() => {
    deps.runs.get(runId).then(
      (r) => {
        if (!r) sse?.close();
      },
      () => {},
    );
  }, RUN_EXPIRY_CHECK_MS);
  expiry.unref();
  sse = trackStream(
    deps,
    openSse(req, res, {
      onClose: () => {
        clearInterval(expiry);
        sub.close();
      },
      maxBufferedBytes: deps.sseMaxBufferedBytes,
      log: deps.log,
    }),
  );
}
