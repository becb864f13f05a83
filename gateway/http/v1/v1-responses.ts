/**
 * The Responses API (`POST /v1/responses`, `GET /v1/responses/:id`, `DELETE /v1/responses/:id`),
 * in the wire format of the official `openai` clients (`openai/resources/responses`), over the
 * same runs as Chat Completions: the same key, drain rule, `Idempotency-Key`, stream cap and
 * prompt limit (v1-run.ts), the same parameter table (v1-param-table.ts).
 *
 * - A response is a run: `resp_<hex>` is run `run_<hex>` (`GET /v1/runs/run_<hex>` shows it too).
 * - `input` is a string or message items (`{role, content}` with `input_text` / `output_text`
 *   parts, or a string); other items (function calls and their outputs, images, files) are
 *   refused naming the item. `instructions` go before the conversation as its system message
 *   and are not carried into the next response (as in OpenAI's API).
 * - `previous_response_id` continues a conversation server-side: each response stores its
 *   conversation (the messages so far, its input included) with its run, so it lives and
 *   expires with the run (`gateway.run_ttl_seconds`). A conversation is at most
 *   `CONVERSATION_MAX_CHARS` (what one request body may carry); past it the request is refused
 *   (`conversation_too_long`), or with `truncation: "auto"` the oldest messages are left out.
 * - `store: false`: the response is answered and not kept as a response — no conversation is
 *   stored, and `GET /v1/responses/:id` and a `previous_response_id` naming it answer 404. Its run
 *   record is a run's like any other (`GET /v1/runs/:id`, `Idempotency-Key` retries), kept for
 *   `gateway.run_ttl_seconds`.
 * - `background: true`: answered at once with the queued response; the run goes on without a
 *   caller and `GET /v1/responses/:id` reads its result (so it needs `store`). Streamed, it is
 *   streamed as without it.
 * - The model's `finish_reason` becomes the response's status: `length` → `incomplete`
 *   (`max_output_tokens`), `content_filter` → `incomplete` (`content_filter`), else `completed`.
 * - `stream: true`: `response.created`, `response.in_progress`, `response.output_item.added`,
 *   `response.content_part.added`, a `response.output_text.delta` per delta, then
 *   `response.output_text.done`, `response.content_part.done`, `response.output_item.done` and
 *   `response.completed` (or `response.incomplete`); a failure is an `error` event followed by
 *   `response.failed`. Every event carries its `sequence_number`.
 */
import type { Request, Response, Router } from 'express';
import { z } from 'zod';
import { queuedRunRecord, type RunMessage, type V1RunRecord } from '../../../scheduler/v1/v1-runs.ts';
import type { ModelParams, ModelResponseFormat } from '../../../scheduler/model-params.ts';
import { HttpError, toHttpError } from '../errors.ts';
import { openSse } from '../sse.ts';
import { DeltaFollower, closeSignal, resolveModel, startRun, trackStream, waitForRun, type V1Deps } from './v1-run.ts';
import { assertFields, assertSize, modelParamsShape, parseBody, pickParams } from './v1-params.ts';
import { honouredShape, metadataSchema } from './v1-param-table.ts';

/** Longest conversation a response continues, characters: the request body limit (server.ts `BODY_LIMIT`, 2 MB). */
export const CONVERSATION_MAX_CHARS = 2 * 1024 * 1024;

/** A content part of an input message; anything but text is refused by `toMessages`. */
const partSchema = z.object({ type: z.string(), text: z.string().optional() }).loose();
const itemSchema = z
  .object({
    type: z.literal('message').optional(),
    role: z.enum(['user', 'assistant', 'system', 'developer']),
    content: z.union([z.string(), z.array(partSchema).min(1)]),
  })
  .loose();

/** Responses `text.format`. */
const textFormatSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }).strict(),
  z.object({ type: z.literal('json_object') }).strict(),
  z
    .object({
      type: z.literal('json_schema'),
      name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a name of letters, digits, "_" or "-" (at most 64)'),
      schema: z.record(z.string(), z.unknown()),
      strict: z.boolean().nullish(),
      description: z.string().optional(),
    })
    .strict(),
]);

/**
 * `POST /v1/responses` body: the fields the endpoint honours (v1-param-table.ts), checked here;
 * the table's rule decides every other field (`assertFields`).
 */
