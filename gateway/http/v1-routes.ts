/**
 * The OpenAI-compatible `/v1` API (docs/DESIGN.md §8). Every request that needs the
 * model becomes a `v1-runs` job that a worker runs (worker/v1-run-processor.ts);
 * the gateway only queues it and relays the result from the run's record and
 * event stream in Redis (scheduler/v1/v1-runs.ts).
 *
 * - `POST /v1/chat/completions` waits for the run and answers a `chat.completion`,
 *   or with `stream: true` an SSE stream of `chat.completion.chunk`s: the role
 *   chunk at once, then the model's content deltas as the worker writes them
 *   to the run's event stream (`run.delta`), then the stop chunk, a usage chunk
 *   with empty `choices` when `stream_options.include_usage` is set, and
 *   `data: [DONE]`; an error mid-stream is an error chunk, then `[DONE]`.
 *   `n` > 1 is refused (one agent, one answer), and so is a request that
 *   brings its own `tools` or `functions`: the agent's tools are the operator's.
 * - `POST /v1/runs` answers 202 with a run id at once; `GET /v1/runs/:id`,
 *   `GET /v1/runs/:id/events` (SSE, `Last-Event-ID` resumes) and
 *   `POST /v1/runs/:id/stop` follow it.
 * - `Idempotency-Key` (both POSTs): the same key with the same body attaches to
 *   the same run (its result when it has one, else the caller waits for it; an
 *   `interrupted` run is queued again); with a different body it is a 409.
 *   Keys are stored as SHA-256.
 * - A run cut by a worker's drain is handed back and completed by another
 *   worker (worker/v1-run-processor.ts): a caller still waiting gets that
 *   answer (`run.requeued` is not an end).
 * - Waiting callers are tracked for the drain (gateway/drain.ts): at its
 *   deadline they get a 503, never a hang; a run that outlives the wait keeps
 *   its result in `GET /v1/runs/:id`.
 */
import { createHash, randomBytes } from 'node:crypto';
import { Router, type Request, type Response } from 'express';
import type { Queue } from 'bullmq';
import type { Keys } from '../../scheduler/store/keys.ts';
import { isStreamId, type StreamEntry, type StreamFanout } from '../stream-fanout.ts';
import type { Logger } from 'pino';
import { z } from 'zod';
import {
  isTerminalRunEvent, type RunEvent, type RunMessage, type RunStore, type V1RunJobData, type V1RunRecord,
} from '../../scheduler/v1/v1-runs.ts';
import { DrainAbort, type InflightRuns } from '../drain.ts';
import { HttpError, errorBody, storeUnavailableError, toHttpError, typeForStatus } from './errors.ts';
import { entryFrame, lastEventId, openSse, type SseStream } from './sse.ts';

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

/** The model id the gateway always lists. */
export const HERMES_MODEL_ID = 'hermes-agent';

const textPart = z.object({ type: z.literal('text'), text: z.string() }).loose();
const contentSchema = z.union([z.string(), z.array(textPart).min(1)]);
const messageSchema = z
  .object({
    role: z.enum(['system', 'developer', 'user', 'assistant']),
    content: contentSchema,
    name: z.string().optional(),
  })
  .loose();

/** `POST /v1/chat/completions` body: the fields the gateway uses; other OpenAI fields are accepted and ignored. */
export const chatCompletionSchema = z
  .object({
    model: z.string().min(1).max(200).optional(),
    messages: z.array(messageSchema).min(1, 'messages must hold at least one message'),
    stream: z.boolean().optional(),
    stream_options: z.object({ include_usage: z.boolean().optional() }).loose().nullish(),
    n: z.number().int().min(1).nullish(),
  })
  .loose();

/**
 * Refuse what one agent cannot honour: several choices, and tools the caller declares
 * (tools come only from the operator's config; docs/TOOLS.md).
 * @throws HttpError 400
 */
function assertAgentRequest(body: Record<string, unknown>): void {
  if (typeof body.n === 'number' && body.n > 1) {
    throw new HttpError(400, 'n must be 1: the agent gives one answer per request.', 'invalid_request_error', 'unsupported_n', 'n');
  }
  for (const param of ['tools', 'functions', 'tool_choice', 'function_call'] as const) {
    const value = body[param];
    // An empty list declares nothing (some client wrappers always send `tools: []`).
    if (value !== undefined && value !== null && !(Array.isArray(value) && value.length === 0)) {
      throw new HttpError(
        400,
        `${param} is not accepted: the agent's tools are declared by the operator in the config, never by a request.`,
        'invalid_request_error', 'client_tools_not_allowed', param,
      );
    }
  }
}

