/**
 * The one parameter table of `/v1` (gateway/http/v1/v1-param-table.ts): it names every field of
 * the installed `openai` client's request types — read from its `.d.ts` files with the TypeScript
 * parser, so a client that gains a field fails here until the table decides it (the Python
 * client's are checked in test/v1-real-clients.test.ts) — the endpoints'
 * zod schemas hold exactly the honoured fields, docs/GATEWAY.md shows the table as the code has it,
 * and `assertFields` applies each kind of rule, with its near misses.
 *
 * `HERMES_DOCS=1 npx vitest run test/v1-param-table.test.ts` rewrites the table in docs/GATEWAY.md.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { HttpError } from '../gateway/http/errors.ts';
import { fieldsOf, renderParamTable, ruleOf, type V1Endpoint } from '../gateway/http/v1/v1-param-table.ts';
import { assertFields } from '../gateway/http/v1/v1-params.ts';
import { chatCompletionSchema } from '../gateway/http/v1/v1-schemas.ts';
import { responsesSchema } from '../gateway/http/v1/v1-responses.ts';
import { IGNORED_SAMPLES, REFUSED_SAMPLES } from './support/v1-param-samples.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The request type of each endpoint in the installed client: its `.d.ts` and base interface. */
const CLIENT_TYPES: Record<V1Endpoint, { file: string; base: string }> = {
  chat: { file: 'node_modules/openai/resources/chat/completions/completions.d.ts', base: 'ChatCompletionCreateParamsBase' },
  responses: { file: 'node_modules/openai/resources/responses/responses.d.ts', base: 'ResponseCreateParamsBase' },
};

/**
 * The fields `base` declares in `file`, and those of every top-level interface that extends it
 * (`…NonStreaming`, `…Streaming`). @throws when `base` is missing or extends another type (whose
 * fields this would not see)
 */
function declaredFields(file: string, base: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(`${ROOT}${file}`, 'utf8'), ts.ScriptTarget.Latest);
  const fields = new Set<string>();
  let found = false;
  for (const node of source.statements) {
    if (!ts.isInterfaceDeclaration(node)) continue;
    const extendsBase = node.heritageClauses?.some((h) => h.types.some((t) => t.expression.getText(source) === base)) ?? false;
    if (node.name.text === base) {
      if (node.heritageClauses?.length) throw new Error(`${base} extends another type: read its fields too`);
      found = true;
    } else if (!extendsBase) continue;
    for (const member of node.members) {
      if (ts.isPropertySignature(member) && (ts.isIdentifier(member.name) || ts.isStringLiteral(member.name))) fields.add(member.name.text);
    }
  }
  if (!found) throw new Error(`${file} declares no ${base}`);
  return [...fields];
}

function errorOf(fn: () => void): HttpError {
  try {
    fn();
  } catch (err) {
    if (err instanceof HttpError) return err;
    throw err;
  }
  throw new Error('no error was thrown');
}

describe('the /v1 parameter table', () => {
  for (const endpoint of ['chat', 'responses'] as const) {
    const { file, base } = CLIENT_TYPES[endpoint];
    it(`names every field of the installed client's ${base} for ${endpoint}`, () => {
      const declared = declaredFields(file, base);
      // The reading found the type, not a stray interface of a few fields.
      expect(declared.length).toBeGreaterThan(25);
      expect(declared).toEqual(expect.arrayContaining(['model', 'stream', 'store', 'metadata', 'service_tier']));
      expect(declared.filter((f) => ruleOf(endpoint, f) === undefined)).toEqual([]);
    });
  }

  it("each endpoint's zod schema holds exactly the fields it honours", () => {
    const honoured = (e: V1Endpoint) => fieldsOf(e).filter((f) => ruleOf(e, f)!.policy === 'honour');
    expect(Object.keys(chatCompletionSchema.shape).sort()).toEqual(honoured('chat').sort());
    expect(Object.keys(responsesSchema.shape).sort()).toEqual(honoured('responses').sort());
  });

  it('every ignored or refused field, and every refused value, has a sample the end-to-end tests send', () => {
    for (const endpoint of ['chat', 'responses'] as const) {
      for (const field of fieldsOf(endpoint)) {
        const rule = ruleOf(endpoint, field)!;
        if (rule.policy === 'ignore') expect(IGNORED_SAMPLES[endpoint], `${endpoint} ${field}`).toHaveProperty([field]);
        if (rule.policy === 'refuse' || rule.refused) expect(REFUSED_SAMPLES[endpoint], `${endpoint} ${field}`).toHaveProperty([field]);
      }
      for (const [field, value] of Object.entries(IGNORED_SAMPLES[endpoint])) {
        expect(ruleOf(endpoint, field)?.policy, `${endpoint} ${field}`).toBe('ignore');
        expect(() => assertFields({ [field]: value }, endpoint), `${endpoint} ${field}`).not.toThrow();
      }
      for (const [field, value] of Object.entries(REFUSED_SAMPLES[endpoint])) {
        const err = errorOf(() => assertFields({ [field]: value }, endpoint));
        expect(err, `${endpoint} ${field}`).toMatchObject({ status: 400, type: 'invalid_request_error', param: field });
      }
    }
  });

  it('docs/GATEWAY.md shows the table as the code has it', () => {
    const path = `${ROOT}docs/GATEWAY.md`;
    const page = readFileSync(path, 'utf8');
    const block = /(<!-- v1-params:[^\n]*-->\n)([\s\S]*?)\n(<!-- \/v1-params -->)/;
    expect(page).toMatch(block);
    if (process.env.HERMES_DOCS === '1')
      writeFileSync(
        path,
        page.replace(block, (_, open: string, _table: string, close: string) => `${open}${renderParamTable()}\n${close}`),
      );
    expect(readFileSync(path, 'utf8').match(block)![2]).toBe(renderParamTable());
  });
});