export const responsesSchema = z
  .object(
    honouredShape('responses', {
      model: z.string().min(1).max(200).nullish(),
      input: z.union([z.string().min(1, 'input must not be empty'), z.array(itemSchema).min(1, 'input must hold at least one item')]),
      instructions: z.string().nullish(),
      previous_response_id: z.string().min(1).nullish(),
      stream: z.boolean().nullish(),
      temperature: modelParamsShape.temperature,
      top_p: modelParamsShape.top_p,
      user: modelParamsShape.user,
      safety_identifier: modelParamsShape.safety_identifier,
      max_output_tokens: z.number().int().min(1).nullish(),
      top_logprobs: z.number().int().min(0).max(20).nullish(),
      // `verbosity` is ignored (the table's rule for `text`).
      text: z.object({ format: textFormatSchema.nullish(), verbosity: z.string().nullish() }).strict().nullish(),
      truncation: z.enum(['auto', 'disabled']).nullish(),
      metadata: metadataSchema.nullish(),
      store: z.boolean().nullish(),
      background: z.boolean().nullish(),
    }),
  )
  .loose();

type ResponsesBody = z.infer<typeof responsesSchema>;

/** How a response deleted before it finished ends. */
const DELETED_ERROR = { code: 'response_deleted', message: 'The response was deleted before it finished.', httpStatus: 409 };

/** `resp_<hex>` of run `run_<hex>`. */
export function responseIdOf(runId: string): string {
  return `resp_${runId.slice('run_'.length)}`;
}

/** The run of a response id, or undefined for an id that is no response id. */
export function runIdOfResponse(id: string): string | undefined {
  return /^resp_[0-9a-f]{24}$/.test(id) ? `run_${id.slice('resp_'.length)}` : undefined;
}

/** Mount the Responses routes on the `/v1` router. */
export function responsesRoutes(router: Router, deps: V1Deps): void {
  router.post('/responses', async (req, res) => {
    assertItemTypes(req.body);
    const body = parseBody(responsesSchema, req.body);
    assertFields(body, 'responses');
    if (body.background && body.store === false) {
      throw new HttpError(
        400,
        'background: true needs the response stored: its result is read with GET /v1/responses/:id, which a response made with store: false does not answer.',
        'invalid_request_error',
        'unsupported_parameter',
        'background',
      );
    }
    const model = resolveModel(deps, body.model);
    if (body.instructions) assertSize(body.instructions, 'instructions', deps.maxPromptChars);
    const conversation = fitConversation(
      [...(await priorConversation(deps, body.previous_response_id)), ...toMessages(body.input, deps.maxPromptChars)],
      body,
    );
    const messages: RunMessage[] = [
      ...(body.instructions ? [{ role: 'system' as const, content: body.instructions }] : []),
      ...conversation,
    ];
    const echo = requestEcho(body);
    const waits = !body.background || body.stream;
    if (waits) deps.fanout.assertCapacity(); // 429 before a run is queued that nobody could wait for
    const { runId } = await startRun(
      deps,
      req,
      'responses',
      { model, messages, params: paramsOf(body), ...(body.stream ? { stream: true } : {}) },
      body,
      // Not stored (`store: false`): no conversation is kept to continue (the table's rule for `store`).
      { request: echo, ...(body.store === false ? {} : { conversation }) },
    );
    res.set('X-Hermes-Run-Id', runId);
    if (!waits) {
      res.json(responseObject(await getResponseRun(deps, responseIdOf(runId))));
      return;
    }
    if (!body.stream) {
      const clientGone = closeSignal(res);
      const record = await deps.inflight.track(runId, (drain) => waitForRun(deps, runId, AbortSignal.any([drain, clientGone])));
      res.json(responseObject(record));
      return;
    }
    await streamResponse(deps, req, res, runId, model.id, echo);
  });

  router.get('/responses/:id', async (req, res) => {
    const id = String(req.params.id);
    const record = await getResponseRun(deps, id);
    if (record.request?.store === false) throw responseNotFound(id, 'it was made with store: false, so it is not kept to be read back');
    res.json(responseObject(record));
  });

  router.delete('/responses/:id', async (req, res) => {
    const id = String(req.params.id);
    const runId = runIdOfResponse(id);
    const record = runId ? await deps.runs.get(runId) : null;
    if (!runId || !record || record.endpoint !== 'responses') throw responseNotFound(id);
    // An unfinished response ends first, so a caller waiting for it is answered now, not at its timeout.
    await deps.runs.end(runId, 'cancelled', DELETED_ERROR);
    if (!(await deps.runs.delete(runId))) throw responseNotFound(id);
    deps.log.info({ runId }, 'v1 response deleted');
    res.json({ id, object: 'response.deleted', deleted: true });
  });
}

