/**
 * How `/v1` reads a request body: every field is either used, or refused with a 400 that names
 * it — never accepted and silently dropped (docs/GATEWAY.md "Client parameters").
 *
 * - Forwarded to the model with every call of the turn (`scheduler/model-params.ts`):
 *   `temperature`, `top_p`, `max_tokens`, `max_completion_tokens`, `stop`, `seed`,
 *   `response_format`, `user` (Responses: `max_output_tokens` → `max_completion_tokens`,
 *   `text.format` → `response_format`).
 * - Tools: a request that brings its own (`tools`, `functions`, `tool_choice`, `function_call`)
 *   is refused with `client_tools_not_allowed`: the agent's tools are the operator's. An empty
 *   list declares nothing and is accepted.
 * - Neutral: a field at the value that changes nothing (`n: 1`, `presence_penalty: 0`,
 *   `logprobs: false`, …) and any field set to `null` (OpenAI's "not given") is accepted.
 * - Anything else is 400 `unsupported_parameter` with `param` naming the field.
 *
 * A malformed body is 400 `invalid_body` whose message names the field, what was expected and
 * what was sent (`parseBody`).
 */
import { z } from 'zod';
import { MODEL_PARAM_NAMES, type ModelParams } from '../../../scheduler/model-params.ts';
import { HttpError } from '../errors.ts';

const stopSchema = z.union([z.string(), z.array(z.string()).min(1).max(4)]);

const jsonSchemaFormat = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a name of letters, digits, "_" or "-" (at most 64)'),
    schema: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullish(),
    description: z.string().optional(),
  })
  .strict();

/** Chat Completions `response_format`. */
export const responseFormatSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }).strict(),
  z.object({ type: z.literal('json_object') }).strict(),
  z.object({ type: z.literal('json_schema'), json_schema: jsonSchemaFormat }).strict(),
]);

/** The forwarded parameters as a request may send them (`null` = not given). */
export const modelParamsShape = {
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  max_tokens: z.number().int().min(1).nullish(),
  max_completion_tokens: z.number().int().min(1).nullish(),
  stop: stopSchema.nullish(),
  seed: z.number().int().nullish(),
  response_format: responseFormatSchema.nullish(),
  user: z.string().max(256).nullish(),
};

/** The forwarded parameters a parsed body set (nulls left out). */
export function pickParams(body: Partial<Record<keyof ModelParams, unknown>>): ModelParams {
  const out: Record<string, unknown> = {};
  for (const name of MODEL_PARAM_NAMES) if (body[name] !== undefined && body[name] !== null) out[name] = body[name];
  return out;
}

/** Fields that bring the caller's own tools. */
const TOOL_FIELDS = ['tools', 'functions', 'tool_choice', 'function_call'] as const;

/** What an endpoint does with each top-level field. */
export interface FieldPolicy {
  /** Fields the endpoint reads (its own and the forwarded parameters). */
  used: ReadonlySet<string>;
  /** Fields accepted only at a value that changes nothing. */
  neutral: Readonly<Record<string, (value: unknown) => boolean>>;
  /** Where the refusal points the caller (`POST /v1/chat/completions`). */
  endpoint: string;
}

/**
 * Refuse what the endpoint would not honour.
 * @throws HttpError 400 `client_tools_not_allowed` for the caller's own tools, `unsupported_n` for
 *   `n` > 1, `unsupported_parameter` for any other field it neither uses nor accepts as neutral
 */
export function assertFields(body: Record<string, unknown>, policy: FieldPolicy): void {
  for (const [field, value] of Object.entries(body)) {
    if (value === undefined || value === null || policy.used.has(field)) continue;
    if ((TOOL_FIELDS as readonly string[]).includes(field)) {
      // An empty list declares nothing (some client wrappers always send `tools: []`).
      if (Array.isArray(value) && value.length === 0) continue;
      throw new HttpError(
        400,
        `${field} is not accepted: the agent's tools are declared by the operator in the config, never by a request.`,
        'invalid_request_error',
        'client_tools_not_allowed',
        field,
      );
    }
    if (field === 'n' && typeof value === 'number' && value !== 1) {
      throw new HttpError(400, 'n must be 1: the agent gives one answer per request.', 'invalid_request_error', 'unsupported_n', 'n');
    }
    const neutral = policy.neutral[field];
    if (neutral?.(value)) continue;
    throw new HttpError(
      400,
      `${field} is not supported by ${policy.endpoint} on this server: the agent cannot honour it, so it is refused rather than ignored` +
        `${neutral ? ' (only its default value is accepted)' : ''}. Supported model parameters: ${MODEL_PARAM_NAMES.join(', ')}.`,
      'invalid_request_error',
      'unsupported_parameter',
      field,
    );
  }
}

