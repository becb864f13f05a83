/**
 * The one table of what `/v1` does with each field of a request (docs/GATEWAY.md "Client
 * parameters", rendered from `V1_PARAMS` by `renderParamTable`): every field of the official
 * clients' request types — `ChatCompletionCreateParamsBase` and `ResponseCreateParamsBase` of
 * the `openai` package — for `POST /v1/chat/completions` (`chat`) and `POST /v1/responses`
 * (`responses`).
 *
 * Policy, decided here for every field and applied by `assertFields` (v1-params.ts):
 * - `honour`: the endpoint does what the field asks — reads it, or sends it to the model with
 *   every call of the turn (`scheduler/model-params.ts`); its value is checked by the endpoint's
 *   zod schema, which holds exactly the endpoint's honoured fields (checked at compile time in
 *   v1-schemas.ts and v1-responses.ts).
 * - `ignore`: accepted (its value checked by `value`) and changes nothing, because the answer is
 *   the same without it: routing, caching, billing and retention hints of OpenAI's platform.
 * - `refuse`: 400 naming the field, because answering without it would pass off a different
 *   answer as the one asked for (several choices, log probabilities, audio, the caller's tools).
 * A value that asks for what the endpoint cannot give is refused even where the field is
 * honoured or ignored (`refused`: `n > 1`, `logprobs: true`); a value that asks for nothing is
 * accepted even where the field is refused (`accepted`: `tools: []`). `null` is OpenAI's "not
 * given" and is always accepted. A field of neither client type is refused as unknown.
 */
import { z } from 'zod';

/** The endpoints the table covers, by the key its entries use. */
export const V1_ENDPOINTS = { chat: 'POST /v1/chat/completions', responses: 'POST /v1/responses' } as const;
export type V1Endpoint = keyof typeof V1_ENDPOINTS;

/** Some values of a field, and how the docs name them (`true`, `> 1`, `[]`). */
export interface ValueRule {
  readonly values: string;
  readonly test: (value: unknown) => boolean;
}

/** Values refused where the field is otherwise accepted, with why and the error code. */
export interface RefusedValues extends ValueRule {
  readonly why: string;
  /** @defaultValue 'unsupported_parameter' */
  readonly code?: string;
}

/** The endpoint does what the field asks. */
export interface HonourRule {
  readonly policy: 'honour';
  readonly why: string;
  readonly refused?: RefusedValues;
}

/** Accepted and changes nothing; `value` checks what a client may send. */
export interface IgnoreRule {
  readonly policy: 'ignore';
  readonly why: string;
  readonly value: z.ZodType;
  readonly refused?: RefusedValues;
}

/** 400 naming the field, except for the `accepted` values that ask for nothing. */
export interface RefuseRule {
  readonly policy: 'refuse';
  readonly why: string;
  /** @defaultValue 'unsupported_parameter' */
  readonly code?: string;
  readonly accepted?: ValueRule;
}

export type FieldRule = HonourRule | IgnoreRule | RefuseRule;
export type ParamPolicy = FieldRule['policy'];

const honour = (why: string, refused?: RefusedValues) => ({ policy: 'honour', why, ...(refused ? { refused } : {}) }) as const;
const ignore = (why: string, value: z.ZodType, refused?: RefusedValues) =>
  ({ policy: 'ignore', why, value, ...(refused ? { refused } : {}) }) as const;
const refuse = (why: string, options: { code?: string; accepted?: ValueRule } = {}) => ({ policy: 'refuse', why, ...options }) as const;

/** OpenAI's `Metadata`: at most 16 keys of at most 64 characters, values of at most 512. */
export const metadataSchema = z
  .record(z.string().max(64), z.string().max(512))
  .refine((m) => Object.keys(m).length <= 16, 'at most 16 keys');

const emptyList: ValueRule = { values: '`[]`', test: (v) => Array.isArray(v) && v.length === 0 };
const CLIENT_TOOLS = 'client_tools_not_allowed';
const TOOLS_WHY = "the agent's tools are declared by the operator in the config, never by a request";
const FORWARDED = 'sent to the model with every call of the turn, tool rounds included';
const ROUTING = "the model endpoint, its account and its tier are the operator's (`agent.base_url`); the answer is the same";
const CACHE =
  "a hint for OpenAI's prompt cache; the worker keeps each turn's prompt prefix stable itself (docs/CONTEXT.md), and a cache changes no answer";
const REASONING =
  "how far the model reasons is a setting of the operator's model (`agent.model`): it changes cost and depth, not what is answered";
const NO_LOGPROBS = "log probabilities are not returned: the answer is the agent's, assembled over its tool rounds";
const PARALLEL = "it governs the caller's own tools, which are refused; the operator's tools run as the agent runs them";
const MODERATION = 'no moderation is run or reported here; an answer without it would pass unchecked text as checked';
const PREDICTION = 'a predicted output only makes a model answer faster; the answer is the same';
const STRING = z.string();
const notZero = (v: unknown) => typeof v === 'number' && v > 0;