/**
 * Items other than messages (function calls and outputs, reasoning, item references) are refused
 * before the body is parsed, naming the item.
 * @throws HttpError 400 `unsupported_input_item`
 */
function assertItemTypes(body: unknown): void {
  const input = (body as { input?: unknown } | null)?.input;
  if (!Array.isArray(input)) return;
  for (const [i, item] of input.entries()) {
    const type = (item as { type?: unknown } | null)?.type;
    if (type === undefined || type === 'message') continue;
    throw new HttpError(
      400,
      `input.${i} is a ${JSON.stringify(type)} item; only message items (a role and text content) are accepted: the agent's tools are the operator's, and it reads text only.`,
      'invalid_request_error',
      'unsupported_input_item',
      `input.${i}.type`,
    );
  }
}

/** The conversation a request starts from: the stored conversation of its previous response and that response's answer. */
async function priorConversation(deps: V1Deps, previousId: string | null | undefined): Promise<RunMessage[]> {
  if (!previousId) return [];
  const runId = runIdOfResponse(previousId);
  const record = runId ? await deps.runs.get(runId) : null;
  if (!runId || !record || record.endpoint !== 'responses') {
    throw new HttpError(
      404,
      `Previous response ${previousId} not found (unknown or expired).`,
      'invalid_request_error',
      'previous_response_not_found',
      'previous_response_id',
    );
  }
  if (record.request?.store === false) {
    throw new HttpError(
      404,
      `Previous response ${previousId} was made with store: false, so its conversation was not kept; send the whole conversation as input.`,
      'invalid_request_error',
      'previous_response_not_found',
      'previous_response_id',
    );
  }
  if (record.status !== 'completed') {
    throw new HttpError(
      400,
      `Previous response ${previousId} is ${statusOf(record)}; a conversation continues from a finished response.`,
      'invalid_request_error',
      'previous_response_not_finished',
      'previous_response_id',
    );
  }
  const stored = (await deps.runs.conversation(runId)) ?? [];
  return [...stored, { role: 'assistant', content: record.output ?? '' }];
}

/** `input` as run messages (text parts joined), each within `agent.max_prompt_chars`. @throws HttpError 400 for a part that is not text */
function toMessages(input: ResponsesBody['input'], maxChars: number): RunMessage[] {
  if (typeof input === 'string') {
    assertSize(input, 'input', maxChars);
    return [{ role: 'user', content: input }];
  }
  return input.map((item, i) => {
    let content: string;
    if (typeof item.content === 'string') content = item.content;
    else {
      content = item.content
        .map((part, j) => {
          if ((part.type === 'input_text' || part.type === 'output_text') && typeof part.text === 'string') return part.text;
          throw new HttpError(
            400,
            `input.${i}.content.${j} is a ${JSON.stringify(part.type)} part; only text parts (input_text, output_text) are accepted.`,
            'invalid_request_error',
            'unsupported_content',
            `input.${i}.content.${j}.type`,
          );
        })
        .join('\n');
    }
    assertSize(content, `input.${i}.content`, maxChars);
    return { role: item.role === 'developer' ? 'system' : item.role, content };
  });
}

/**
 * The conversation within `CONVERSATION_MAX_CHARS`: as it is when it fits; with `truncation: "auto"`
 * without its oldest messages (system messages stay).
 * @throws HttpError 400 `conversation_too_long` when it does not fit and may not be truncated
 */