describe('assertFields applies the table', () => {
  it('a refused field: 400, param the field, its code, and a message saying why', () => {
    const tools = errorOf(() => assertFields({ tools: [{ type: 'function' }] }, 'chat'));
    expect(tools).toMatchObject({ status: 400, code: 'client_tools_not_allowed', param: 'tools' });
    expect(tools.message).toBe(
      "tools is not accepted by POST /v1/chat/completions: the agent's tools are declared by the operator in the config, never by a request.",
    );
    const prompt = errorOf(() => assertFields({ prompt: { id: 'pmpt_1' } }, 'responses'));
    expect(prompt).toMatchObject({ code: 'unsupported_parameter', param: 'prompt' });
    expect(prompt.message).toMatch(/^prompt is not accepted by POST \/v1\/responses: a prompt template stored with OpenAI/);
    // Near misses: the value that asks for nothing, and null ("not given").
    expect(() => assertFields({ tools: [], functions: [], tool_choice: null, audio: null, prompt: null }, 'chat')).not.toThrow();
  });

  it('a refused value of a field otherwise taken: refused with why; its neighbours accepted', () => {
    expect(errorOf(() => assertFields({ n: 2 }, 'chat'))).toMatchObject({ code: 'unsupported_n', param: 'n' });
    const logprobs = errorOf(() => assertFields({ logprobs: true }, 'chat'));
    expect(logprobs).toMatchObject({ code: 'unsupported_parameter', param: 'logprobs' });
    expect(logprobs.message).toMatch(/^logprobs: true is not accepted by POST \/v1\/chat\/completions: log probabilities are not returned/);
    expect(errorOf(() => assertFields({ modalities: ['text', 'audio'] }, 'chat'))).toMatchObject({ param: 'modalities' });
    expect(errorOf(() => assertFields({ top_logprobs: 1 }, 'responses'))).toMatchObject({ param: 'top_logprobs' });
    expect(
      errorOf(() => assertFields({ include: ['reasoning.encrypted_content', 'message.output_text.logprobs'] }, 'responses')),
    ).toMatchObject({
      param: 'include',
    });
    expect(() =>
      assertFields({ n: 1, logprobs: false, top_logprobs: 0, modalities: ['text'], include: ['reasoning.encrypted_content'] }, 'chat'),
    ).toThrow(/include is not accepted by POST \/v1\/chat\/completions: it is a field of POST \/v1\/responses/);
    expect(() => assertFields({ n: 1, logprobs: false, top_logprobs: 0, modalities: ['text'] }, 'chat')).not.toThrow();
    expect(() =>
      assertFields({ top_logprobs: 0, include: ['reasoning.encrypted_content', 'file_search_call.results'] }, 'responses'),
    ).not.toThrow();
  });

  it("an ignored field's value is checked: a malformed one is invalid_body naming the path", () => {
    const metadata = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']));
    expect(() => assertFields({ metadata: { ticket: 'T-1' } }, 'chat')).not.toThrow();
    expect(errorOf(() => assertFields({ metadata }, 'chat'))).toMatchObject({ code: 'invalid_body', param: 'metadata' });
    expect(errorOf(() => assertFields({ metadata: { ticket: 7 } }, 'chat'))).toMatchObject({
      code: 'invalid_body',
      param: 'metadata.ticket',
    });
    expect(errorOf(() => assertFields({ store: 'no' }, 'chat'))).toMatchObject({ code: 'invalid_body', param: 'store' });
    expect(errorOf(() => assertFields({ service_tier: 3 }, 'responses'))).toMatchObject({ code: 'invalid_body', param: 'service_tier' });
  });

  it('a field the endpoint does not take names the endpoint that does, or says it is none of the API', () => {
    const other = errorOf(() => assertFields({ max_output_tokens: 10 }, 'chat'));
    expect(other).toMatchObject({ status: 400, code: 'unsupported_parameter', param: 'max_output_tokens' });
    expect(other.message).toBe('max_output_tokens is not accepted by POST /v1/chat/completions: it is a field of POST /v1/responses.');
    expect(errorOf(() => assertFields({ messages: [] }, 'responses')).message).toMatch(/it is a field of POST \/v1\/chat\/completions/);
    const unknown = errorOf(() => assertFields({ temprature: 0.2 }, 'responses'));
    expect(unknown).toMatchObject({ code: 'unsupported_parameter', param: 'temprature' });
    expect(unknown.message).toMatch(/it is no field of the OpenAI API this server speaks/);
    // Inherited names are no fields.
    expect(errorOf(() => assertFields({ constructor: 1 }, 'chat'))).toMatchObject({ param: 'constructor' });
  });
});