/**
 * What each endpoint does with each field (see the module comment for the policy); an endpoint
 * not named for a field does not take it. Rendered into docs/GATEWAY.md by `renderParamTable`.
 */
export const V1_PARAMS = {
  messages: { chat: honour('the conversation, as text: other content parts are 400 naming the part') },
  input: {
    responses: honour('a string or message items with text parts; other items and parts are 400 naming them'),
  },
  instructions: { responses: honour('the system message of this request only, not carried into the next one') },
  model: {
    chat: honour('one of `GET /v1/models`, else 404 `model_not_found`; a declared name runs on that model'),
    responses: honour('one of `GET /v1/models`, else 404 `model_not_found`; a declared name runs on that model'),
  },
  previous_response_id: {
    responses: honour("continues a stored response's conversation; 404 for an unknown one or one made with `store: false`"),
  },
  stream: { chat: honour('the answer as it is written (SSE)'), responses: honour('the answer as it is written (SSE)') },
  stream_options: {
    chat: honour('`include_usage` adds the usage chunk; `include_obfuscation` is ignored (no padding is sent)'),
    responses: ignore('`include_obfuscation` only: no padding is sent, so there is nothing to turn off', z.object({}).loose()),
  },
  temperature: { chat: honour(FORWARDED), responses: honour(FORWARDED) },
  top_p: { chat: honour(FORWARDED), responses: honour(FORWARDED) },
  max_tokens: { chat: honour(FORWARDED) },
  max_completion_tokens: { chat: honour(FORWARDED) },
  max_output_tokens: { responses: honour('sent to the model as `max_tokens`, the name every compatible server knows') },
  stop: { chat: honour(FORWARDED) },
  seed: { chat: honour(FORWARDED) },
  presence_penalty: { chat: honour(FORWARDED) },
  frequency_penalty: { chat: honour(FORWARDED) },
  logit_bias: { chat: honour(`${FORWARDED} (token ids of the model's tokenizer)`) },
  response_format: { chat: honour(`${FORWARDED}: \`text\`, \`json_object\`, \`json_schema\``) },
  text: {
    responses: honour('`format` is sent to the model as `response_format`; `verbosity` is ignored (how long the model writes is its own)'),
  },
  user: { chat: honour(FORWARDED), responses: honour(FORWARDED) },
  safety_identifier: { chat: honour(FORWARDED), responses: honour(`${FORWARDED}; echoed`) },
  n: {
    chat: honour('1: one answer', {
      values: '`> 1`',
      test: (v) => typeof v === 'number' && v > 1,
      why: 'the agent gives one answer per request',
      code: 'unsupported_n',
    }),
  },
  logprobs: {
    chat: honour('`false`: none are returned', { values: '`true`', test: (v) => v === true, why: NO_LOGPROBS }),
  },
  top_logprobs: {
    chat: honour('`0`: none are returned', { values: '`> 0`', test: notZero, why: NO_LOGPROBS }),
    responses: honour('`0`: none are returned', { values: '`> 0`', test: notZero, why: NO_LOGPROBS }),
  },
  modalities: {
    chat: honour('`["text"]`: the answer is text', {
      values: 'a list with `"audio"`',
      test: (v) => Array.isArray(v) && v.some((m) => m !== 'text'),
      why: 'the agent answers in text only',
    }),
  },
  truncation: { responses: honour("`auto` leaves out a long conversation's oldest messages; `disabled` refuses it (400)") },
  metadata: {
    chat: ignore(
      'checked (16 keys, 64/512 characters); OpenAI keeps it with stored completions, which a chat completion does not carry and this server does not list',
      metadataSchema,
    ),
    responses: honour('checked (16 keys, 64/512 characters), kept with the response and echoed in it'),
  },
  store: {
    chat: ignore(
      'OpenAI keeps completions for its distillation and evals, which do not exist here; every run is kept for `gateway.run_ttl_seconds` whatever it says',
      z.boolean(),
    ),
    responses: honour(
      '`false`: the response is answered but not kept as a response (no conversation stored; `GET /v1/responses/:id` and `previous_response_id` answer 404); echoed',
    ),
  },
  background: {
    responses: honour(
      '`true`: answered at once with status `queued`; read the result with `GET /v1/responses/:id` (with `store: false` it is 400)',
    ),
  },
  include: {
    responses: ignore(
      'asks for data of items this server never outputs (tool calls, images, reasoning); there is nothing to add',
      z.array(STRING),
      {
        values: 'a list with `message.output_text.logprobs`',
        test: (v) => Array.isArray(v) && v.includes('message.output_text.logprobs'),
        why: NO_LOGPROBS,
      },
    ),
  },
  parallel_tool_calls: { chat: ignore(PARALLEL, z.boolean()), responses: ignore(`${PARALLEL}; echoed`, z.boolean()) },
  service_tier: { chat: ignore(ROUTING, STRING), responses: ignore(ROUTING, STRING) },
  prompt_cache_key: { chat: ignore(CACHE, STRING), responses: ignore(CACHE, STRING) },
  prompt_cache_options: { chat: ignore(CACHE, z.object({}).loose()), responses: ignore(CACHE, z.object({}).loose()) },
  prompt_cache_retention: { chat: ignore(CACHE, STRING), responses: ignore(CACHE, STRING) },
  reasoning_effort: { chat: ignore(REASONING, STRING) },
  reasoning: { responses: ignore(REASONING, z.object({}).loose()) },
  verbosity: { chat: ignore('how long the model writes is its own; the answer is still the answer', STRING) },
  prediction: { chat: ignore(PREDICTION, z.object({}).loose()) },
  max_tool_calls: {
    responses: ignore(
      "caps OpenAI's built-in tools, which are never called here; the agent's own tool rounds are bounded by the operator's settings",
      z.number().int().min(1),
    ),
  },
  access_programs: {
    responses: ignore(
      "OpenAI's domain-specific access programs; the model is the operator's, called on the operator's account",
      z.object({}).loose(),
    ),
  },
  context_management: {
    responses: ignore("the worker keeps every model call inside the model's window itself (docs/CONTEXT.md)", z.array(z.unknown())),
  },
  tools: {
    chat: refuse(TOOLS_WHY, { code: CLIENT_TOOLS, accepted: emptyList }),
    responses: refuse(TOOLS_WHY, { code: CLIENT_TOOLS, accepted: emptyList }),
  },
  tool_choice: { chat: refuse(TOOLS_WHY, { code: CLIENT_TOOLS }), responses: refuse(TOOLS_WHY, { code: CLIENT_TOOLS }) },
  functions: { chat: refuse(TOOLS_WHY, { code: CLIENT_TOOLS, accepted: emptyList }) },
  function_call: { chat: refuse(TOOLS_WHY, { code: CLIENT_TOOLS }) },
  web_search_options: {
    chat: refuse("a web search on the caller's say is a tool of the caller's; an answer without the search would pass as one with it"),
  },
  audio: { chat: refuse('audio output parameters: the agent answers in text only') },
  moderation: { chat: refuse(MODERATION), responses: refuse(MODERATION) },
  prompt: {
    responses: refuse('a prompt template stored with OpenAI, which this server does not have; without it the request asks something else'),
  },
  conversation: {
    responses: refuse(
      'a conversation stored with OpenAI, which this server does not have; continue one with `previous_response_id`, or send it as `input`',
    ),
  },
} as const satisfies Record<string, Partial<Record<V1Endpoint, FieldRule>>>;