function fitConversation(conversation: RunMessage[], body: ResponsesBody): RunMessage[] {
  const size = (ms: RunMessage[]) => ms.reduce((n, m) => n + m.content.length, 0);
  if (size(conversation) <= CONVERSATION_MAX_CHARS) return conversation;
  if (body.truncation === 'auto') {
    const kept = [...conversation];
    while (size(kept) > CONVERSATION_MAX_CHARS) {
      const oldest = kept.findIndex((m) => m.role !== 'system');
      if (oldest < 0 || oldest === kept.length - 1) break;
      kept.splice(oldest, 1);
    }
    if (size(kept) <= CONVERSATION_MAX_CHARS) return kept;
  }
  throw new HttpError(
    400,
    `The conversation is ${size(conversation)} characters, over the limit of ${CONVERSATION_MAX_CHARS}; ` +
      'send truncation: "auto" to leave out its oldest messages, or start a new conversation without previous_response_id.',
    'invalid_request_error',
    'conversation_too_long',
    body.previous_response_id ? 'previous_response_id' : 'input',
  );
}

/** The model parameters of a Responses body (`max_output_tokens` → `max_tokens`, `text.format` → `response_format`). */
function paramsOf(body: ResponsesBody): ModelParams {
  const params: ModelParams = pickParams(body);
  // `max_tokens`, not `max_completion_tokens`: servers that know only the older name (Ollama, LM
  // Studio) would ignore the newer one silently; one that refuses the older says so.
  if (body.max_output_tokens) params.max_tokens = body.max_output_tokens;
  const format = body.text?.format;
  if (format) {
    const rf: ModelResponseFormat =
      format.type === 'json_schema'
        ? {
            type: 'json_schema',
            json_schema: {
              name: format.name,
              schema: format.schema,
              ...(format.strict != null ? { strict: format.strict } : {}),
              ...(format.description ? { description: format.description } : {}),
            },
          }
        : { type: format.type };
    params.response_format = rf;
  }
  return params;
}

/** The request fields a response echoes (stored with its run). */
function requestEcho(body: ResponsesBody): Record<string, unknown> {
  return {
    instructions: body.instructions ?? null,
    previous_response_id: body.previous_response_id ?? null,
    temperature: body.temperature ?? null,
    top_p: body.top_p ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    user: body.user ?? null,
    safety_identifier: body.safety_identifier ?? null,
    metadata: body.metadata ?? {},
    store: body.store ?? true,
    background: body.background ?? false,
    parallel_tool_calls: body.parallel_tool_calls ?? false,
    text: { format: body.text?.format ?? { type: 'text' } },
    truncation: body.truncation ?? 'disabled',
  };
}

async function getResponseRun(deps: V1Deps, id: string): Promise<V1RunRecord> {
  const runId = runIdOfResponse(id);
  const record = runId ? await deps.runs.get(runId) : null;
  if (!record || record.endpoint !== 'responses') throw responseNotFound(id);
  return record;
}

function responseNotFound(id: string, why = 'unknown, expired or deleted'): HttpError {
  return new HttpError(404, `No response ${id} (${why}).`, 'not_found_error', 'response_not_found', 'id');
}

/** The Responses status of a run. */
function statusOf(r: V1RunRecord): 'queued' | 'in_progress' | 'completed' | 'incomplete' | 'failed' | 'cancelled' {
  switch (r.status) {
    case 'queued':
      return 'queued';
    case 'running':
      return 'in_progress';
    case 'completed':
      return incompleteReason(r.finishReason) ? 'incomplete' : 'completed';
    case 'cancelled':
      return 'cancelled';
    default:
      return 'failed';
  }
}

/** Why a completed answer is incomplete (`incomplete_details.reason`), from the model's finish reason. */
function incompleteReason(finishReason: string | null): 'max_output_tokens' | 'content_filter' | undefined {
  if (finishReason === 'length') return 'max_output_tokens';
  if (finishReason === 'content_filter') return 'content_filter';
  return undefined;
}

/** The message item of a response's answer. */
function messageItem(runId: string, text: string, status: 'in_progress' | 'completed' | 'incomplete') {
  return {
    id: `msg_${runId.slice('run_'.length)}`,
    type: 'message',
    status,
    role: 'assistant',
    content: status === 'in_progress' ? [] : [outputText(text)],
  };
}

function outputText(text: string) {
  return { type: 'output_text', text, annotations: [], logprobs: [] };
}

/**
 * The API shape of a response (`Response` of `openai/resources/responses`).
 * @param overrides - status and output of a response still being streamed
 */
