/**
 * A command tool's declared `parameters` (JSON Schema, draft-07) as a check of
 * the model's arguments, run before anything is spawned.
 *
 * The schema is compiled once, when the worker builds its tools, with Ajv (not
 * a home-made checker): `type`, `enum`, `const`, `pattern`, `required`,
 * `additionalProperties`, lengths, ranges, nested objects and arrays are
 * enforced as JSON Schema defines them, with no coercion (an array or an
 * object is never taken for a declared string). A schema Ajv cannot enforce
 * as written is a config error at start, naming the tool: a keyword it does
 * not know (a typo such as `enums` would otherwise check nothing), a `format`
 * (formats are not checked here; use `pattern`), a `$ref` it cannot resolve,
 * or a top level that is not `type: object`.
 *
 * A violation is a sentence for the model naming the argument and the rule
 * (`Argument "env" must be one of "staging" (enum).`).
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { ConfigError } from '../../scheduler/errors/config-error.ts';

/** Longest list of allowed values quoted back to the model, in characters. */
const MAX_QUOTED_CHARS = 200;

/** Checks one call's arguments; returns undefined when they conform, else why not (for the model). */
export type ArgumentCheck = (args: Record<string, unknown>) => string | undefined;

/**
 * Compile `schema`, the declared `parameters` of tool `tool`.
 * @throws ConfigError (key `tools.commands.<tool>.parameters`) when the schema is not one Ajv enforces as written
 */
export function compileArgumentSchema(tool: string, schema: Record<string, unknown>): ArgumentCheck {
  const key = `tools.commands.${tool}.parameters`;
  if (schema.type !== 'object') {
    throw new ConfigError(`${key}: the parameters of tool "${tool}" must be a JSON Schema with type: object.`, { key });
  }
  let validate: ValidateFunction;
  try {
    const ajv = new Ajv({
      strictSchema: true, // unknown keywords and formats are errors, not silently unchecked
      // Stryker disable next-line BooleanLiteral: the arguments come from JSON.parse, which yields no NaN or Infinity to refuse.
      strictNumbers: true,
      strictTypes: false,
      strictTuples: false,
      strictRequired: false,
      // Stryker disable next-line BooleanLiteral: with strictTypes false a union type is allowed either way.
      allowUnionTypes: true,
      coerceTypes: false,
      useDefaults: false,
      // Stryker disable next-line BooleanLiteral: only the first error is told, and it is the same one either way.
      allErrors: false,
      verbose: true, // errors carry the offending value, to say what it was
      logger: false,
    });
    validate = ajv.compile(schema);
  } catch (err) {
    throw new ConfigError(
      `${key}: the parameters of tool "${tool}" are not a JSON Schema this worker can enforce: ${(err as Error).message}`,
      { key, cause: err },
    );
  }
  return (args) => {
    if (validate(args)) return undefined;
    // Stryker disable next-line OptionalChaining: Ajv sets `errors` whenever it returns false.
    const first = validate.errors?.[0];
    // Stryker disable next-line StringLiteral: as above, there is always a first error.
    return first ? describe(first) : 'The arguments do not match the declared parameters.';
  };
}

/** One Ajv error as a sentence naming the argument and the rule. */
function describe(err: ErrorObject): string {
  const at = fieldName(err.instancePath);
  // Stryker disable next-line ConditionalExpression: `at` and every `extra` given are strings; only '' is left out.
  const field = (extra?: string) => [at, extra].filter((p) => p !== undefined && p !== '').join('.');
  const rule = `(${err.keyword})`;
  const params = err.params as Record<string, unknown>;
  switch (err.keyword) {
    case 'required':
      return `Argument "${field(String(params.missingProperty))}" is required.`;
    case 'additionalProperties':
      return `Argument "${field(String(params.additionalProperty))}" is not declared (additionalProperties: false).`;
    case 'enum':
      return `Argument "${at}" must be one of ${quote((params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', '))} ${rule}.`;
    case 'const':
      return `Argument "${at}" must be ${quote(JSON.stringify(params.allowedValue))} ${rule}.`;
    case 'pattern':
      return `Argument "${at}" must match the pattern ${quote(String(params.pattern))} ${rule}.`;
    case 'type':
      return `${at === '' ? 'The arguments' : `Argument "${at}"`} must be ${article(String(params.type))}, not ${kindOf(err.data)} ${rule}.`;
    default:
      // Stryker disable next-line StringLiteral: Ajv gives every error a message.
      return `${at === '' ? 'The arguments' : `Argument "${at}"`} ${err.message ?? 'does not match the declared parameters'} ${rule}.`;
  }
}

/** `/opts/level` → `opts.level`, `/list/0` → `list.0` (JSON Pointer unescaped). */
function fieldName(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .join('.');
}

function quote(text: string): string {
  return text.length > MAX_QUOTED_CHARS ? `${text.slice(0, MAX_QUOTED_CHARS)}…` : text;
}

function article(type: string): string {
  return type
    .split(',')
    .map((t) => (/^[aeiou]/.test(t) ? `an ${t}` : `a ${t}`))
    .join(' or ');
}

/** What a JSON value is, in JSON Schema's words. */
function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  // Stryker disable next-line ConditionalExpression,StringLiteral: article('object') is 'an object' as well.
  if (typeof value === 'object') return 'an object';
  return article(typeof value);
}
