/**
 * The wire format of `/v1/chat/completions` and `/v1/runs` (OpenAI's shapes): the request bodies
 * as zod schemas, what each field of a chat completion does (v1-params.ts), and the conversions
 * between the wire and a run (`toRunMessages`, `runObject`). The Responses API's own are in
 * v1-responses.ts.
 */
import { z } from 'zod';
import type { RunMessage, V1RunRecord } from '../../../scheduler/v1/v1-runs.ts';
import { assertSize, modelParamsShape } from './v1-params.ts';
import { honouredShape } from './v1-param-table.ts';

const textPart = z.object({ type: z.literal('text'), text: z.string() }).loose();
const contentSchema = z.union([z.string(), z.array(textPart).min(1)]);
const messageSchema = z
  .object({
    role: z.enum(['system', 'developer', 'user', 'assistant']),
    content: contentSchema,
    name: z.string().optional(),
  })
  .loose();

/**
 * `POST /v1/chat/completions` body: the fields the endpoint honours (v1-param-table.ts), checked
 * here; the table's rule decides every other field (`assertFields`).
 */
export const chatCompletionSchema = z
  .object(
    honouredShape('chat', {
      model: z.string().min(1).max(200).nullish(),
      messages: z.array(messageSchema).min(1, 'messages must hold at least one message'),
      stream: z.boolean().nullish(),
      stream_options: z.object({ include_usage: z.boolean().nullish() }).loose().nullish(),
      n: z.number().int().min(1).nullish(),
      logprobs: z.boolean().nullish(),
      top_logprobs: z.number().int().min(0).max(20).nullish(),
      modalities: z.array(z.enum(['text', 'audio'])).nullish(),
      ...modelParamsShape,
    }),
  )
  .loose();

/** `POST /v1/runs` body. */
export const runRequestSchema = z
  .object({
    model: z.string().min(1).max(200).nullish(),
    /** A prompt, or chat messages. */
    input: z.union([z.string().min(1, 'input must not be empty'), z.array(messageSchema).min(1)]),
    /** Extra system instructions, sent before the input. */
    instructions: z.string().nullish(),
    ...modelParamsShape,
  })
  .strict();

/** `GET /v1/runs` query. */
export const listQuerySchema = z
  .object({
    limit: z.coerce.number().int().min(1).max(100).default(20),
    after: z.string().min(1).optional(),
  })
  .strict();

/** Chat messages as a run takes them (`developer` is a `system` message; text parts joined). @throws HttpError 400 for a message over `maxChars` */
export function toRunMessages(messages: z.infer<typeof messageSchema>[], maxChars: number): RunMessage[] {
  return messages.map((m, i) => {
    const content = typeof m.content === 'string' ? m.content : m.content.map((p) => p.text).join('\n');
    assertSize(content, `messages.${i}.content`, maxChars);
    return { role: m.role === 'developer' ? 'system' : m.role, content };
  });
}

/** The API shape of a run (times in epoch seconds, like OpenAI objects). */
export function runObject(r: V1RunRecord) {
  const sec = (ms: number | null) => (ms === null ? null : Math.floor(ms / 1000));
  return {
    id: r.id,
    object: 'run',
    status: r.status,
    model: r.model,
    created_at: sec(r.createdAt),
    started_at: sec(r.startedAt),
    finished_at: sec(r.finishedAt),
    output: r.output,
    usage: r.usage,
    finish_reason: r.finishReason,
    error: r.error ? { code: r.error.code, message: r.error.message } : null,
    stop_requested: r.stopRequested,
  };
}