/**
 * Parse a body with `schema`.
 * @throws HttpError 400 `invalid_body`, `param` the field's path, the message saying what was
 *   expected there and what was sent
 */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  const res = schema.safeParse(body ?? {});
  if (res.success) return res.data;
  const { param, detail } = describeIssue(res.error.issues[0]!, [], body);
  const where = param ? ` at ${param}` : '';
  return fail(new HttpError(400, `Invalid request body${where}: ${detail}.`, 'invalid_request_error', 'invalid_body', param || null));
}

function fail(err: HttpError): never {
  throw err;
}

type Issue = z.core.$ZodIssue;

/** The field an issue is about and a sentence of what was expected and what was sent. */
function describeIssue(issue: Issue, prefix: PropertyKey[], body: unknown): { param: string; detail: string } {
  const path = [...prefix, ...issue.path];
  const value = valueAt(body, path);
  const param = path.map(String).join('.');
  switch (issue.code) {
    case 'invalid_union': {
      // A discriminated union whose discriminator matched no option.
      const options = (issue as { options?: unknown[] }).options;
      if (issue.errors.length === 0 && Array.isArray(options)) {
        return { param, detail: `expected ${options.map((v) => JSON.stringify(v)).join(' or ')}, got ${describeValue(value)}` };
      }
      const branches = issue.errors.filter((b) => b.length > 0);
      if (branches.length === 0) return { param, detail: `${issue.message}, got ${describeValue(value)}` };
      const atRoot = branches.every((b) => b[0]!.code === 'invalid_type' && b[0].path.length === 0);
      if (atRoot) {
        const expected = [...new Set(branches.map((b) => (b[0] as { expected?: string }).expected ?? 'a valid value'))];
        return { param, detail: `expected ${expected.join(' or ')}, got ${describeValue(value)}` };
      }
      // The branch that got furthest into the value says what is wrong with it.
      const best = branches.reduce((a, b) => (b[0]!.path.length > a[0]!.path.length ? b : a));
      return describeIssue(best[0]!, path, body);
    }
    case 'invalid_type':
      return { param, detail: `expected ${issue.expected}, got ${describeValue(value)}` };
    case 'invalid_value':
      return { param, detail: `expected ${issue.values.map((v) => JSON.stringify(v)).join(' or ')}, got ${describeValue(value)}` };
    case 'unrecognized_keys': {
      const key = issue.keys[0]!;
      return { param: [...path, key].map(String).join('.'), detail: `unknown field "${key}"` };
    }
    case 'too_small':
    case 'too_big':
      return { param, detail: `${issue.message.replace(/^Too (small|big): /, '')}, got ${describeValue(value)}` };
    default:
      return { param, detail: `${issue.message}, got ${describeValue(value)}` };
  }
}

function valueAt(body: unknown, path: PropertyKey[]): unknown {
  let v: unknown = body;
  for (const k of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<PropertyKey, unknown>)[k];
  }
  return v;
}

/** A short description of a value: its type, and the value itself when short. */
function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'object') return 'an object';
  const shown = JSON.stringify(value);
  return `${typeof value} ${shown.length > 40 ? `${shown.slice(0, 40)}…` : shown}`;
}

/** @throws HttpError 400 `prompt_too_long` naming `param` when `text` is over `maxChars` */
export function assertSize(text: string, param: string, maxChars: number): void {
  if (text.length > maxChars) {
    throw new HttpError(
      400,
      `${param} is ${text.length} characters; the limit is ${maxChars}.`,
      'invalid_request_error',
      'prompt_too_long',
      param,
    );
  }
}
