/**
 * How `/v1` reads a request body: what each field does comes from the one table of
 * v1-param-table.ts (`assertFields`), a malformed body is named with what was expected
 * (`parseBody`), and the model parameters a request may send are checked here
 * (`modelParamsShape`, forwarded by `scheduler/model-params.ts`).
 */
import { z } from 'zod';
import { MODEL_PARAM_NAMES, type ModelParams } from '../../../scheduler/model-params.ts';
import { HttpError } from '../errors.ts';
import { V1_ENDPOINTS, ruleOf, type V1Endpoint } from './v1-param-table.ts';

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
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  logit_bias: z.record(z.string().regex(/^\d+$/, 'a token id'), z.number().min(-100).max(100)).nullish(),
  response_format: responseFormatSchema.nullish(),
  user: z.string().max(256).nullish(),
  safety_identifier: z.string().max(64).nullish(),
};

/** The forwarded parameters a parsed body set (nulls left out). */
export function pickParams(body: Partial<Record<keyof ModelParams, unknown>>): ModelParams {
  const out: Record<string, unknown> = {};
  for (const name of MODEL_PARAM_NAMES) if (body[name] !== undefined && body[name] !== null) out[name] = body[name];
  return out;
}

/**
 * Refuse what `endpoint` will not take, by the table's rule for each field (v1-param-table.ts);
 * `null` is "not given". An ignored field's value is checked as its rule says.
 * @throws HttpError 400 with `param` the field: the rule's code (`unsupported_parameter`,
 *   `client_tools_not_allowed`, `unsupported_n`) and why for a refused field or value;
 *   `unsupported_parameter` for a field the endpoint does not take; `invalid_body` for an ignored
 *   field's malformed value
 */
export function assertFields(body: Record<string, unknown>, endpoint: V1Endpoint): void {
  const where = V1_ENDPOINTS[endpoint];
  for (const [field, value] of Object.entries(body)) {
    if (value === undefined || value === null) continue;
    const rule = ruleOf(endpoint, field);
    if (!rule) {
      const other = (Object.keys(V1_ENDPOINTS) as V1Endpoint[]).find((e) => ruleOf(e, field));
      const hint = other ? `it is a field of ${V1_ENDPOINTS[other]}` : 'it is no field of the OpenAI API this server speaks';
      throw refusal(`${field} is not accepted by ${where}: ${hint}.`, 'unsupported_parameter', field);
    }
    if (rule.policy === 'refuse') {
      if (rule.accepted?.test(value)) continue;
      throw refusal(`${field} is not accepted by ${where}: ${rule.why}.`, rule.code ?? 'unsupported_parameter', field);
    }
    if (rule.refused?.test(value)) {
      const shown = JSON.stringify(value);
      throw refusal(
        `${field}: ${shown.length > 40 ? `${shown.slice(0, 40)}…` : shown} is not accepted by ${where}: ${rule.refused.why}.`,
        rule.refused.code ?? 'unsupported_parameter',
        field,
      );
    }
    if (rule.policy === 'ignore') parseBody(z.object({ [field]: rule.value }).loose(), { [field]: value });
  }
}

function refusal(message: string, code: string, param: string): HttpError {
  return new HttpError(400, message, 'invalid_request_error', code, param);
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
