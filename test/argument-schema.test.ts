/**
 * A command tool's declared `parameters` as the check of the model's arguments
 * (worker/tools/argument-schema.ts): what JSON Schema enforces, with no coercion
 * and nothing added to the arguments, the sentence the model gets for each rule,
 * and the schemas refused when the tools are built. No process is spawned:
 * tool-sandbox.test.ts proves once that a refused call runs nothing.
 */
import { describe, expect, it } from 'vitest';
import { compileArgumentSchema } from '../worker/tools/argument-schema.ts';
import { ConfigError } from '../scheduler/errors/config-error.ts';

const check = (schema: Record<string, unknown>) => compileArgumentSchema('deploy', schema);
const args = (value: unknown) => value as Record<string, unknown>;

function configError(schema: Record<string, unknown>): ConfigError {
  try {
    check(schema);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('the schema was accepted');
}

describe('arguments that conform pass', () => {
  it('a declared string, integer, enum, pattern and nested object', () => {
    const c = check({
      type: 'object',
      properties: {
        env: { type: 'string', enum: ['staging', 'production'] },
        count: { type: 'integer', minimum: 1 },
        ref: { type: 'string', pattern: '^[a-z]+$' },
        opts: { type: 'object', properties: { level: { type: 'string' } } },
      },
      required: ['env'],
      additionalProperties: false,
    });
    expect(c({ env: 'staging', count: 3, ref: 'main', opts: { level: 'debug' } })).toBeUndefined();
    expect(c({ env: 'production' })).toBeUndefined();
  });

  it('schemas JSON Schema allows without a type everywhere: an untyped nested object, a tuple, a required name not in properties, a union type', () => {
    const c = check({
      type: 'object',
      properties: {
        opts: { properties: { level: { type: 'string' } } },
        pair: { type: 'array', items: [{ type: 'string' }, { type: 'integer' }] },
        v: { type: ['string', 'integer'] },
      },
      required: ['token'],
    });
    expect(c({ token: 'x', opts: { level: 'a' }, pair: ['a', 1], v: 2 })).toBeUndefined();
    expect(c({ token: 'x', v: 'two' })).toBeUndefined();
    expect(c({ token: 'x', opts: { level: 1 } })).toBe('Argument "opts.level" must be a string, not a number (type).');
    expect(c({ token: 'x', pair: ['a', 'b'] })).toBe('Argument "pair.1" must be an integer, not a string (type).');
    expect(c({})).toBe('Argument "token" is required.');
  });

  it('nothing is coerced and nothing is added: a numeric string is no number, a default is not filled in', () => {
    const c = check({
      type: 'object',
      properties: { n: { type: 'number' }, mode: { type: 'string', default: 'fast' }, flag: { type: 'boolean' } },
    });
    expect(c({ n: '5' })).toBe('Argument "n" must be a number, not a string (type).');
    expect(c({ flag: 'true' })).toBe('Argument "flag" must be a boolean, not a string (type).');
    const given: Record<string, unknown> = { n: 5 };
    expect(c(given)).toBeUndefined();
    expect(given).toEqual({ n: 5 });
  });
});

describe('a violation is a sentence naming the argument and the rule', () => {
  const c = check({
    type: 'object',
    properties: {
      env: { type: 'string', enum: ['staging', 1, null] },
      kind: { const: 'build' },
      ref: { type: 'string', pattern: '^[a-z]+$' },
      name: { type: 'string', maxLength: 3 },
      tags: { type: 'array', items: { type: 'string' } },
      v: { type: ['string', 'integer'] },
      opts: {
        type: 'object',
        properties: { level: { type: 'string' }, 'a/b': { type: 'string' }, 'c~d': { type: 'string' } },
        required: ['level'],
        additionalProperties: false,
      },
    },
    additionalProperties: false,
  });

  it('required and additionalProperties name the argument, nested ones by their path', () => {
    expect(c({ opts: {} })).toBe('Argument "opts.level" is required.');
    expect(c({ opts: { level: 'x', extra: 1 } })).toBe('Argument "opts.extra" is not declared (additionalProperties: false).');
    expect(c({ extra: 1 })).toBe('Argument "extra" is not declared (additionalProperties: false).');
  });

  it('enum, const and pattern quote what is allowed', () => {
    expect(c({ env: 'prod' })).toBe('Argument "env" must be one of "staging", 1, null (enum).');
    expect(c({ kind: 'test' })).toBe('Argument "kind" must be "build" (const).');
    expect(c({ ref: 'Main' })).toBe('Argument "ref" must match the pattern ^[a-z]+$ (pattern).');
  });

  it('type says what was expected and what came, in JSON Schema words', () => {
    expect(c({ name: ['a'] })).toBe('Argument "name" must be a string, not an array (type).');
    expect(c({ name: { a: 1 } })).toBe('Argument "name" must be a string, not an object (type).');
    expect(c({ name: null })).toBe('Argument "name" must be a string, not null (type).');
    expect(c({ name: true })).toBe('Argument "name" must be a string, not a boolean (type).');
    expect(c({ tags: 'a' })).toBe('Argument "tags" must be an array, not a string (type).');
    expect(c({ opts: 'a' })).toBe('Argument "opts" must be an object, not a string (type).');
    expect(c({ v: 1.5 })).toBe('Argument "v" must be a string or an integer, not a number (type).');
    expect(c({ tags: ['a', 2] })).toBe('Argument "tags.1" must be a string, not a number (type).');
  });

  it('arguments that are not an object are named as the arguments', () => {
    expect(c(args(['env']))).toBe('The arguments must be an object, not an array (type).');
    expect(c(args('env'))).toBe('The arguments must be an object, not a string (type).');
  });

  it('other rules give Ajv\'s message after the argument\'s name, or after "The arguments" at the top', () => {
    expect(c({ name: 'long' })).toBe('Argument "name" must NOT have more than 3 characters (maxLength).');
    const top = check({ type: 'object', minProperties: 1 });
    expect(top({})).toBe('The arguments must NOT have fewer than 1 properties (minProperties).');
  });

  it('names with "/" and "~" are given as written (JSON Pointer unescaped)', () => {
    expect(c({ opts: { level: 'x', 'a/b': 1 } })).toBe('Argument "opts.a/b" must be a string, not a number (type).');
    expect(c({ opts: { level: 'x', 'c~d': 1 } })).toBe('Argument "opts.c~d" must be a string, not a number (type).');
  });

  it('a list of allowed values is quoted up to 200 characters, then cut with "…"', () => {
    // 40 values of 5 characters with ", " between: 5 × 40 + 2 × 39 = 278 characters.
    const many = Array.from({ length: 40 }, (_, i) => String(100 + i));
    const long = check({ type: 'object', properties: { x: { enum: many } } })({ x: 'no' })!;
    const quoted = many.map((v) => JSON.stringify(v)).join(', ');
    expect(long).toBe(`Argument "x" must be one of ${quoted.slice(0, 200)}… (enum).`);
    // Exactly 200 characters: quoted whole. 40 values "aa" ("\"aa\"" is 4) with ", ": 4 × 34 + 2 × 33 = 202; so 33 values + one of 2.
    const fit = [...Array.from({ length: 33 }, (_, i) => String.fromCharCode(97 + Math.floor(i / 26), 97 + (i % 26))), ''];
    const fitQuoted = fit.map((v) => JSON.stringify(v)).join(', ');
    expect(fitQuoted.length).toBe(200);
    expect(check({ type: 'object', properties: { x: { enum: fit } } })({ x: 'no' })).toBe(
      `Argument "x" must be one of ${fitQuoted} (enum).`,
    );
  });
});

describe('a schema this worker cannot enforce as written is a config error naming the tool', () => {
  it.each([
    [
      'a top level that is not type: object',
      { type: 'array' },
      /the parameters of tool "deploy" must be a JSON Schema with type: object\.$/,
    ],
    ['no type at the top', { properties: {} }, /must be a JSON Schema with type: object\.$/],
    [
      'an unknown keyword',
      { type: 'object', properties: { env: { type: 'string', enums: ['a'] } } },
      /can enforce: strict mode: unknown keyword: "enums"/,
    ],
    ['a format', { type: 'object', properties: { day: { type: 'string', format: 'date' } } }, /can enforce: unknown format "date"/],
  ])('%s', (_what, schema, reason) => {
    const err = configError(schema);
    expect(err.key).toBe('tools.commands.deploy.parameters');
    expect(err.message).toMatch(/^tools\.commands\.deploy\.parameters: the parameters of tool "deploy" /);
    expect(err.message).toMatch(reason);
  });

  it('a compile error keeps its cause', () => {
    const err = configError({ type: 'object', properties: { env: { $ref: '#/nowhere' } } });
    expect(err.message).toMatch(
      /^tools\.commands\.deploy\.parameters: the parameters of tool "deploy" are not a JSON Schema this worker can enforce: /,
    );
    expect(err.cause).toBeInstanceOf(Error);
  });
});
