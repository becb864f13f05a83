/**
 * Token counts of what a model call sends, before it is sent (docs/CONTEXT.md, "Token counting").
 *
 * A model of an OpenAI family whose tokenizer is known (`encodingOf`: o200k for gpt-4o, gpt-4.1,
 * gpt-4.5, gpt-5 and the o-series; cl100k for gpt-4 and gpt-3.5) is counted with that tokenizer
 * (`gpt-tokenizer`, only the needed encoding, loaded on first use: a CLI command that makes no
 * model call never loads it). Any other model gets the estimate of `token-estimate.ts`, which its
 * reported counts calibrate.
 *
 * The message rule, OpenAI's for chat models, the same whichever counter: a message costs
 * `MESSAGE_OVERHEAD_TOKENS` (its framing and its role) plus its content; an assistant's tool call
 * its function name and arguments; a request 3 tokens that prime the reply, plus its tool
 * definitions as their JSON text. Only what is sent is counted: a tool message's `name` is not
 * sent. Exact for plain messages; tool calls and tool definitions are formatted by the provider in
 * ways it does not publish, so their share may differ by a few tokens.
 */
import { MESSAGE_OVERHEAD_TOKENS, estimateTextTokens, type EstimableMessage } from './token-estimate.ts';

/** The tokenizers known by name. */
export type EncodingName = 'o200k_base' | 'cl100k_base';

/** Tokens that prime the reply, once per request. */
export const REPLY_PRIMING_TOKENS = 3;

/** Counts tokens of text for one model. */
export interface TokenCounter {
  /** The model's tokenizer; undefined for the estimate (not exact: calibrate it). */
  readonly encoding: EncodingName | undefined;
  /** Tokens of `text`. */
  text(text: string): number;
}

/** The estimate (`token-estimate.ts`): models whose tokenizer is not known. */
export const ESTIMATE_COUNTER: TokenCounter = { encoding: undefined, text: estimateTextTokens };

/** The tokenizer of `model` by name (after any `provider/` prefix, any case), or undefined. */
export function encodingOf(model: string): EncodingName | undefined {
  const name = model.toLowerCase().split('/').pop() ?? '';
  if (/^(?:gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|o[1-9](?:-|$))/.test(name)) return 'o200k_base';
  if (/^(?:gpt-4(?![.o])|gpt-3\.5)/.test(name)) return 'cl100k_base';
  return undefined;
}

/** Counts of texts seen before (a session sends its transcript again at every turn), bounded by their characters. */
const MEMO_MAX_CHARS = 8_000_000;
const loading = new Map<EncodingName, Promise<TokenCounter>>();

async function loadEncoding(encoding: EncodingName): Promise<TokenCounter> {
  // One entry point per encoding, so only the ranks needed are loaded (o200k alone is 2.4 MB of source).
  const { countTokens } =
    encoding === 'o200k_base' ? await import('gpt-tokenizer/encoding/o200k_base') : await import('gpt-tokenizer/encoding/cl100k_base');
  // Text that spells a special token (`<|endoftext|>`) is counted as the plain text it is when sent.
  const plain = { disallowedSpecial: new Set<string>() };
  const memo = new Map<string, number>();
  let memoChars = 0;
  return {
    encoding,
    text(text: string): number {
      if (!text) return 0;
      let n = memo.get(text);
      if (n === undefined) {
        n = countTokens(text, plain);
        if (memoChars + text.length > MEMO_MAX_CHARS) {
          memo.clear();
          memoChars = 0;
        }
        memo.set(text, n);
        memoChars += text.length;
      }
      return n;
    },
  };
}

/** The counter of `model`: its tokenizer when known (loaded once per process), else the estimate. */
export async function tokenCounterFor(model: string): Promise<TokenCounter> {
  const encoding = encodingOf(model);
  if (!encoding) return ESTIMATE_COUNTER;
  let counter = loading.get(encoding);
  if (!counter) {
    counter = loadEncoding(encoding);
    loading.set(encoding, counter);
    // A failed load (a broken install) is tried again at the next call rather than remembered.
    counter.catch(() => loading.delete(encoding));
  }
  return await counter;
}

/** Tokens of one message by the rule in this file's header. */
export function countMessageTokens(counter: TokenCounter, m: EstimableMessage): number {
  let n = MESSAGE_OVERHEAD_TOKENS + counter.text(m.content ?? '');
  for (const c of m.tool_calls ?? []) n += counter.text(c.name) + counter.text(c.arguments);
  return n;
}

/** Tokens of a request: its system prompt (null: none), messages and tool definitions. */
export function countRequestTokens(
  counter: TokenCounter,
  system: string | null,
  messages: readonly EstimableMessage[],
  tools: readonly unknown[] = [],
): number {
  let n = REPLY_PRIMING_TOKENS;
  if (system) n += countMessageTokens(counter, { role: 'system', content: system });
  for (const m of messages) n += countMessageTokens(counter, m);
  if (tools.length > 0) n += counter.text(JSON.stringify(tools));
  return n;
}