export function responseObject(r: V1RunRecord, overrides: { model?: string; request?: Record<string, unknown> } = {}) {
  const request = overrides.request ?? r.request ?? {};
  const status = statusOf(r);
  const reason = r.status === 'completed' ? incompleteReason(r.finishReason) : undefined;
  const output = r.status === 'completed' ? [messageItem(r.id, r.output ?? '', reason ? 'incomplete' : 'completed')] : [];
  const usage = r.usage
    ? {
        input_tokens: r.usage.prompt_tokens,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: r.usage.completion_tokens,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: r.usage.total_tokens,
      }
    : null;
  return {
    id: responseIdOf(r.id),
    object: 'response',
    created_at: Math.floor(r.createdAt / 1000),
    status,
    ...(r.finishedAt !== null && r.status === 'completed' ? { completed_at: Math.floor(r.finishedAt / 1000) } : {}),
    error:
      r.error && status === 'failed'
        ? { code: r.error.httpStatus === 429 ? 'rate_limit_exceeded' : 'server_error', message: r.error.message }
        : null,
    incomplete_details: reason ? { reason } : null,
    instructions: request.instructions ?? null,
    metadata: request.metadata ?? {},
    model: overrides.model ?? r.model,
    output,
    parallel_tool_calls: request.parallel_tool_calls ?? false,
    temperature: request.temperature ?? null,
    tool_choice: 'none',
    tools: [],
    top_p: request.top_p ?? null,
    max_output_tokens: request.max_output_tokens ?? null,
    previous_response_id: request.previous_response_id ?? null,
    reasoning: null,
    store: request.store ?? true,
    background: request.background ?? false,
    text: request.text ?? { format: { type: 'text' } },
    truncation: request.truncation ?? 'disabled',
    usage,
    user: request.user ?? null,
    safety_identifier: request.safety_identifier ?? null,
  };
}

/** Stream a response's events while its run goes on (see the module comment for the order). */
async function streamResponse(
  deps: V1Deps,
  req: Request,
  res: Response,
  runId: string,
  model: string,
  request: Record<string, unknown>,
): Promise<void> {
  const sse = trackStream(deps, openSse(req, res, { maxBufferedBytes: deps.sseMaxBufferedBytes, log: deps.log }));
  let seq = 0;
  const send = (type: string, data: Record<string, unknown>) => sse.send({ event: type, data: { type, sequence_number: seq++, ...data } });
  const itemId = `msg_${runId.slice('run_'.length)}`;
  const started = (await deps.runs.get(runId)) ?? null;
  const pending: V1RunRecord = started ?? queuedRunRecord(runId, model, Date.now(), { endpoint: 'responses', request });
  const inProgress = { ...responseObject(pending, { model, request }), status: 'in_progress' };
  send('response.created', { response: inProgress });
  send('response.in_progress', { response: inProgress });
  send('response.output_item.added', { output_index: 0, item: messageItem(runId, '', 'in_progress') });
  send('response.content_part.added', { item_id: itemId, output_index: 0, content_index: 0, part: outputText('') });
  const text = new DeltaFollower((delta) =>
    send('response.output_text.delta', { item_id: itemId, output_index: 0, content_index: 0, delta, logprobs: [] }),
  );
  try {
    const record = await deps.inflight.track(runId, (drain) => waitForRun(deps, runId, AbortSignal.any([drain, sse.signal]), text.onEvent));
    const output = record.output ?? '';
    text.finish(output);
    const final = responseObject(record, { model, request });
    send('response.output_text.done', { item_id: itemId, output_index: 0, content_index: 0, text: output, logprobs: [] });
    send('response.content_part.done', { item_id: itemId, output_index: 0, content_index: 0, part: outputText(output) });
    send('response.output_item.done', { output_index: 0, item: final.output[0] });
    send(final.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response: final });
  } catch (err) {
    const e = toHttpError(err);
    if (!sse.signal.aborted) {
      send('error', { code: e.code, message: e.message, param: e.param });
      const failed = (await deps.runs.get(runId).catch(() => null)) ?? pending;
      send('response.failed', {
        response: {
          ...responseObject(failed, { model, request }),
          status: 'failed',
          error: { code: e.status === 429 ? 'rate_limit_exceeded' : 'server_error', message: e.message },
        },
      });
    }
  } finally {
    sse.close();
  }
}
