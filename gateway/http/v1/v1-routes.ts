/**
 * The OpenAI-compatible `/v1` API (docs/DESIGN.md §8). Every request that needs the
 * model becomes a `v1-runs` job that a worker runs (worker/v1/v1-run-processor.ts);
 * the gateway only queues it and relays the result from the run's record and
 * event stream in Redis (scheduler/v1/v1-runs.ts). The run orchestration the endpoints
 * share — queueing, `Idempotency-Key`, waiting, the drain, hand-backs, following events — is in
 * v1-run.ts; the bodies' wire format in v1-schemas.ts; what each field of a body does in
 * v1-param-table.ts, applied by v1-params.ts.
 *
 * - `GET /v1/models` lists `hermes-agent`, the primary model (`agent.model`) and
 *   the models the operator declared (`agent.models`); a request's `model` must
 *   be one of them (404 `model_not_found` otherwise). A declared name runs on
 *   that model; the others on the primary one.
 * - `POST /v1/chat/completions` waits for the run and answers a `chat.completion`,
 *   or with `stream: true` an SSE stream of `chat.completion.chunk`s: the role
 *   chunk at once, then the model's content deltas as the worker writes them
 *   to the run's event stream (`run.delta`), then the finish chunk, and
 *   `data: [DONE]`; an error mid-stream is an error chunk, then `[DONE]`. With
 *   `stream_options.include_usage` every chunk carries `"usage": null` and a
 *   last chunk with empty `choices` carries the usage (field report F23);
 *   without it no chunk has empty `choices`. `finish_reason` is the model's own
 *   (`length`, `content_filter`, …; F24), in both forms.
 * - `POST /v1/responses` and `GET|DELETE /v1/responses/:id`: the Responses API (v1-responses.ts).
 * - `POST /v1/runs` answers 202 with a run id at once; `GET /v1/runs` lists runs
 *   newest first (`limit`, `after`); `GET /v1/runs/:id`, `GET /v1/runs/:id/events`
 *   (SSE, `Last-Event-ID` resumes) and `POST /v1/runs/:id/stop` follow one.
 */
import { Router } from 'express';
import type { RunMessage } from '../../../scheduler/v1/v1-runs.ts';
import { HttpError, errorBody, toHttpError } from '../errors.ts';
import { openSse, readAfterId } from '../sse.ts';
import {
  DeltaFollower,
  NO_USAGE,
  closeSignal,
  followRunEvents,
  getRun,
  resolveModel,
  runNotFound,
  servedModels,
  startRun,
  trackStream,
  waitForRun,
  type V1Deps,
} from './v1-run.ts';
import { assertFields, assertSize, parseBody, pickParams } from './v1-params.ts';
import { chatCompletionSchema, listQuerySchema, runObject, runRequestSchema, toRunMessages } from './v1-schemas.ts';
import { responsesRoutes } from './v1-responses.ts';

export type { V1Deps } from './v1-run.ts';

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
    res.json({ object: 'list', data: servedModels(deps).map((id) => ({ id, object: 'model', created, owned_by: 'hermes' })) });
  });

  router.post('/chat/completions', async (req, res) => {
    const body = parseBody(chatCompletionSchema, req.body);
    assertFields(body, 'chat');
    const model = resolveModel(deps, body.model);
    const messages = toRunMessages(body.messages, deps.maxPromptChars);
    deps.fanout.assertCapacity(); // 429 before a run is queued that nobody could wait for
    const { runId } = await startRun(
      deps,
      req,
      'chat.completions',
      {
        model,
        messages,
        params: pickParams(body),
        ...(body.stream ? { stream: true } : {}),
      },
      body,
    );
    res.set('X-Hermes-Run-Id', runId);
    const created = Math.floor(Date.now() / 1000);
    const id = `chatcmpl-${runId}`;
    if (!body.stream) {
      const clientGone = closeSignal(res);
      const record = await deps.inflight.track(runId, (drain) => waitForRun(deps, runId, AbortSignal.any([drain, clientGone])));
      res.json({
        id,
        object: 'chat.completion',
        created,
        model: model.id,
        choices: [{ index: 0, message: { role: 'assistant', content: record.output ?? '' }, finish_reason: record.finishReason ?? 'stop' }],
        usage: record.usage ?? NO_USAGE,
      });
      return;
    }
    const sse = trackStream(deps, openSse(req, res, { maxBufferedBytes: deps.sseMaxBufferedBytes, log: deps.log }));
    // F23: with include_usage every chunk before the last says `usage: null`; the last has empty `choices` and the usage.
    const withUsage = Boolean(body.stream_options?.include_usage);
    const chunk = (delta: Record<string, unknown>, finish: string | null) => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model: model.id,
      choices: [{ index: 0, delta, finish_reason: finish }],
      ...(withUsage ? { usage: null } : {}),
    });
    sse.send({ data: chunk({ role: 'assistant', content: '' }, null) });
    const text = new DeltaFollower((t) => sse.send({ data: chunk({ content: t }, null) }));
    try {
      const record = await deps.inflight.track(runId, (drain) =>
        waitForRun(deps, runId, AbortSignal.any([drain, sse.signal]), text.onEvent),
      );
      text.finish(record.output ?? '');
      sse.send({ data: chunk({}, record.finishReason ?? 'stop') });
      if (withUsage)
        sse.send({ data: { id, object: 'chat.completion.chunk', created, model: model.id, choices: [], usage: record.usage ?? NO_USAGE } });
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

  responsesRoutes(router, deps);

  router.post('/runs', async (req, res) => {
    const body = parseBody(runRequestSchema, req.body);
    const model = resolveModel(deps, body.model);
    const messages: RunMessage[] = [];
    if (body.instructions) messages.push({ role: 'system', content: body.instructions });
    messages.push(
      ...(typeof body.input === 'string'
        ? [{ role: 'user' as const, content: body.input }]
        : toRunMessages(body.input, deps.maxPromptChars)),
    );
    if (typeof body.input === 'string') assertSize(body.input, 'input', deps.maxPromptChars);
    const { runId, replayed } = await startRun(deps, req, 'runs', { model, messages, params: pickParams(body) }, body);
    const record = await deps.runs.get(runId);
    if (!record) throw new HttpError(404, `Run ${runId} has expired.`, 'not_found_error', 'run_not_found');
    if (replayed) res.set('Idempotent-Replayed', 'true');
    res.status(replayed ? 200 : 202).json(runObject(record));
  });

  router.get('/runs', async (req, res) => {
    const query = parseBody(listQuerySchema, req.query);
    const page = await deps.runs.list(query.limit, query.after);
    if (!page) {
      throw new HttpError(
        400,
        `after names no listed run (${query.after}): pass the id of the last run of the previous page.`,
        'invalid_request_error',
        'invalid_cursor',
        'after',
      );
    }
    res.json({
      object: 'list',
      data: page.runs.map(runObject),
      first_id: page.runs[0]?.id ?? null,
      last_id: page.runs.at(-1)?.id ?? null,
      has_more: page.hasMore,
    });
  });

  router.get('/runs/:id', async (req, res) => {
    res.json(runObject(await getRun(deps, String(req.params.id))));
  });

  router.post('/runs/:id/stop', async (req, res) => {
    const runId = String(req.params.id);
    const outcome = await deps.runs.requestStop(runId);
    if (outcome === 'missing') throw runNotFound(runId);
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
    const after = readAfterId(req, '0');
    followRunEvents(deps, req, res, runId, after);
  });

  return router;
}