/** The fields the table names. */
export type V1Field = keyof typeof V1_PARAMS;

/** The fields `E` honours: its zod schema holds exactly these (checked where the schema is defined). */
export type HonouredField<E extends V1Endpoint> = {
  [F in V1Field]: (typeof V1_PARAMS)[F] extends { readonly [K in E]: { readonly policy: 'honour' } } ? F : never;
}[V1Field];

/** The rule of `field` on `endpoint`, or undefined when the endpoint does not take it. */
export function ruleOf(endpoint: V1Endpoint, field: string): FieldRule | undefined {
  if (!Object.hasOwn(V1_PARAMS, field)) return undefined;
  const rules: Partial<Record<V1Endpoint, FieldRule>> = V1_PARAMS[field as V1Field];
  return rules[endpoint];
}

/** The fields `endpoint` takes, in the table's order. */
export function fieldsOf(endpoint: V1Endpoint): string[] {
  return Object.keys(V1_PARAMS).filter((f) => ruleOf(endpoint, f) !== undefined);
}

/** One cell of the docs table: the policy, why, and the values that go the other way. */
function cell(rule: FieldRule | undefined): string {
  if (!rule) return '—';
  let text = `**${rule.policy}**: ${rule.why}`;
  if (rule.policy === 'refuse' && rule.accepted) text += `; ${rule.accepted.values} is accepted (asks for nothing)`;
  if (rule.policy !== 'refuse' && rule.refused) text += `; ${rule.refused.values} is refused: ${rule.refused.why}`;
  return text;
}

/** The table as docs/GATEWAY.md shows it (Markdown; a test keeps the page equal to it). */
export function renderParamTable(): string {
  const rows = Object.keys(V1_PARAMS).map((f) => `| \`${f}\` | ${cell(ruleOf('chat', f))} | ${cell(ruleOf('responses', f))} |`);
  return ['| field | `POST /v1/chat/completions` | `POST /v1/responses` |', '|---|---|---|', ...rows].join('\n');
}

/**
 * `shape` as the zod shape of `endpoint`'s request body, which must hold exactly the fields the
 * table has it honour: a missing field, or one the table does not honour there, is a type error.
 */
export function honouredShape<E extends V1Endpoint, S extends Record<HonouredField<E>, z.ZodType>>(
  _endpoint: E,
  shape: S & Record<Exclude<keyof S, HonouredField<E>>, never>,
): S {
  return shape;
}