/** `POST /v1/runs` body. */
export const runRequestSchema = z
  .object({
    model: z.string().min(1).max(200).optional(),
    /** A prompt, or chat messages. */
    input: z.union([z.string().min(1, 'input must not be empty'), z.array(messageSchema).min(1)]),
    /** Extra system instructions, sent before the input. */
    instructions: z.string().optional(),
  })
  .strict();

/** How often an open run event stream checks that its run has not expired, ms. */
const RUN_EXPIRY_CHECK_MS = 30_000;

/**
 * The OpenAI-compatible `/v1` router. Each request becomes a `v1-runs` job that a worker runs;
 * the caller waits for its result (503 when the gateway drains past `agent.cron_drain_timeout`).
 */
export function v1Router(deps: V1Deps): Router {
  const router = Router();

  router.use((_req, _res, next) => {
    if (deps.inflight.draining) {
      next(new HttpError(503, 'The gateway is shutting down; retry the request shortly.', 'service_unavailable', 'server_draining'));
      return;
    }
    next();
  });

  router.get('/models', (_req, res) => {
    const created = Math.floor(Date.now() / 1000);
    const ids = [...new Set([HERMES_MODEL_ID, deps.model])];
    res.json({ object: 'list', data: ids.map((id) => ({ id, object: 'model', created, owned_by: 'hermes' })) });
  });

  router.post('/chat/completions', async (req, res) => {
    const body = chatCompletionSchema.parse(req.body);
    assertAgentRequest(body);
    const messages = toRunMessages(body.messages, deps.maxPromptChars);
    const model = body.model ?? HERMES_MODEL_ID;
    deps.fanout.assertCapacity(); // 429 before a run is queued that nobody could wait for
    const { runId } = await startRun(deps, req, 'chat.completions', { model, messages, ...(body.stream ? { stream: true } : {}) }, body);
    res.set('X-Hermes-Run-Id', runId);
    const created = Math.floor(Date.now() / 1000);
    const id = `chatcmpl-${runId}`;
    if (!body.stream) {
      const clientGone = closeSignal(res);
      const record = await deps.inflight.track(runId, (drain) => waitForRun(deps, runId, AbortSignal.any([drain, clientGone])));
      res.json({
        id, object: 'chat.completion', created, model,
        choices: [{ index: 0, message: { role: 'assistant', content: record.output ?? '' }, finish_reason: 'stop' }],
        usage: record.usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
      });
      return;
    }
    const sse = trackStream(deps, openSse(req, res, { maxBufferedBytes: deps.sseMaxBufferedBytes, log: deps.log }));
    const chunk = (delta: Record<string, unknown>, finish: string | null, extra: Record<string, unknown> = {}) => ({
      id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, finish_reason: finish }], ...extra,
    });
    sse.send({ data: chunk({ role: 'assistant', content: '' }, null) });
    // Deltas are forwarded as they arrive; once a run was handed back to another worker after
    // deltas went out, later deltas would repeat them, so only the final text's unsent rest follows.
    let sent = '';
    let requeuedAfterDeltas = false;
    const onEvent = (e: RunEvent) => {
      if (e.type === 'run.requeued' && sent.length > 0) requeuedAfterDeltas = true;
      if (e.type !== 'run.delta' || requeuedAfterDeltas) return;
      const text = String(e.data.text ?? '');
      if (text.length === 0) return;
      sent += text;
      sse.send({ data: chunk({ content: text }, null) });
    };
    try {
      const record = await deps.inflight.track(runId, (drain) => waitForRun(deps, runId, AbortSignal.any([drain, sse.signal]), onEvent));
      const output = record.output ?? '';
      if (sent.length === 0 && output) sse.send({ data: chunk({ content: output }, null) });
      else if (requeuedAfterDeltas && output.startsWith(sent) && output.length > sent.length) sse.send({ data: chunk({ content: output.slice(sent.length) }, null) });
      sse.send({ data: chunk({}, 'stop') });
      if (body.stream_options?.include_usage) {
        sse.send({ data: { id, object: 'chat.completion.chunk', created, model, choices: [], usage: record.usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } } });
      }
      sse.send({ data: '[DONE]' });
    } catch (err) {
      const e = toHttpError(err);
      if (!sse.signal.aborted) {
        sse.send({ data: errorBody(e.message, e.type, e.code, e.param) });
        sse.send({ data: '[DONE]' });
      }
    } finally {
      sse.close();
    }
  });

  router.post('/runs', async (req, res) => {
    const body = runRequestSchema.parse(req.body);
    const messages: RunMessage[] = [];
    if (body.instructions) messages.push({ role: 'system', content: body.instructions });
    messages.push(...(typeof body.input === 'string' ? [{ role: 'user' as const, content: body.input }] : toRunMessages(body.input, deps.maxPromptChars)));
    if (typeof body.input === 'string') assertSize(body.input, 'input', deps.maxPromptChars);
    const model = body.model ?? HERMES_MODEL_ID;
    const { runId, replayed } = await startRun(deps, req, 'runs', { model, messages }, body);
    const record = await deps.runs.get(runId);
    if (!record) throw new HttpError(404, `Run ${runId} has expired.`, 'not_found_error', 'run_not_found');
    if (replayed) res.set('Idempotent-Replayed', 'true');
    res.status(replayed ? 200 : 202).json(runObject(record));
  });

  router.get('/runs/:id', async (req, res) => {
    res.json(runObject(await getRun(deps, String(req.params.id))));
  });

  router.post('/runs/:id/stop', async (req, res) => {
    const runId = String(req.params.id);
    const outcome = await deps.runs.requestStop(runId);
    if (outcome === 'missing') throw notFound(runId);
    if (outcome === 'completed' || outcome === 'failed' || outcome === 'interrupted') {
      throw new HttpError(409, `Run ${runId} already ended (${outcome}).`, 'conflict_error', 'run_already_ended');
    }
    deps.log.info({ runId, outcome }, 'v1 run stop requested');
    const record = await getRun(deps, runId);
    res.status(outcome === 'stopping' ? 202 : 200).json(runObject(record));
  });

  router.get('/runs/:id/events', async (req, res) => {
    const runId = String(req.params.id);
    await getRun(deps, runId);
    const after = lastEventId(req, '0');
    if (!isStreamId(after)) {
      throw new HttpError(400, 'Last-Event-ID must be an event id like 1700000000000-0.', 'invalid_request_error', 'invalid_event_id', 'Last-Event-ID');
    }
    let sse: SseStream | undefined;
    const sub = deps.fanout.subscribe(deps.keys.runEvents(runId), after, (events) => {
      for (const e of events) {
        sse?.sendFrame(entryFrame(e));
        if (isTerminalRunEvent(e.type)) sse?.close();
      }
    });
    const expiry = setInterval(() => {
      // A run that expires while a client follows it has no terminal event to end the stream.
      deps.runs.get(runId).then((r) => { if (!r) sse?.close(); }, () => {});
    }, RUN_EXPIRY_CHECK_MS);
    expiry.unref();
    sse = trackStream(deps, openSse(req, res, {
      onClose: () => {
        clearInterval(expiry);
        sub.close();
      },
      maxBufferedBytes: deps.sseMaxBufferedBytes, log: deps.log,
    }));
  });

  return router;
}

/** Express 5 forwards rejected promises of async handlers to the error handler. */

function toRunMessages(messages: z.infer<typeof messageSchema>[], maxChars: number): RunMessage[] {
  return messages.map((m, i) => {
    const content = typeof m.content === 'string' ? m.content : m.content.map((p) => p.text).join('\n');
    assertSize(content, `messages.${i}.content`, maxChars);
    return { role: m.role === 'developer' ? 'system' : m.role, content };
  });
}

function assertSize(text: string, param: string, maxChars: number): void {
  if (text.length > maxChars) {
    throw new HttpError(400, `${param} is ${text.length} characters; the limit is ${maxChars}.`, 'invalid_request_error', 'prompt_too_long', param);
  }
}

/** JSON with sorted keys, so equal bodies digest equally whatever their key order. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

/** A new run id: `run_` + 24 hex chars. */
export function newRunId(): string {
  return `run_${randomBytes(12).toString('hex')}`;
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
 * @throws HttpError 409 when the key was used with a different body
 */
async function startRun(
  deps: V1Deps,
  req: Request,
  endpoint: string,
  job: { model: string; messages: RunMessage[]; stream?: boolean },
  body: unknown,
): Promise<{ runId: string; replayed: boolean }> {
  const runId = newRunId();
  const idemKey = req.get('idempotency-key')?.trim();
  let keyDigest: string | undefined;
  if (idemKey) {
    if (idemKey.length > 255) throw new HttpError(400, 'Idempotency-Key is longer than 255 characters.', 'invalid_request_error', 'invalid_idempotency_key');
    keyDigest = sha256(idemKey);
    const claim = await deps.runs.claimIdempotencyKey(keyDigest, sha256(`${endpoint}\n${canonicalJson(body)}`), runId);
    if (claim.status === 'replay') {
      deps.log.info({ runId: claim.runId }, 'v1 request replayed by Idempotency-Key');
      // An unfinished run is attached to, never replayed as final: a run an older version
      // left `interrupted` is queued again (its input is this same request).
      if (await deps.runs.requeue(claim.runId, ['interrupted'], 'retry')) {
        await queueRun(deps, { runId: claim.runId, model: job.model, messages: job.messages, stream: job.stream }, `${claim.runId}-retry-${Date.now()}`);
        deps.log.info({ runId: claim.runId }, 'v1 run re-queued by a retry with its Idempotency-Key');
      }
      return { runId: claim.runId, replayed: true };
    }
    if (claim.status === 'conflict') {
      throw new HttpError(
        409, 'This Idempotency-Key was already used with a different request body.', 'conflict_error', 'idempotency_key_reused',
      );
    }
  }
  try {
    await deps.runs.create(runId, job.model);
    await queueRun(deps, { runId, model: job.model, messages: job.messages, stream: job.stream }, runId);
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
async function waitForRun(deps: V1Deps, runId: string, signal: AbortSignal, onEvent?: (e: RunEvent) => void): Promise<V1RunRecord> {
  if (signal.aborted) throw abortError(runId, signal);
  let sub: { close(): void } | undefined;
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  try {
    await new Promise<StreamEntry>((resolve, reject) => {
      onAbort = () => reject(abortError(runId, signal));
      signal.addEventListener('abort', onAbort, { once: true });
      timer = setTimeout(() => reject(new HttpError(
        504, `Run ${runId} did not finish within ${Math.round(deps.runTimeoutMs / 1000)}s; GET /v1/runs/${runId} shows its result later.`,
        'server_error', 'run_timeout',
      )), deps.runTimeoutMs);
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

function abortError(runId: string, signal: AbortSignal): HttpError {
  if (signal.reason instanceof DrainAbort) {
    return new HttpError(
      503,
      `The gateway is shutting down and stopped waiting for run ${runId}; GET /v1/runs/${runId} shows its result once it finishes.`,
      'service_unavailable', 'server_draining',
    );
  }
  return new HttpError(499, 'The client closed the request.', 'invalid_request_error', 'client_closed');
}

/** An AbortSignal fired when the client goes away before the answer was sent. */
function closeSignal(res: Response): AbortSignal {
  const c = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) c.abort();
  });
  return c.signal;
}

function trackStream(deps: V1Deps, sse: SseStream): SseStream {
  deps.streams.add(sse);
  sse.signal.addEventListener('abort', () => deps.streams.delete(sse), { once: true });
  return sse;
}

async function getRun(deps: V1Deps, runId: string): Promise<V1RunRecord> {
  const record = await deps.runs.get(runId);
  if (!record) throw notFound(runId);
  return record;
}

function notFound(runId: string): HttpError {
  return new HttpError(404, `No run ${runId} (unknown or expired).`, 'not_found_error', 'run_not_found', 'id');
}

/** The API shape of a run (times in epoch seconds, like OpenAI objects). */
export function runObject(r: V1RunRecord) {
  const sec = (ms: number | null) => (ms === null ? null : Math.floor(ms / 1000));
  return {
    id: r.id, object: 'run', status: r.status, model: r.model,
    created_at: sec(r.createdAt), started_at: sec(r.startedAt), finished_at: sec(r.finishedAt),
    output: r.output, usage: r.usage, error: r.error ? { code: r.error.code, message: r.error.message } : null,
    stop_requested: r.stopRequested,
  };
}
