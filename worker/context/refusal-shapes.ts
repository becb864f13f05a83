/**
 * How providers refuse a request over their context window, in their own words and status codes
 * (docs/CONTEXT.md "Refusals"): one table of shapes, then a general rule for the rest. What a
 * refusal teaches (the window it names, or a halving) is decided in
 * `scheduler/models/model-window.ts` (`afterRefusal`).
 *
 * A shape names the provider, the statuses it answers with, its words, and where its numbers are:
 * `window` (the limit) and `prompt` (the request's size as the provider counted it). The text read
 * is the raw body of the answer when the transport kept it (model-transport.ts), else the client's
 * error message: some servers put their error where the `openai` client does not look (vLLM's
 * top-level `{"object":"error","message":…}`, Gemini's `[{"error":…}]`), so only the body has it.
 *
 * The general rule: a 400, 413 or 422 whose text speaks of context, tokens or length is a refusal
 * for length too, unless it speaks of a rate, a quota or the output limit (`max_tokens`), which a
 * shorter request does not cure. It never reads a number (which one is the window is anyone's
 * guess): the window is halved. Any 413 is a request too large.
 */

/** A refusal for length, as read from an answer. */
export interface RefusalReading {
  /** Whose words: a shape's provider, `http-413`, or `general` (the general rule). */
  provider: string;
  /** The window the text names, tokens. */
  windowTokens?: number;
  /** The request's size as the provider counted it, tokens. */
  promptTokens?: number;
}

interface RefusalShape {
  provider: string;
  statuses: readonly number[];
  words: RegExp;
  /** Patterns whose first group is the window, tried in order. */
  window?: readonly RegExp[];
  /** Patterns whose first group is the prompt's size, tried in order. */
  prompt?: readonly RegExp[];
}

const N = String.raw`([\d,]+)`;
const re = (source: string) => new RegExp(source, 'i');

/** The shapes, most specific first (the first whose status and words match is the reading). */
const SHAPES: readonly RefusalShape[] = [
  {
    // "prompt is too long: 213462 tokens > 200000 maximum" (400 invalid_request_error)
    provider: 'anthropic',
    statuses: [400],
    words: /prompt is too long: [\d,]+ tokens > [\d,]+ maximum/i,
    window: [re(String.raw`tokens > ${N} maximum`)],
    prompt: [re(String.raw`too long: ${N} tokens`)],
  },
  {
    // 413 request_too_large, "Request exceeds the maximum size": bytes, not tokens.
    provider: 'anthropic',
    statuses: [413],
    words: /request_too_large|request exceeds the maximum size/i,
  },
  {
    // "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576)." (400 INVALID_ARGUMENT)
    provider: 'gemini',
    statuses: [400],
    words: /input token count \([\d,]+\) exceeds the maximum number of tokens allowed/i,
    window: [re(String.raw`tokens allowed \(${N}\)`)],
    prompt: [re(String.raw`input token count \(${N}\)`)],
  },
  {
    // "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8192. Given: 9000 `inputs` tokens and 20 `max_new_tokens`" (422)
    provider: 'tgi',
    statuses: [422, 400],
    words: /`inputs` tokens \+ `max_new_tokens` must be <= \d|`inputs` must have less than \d[\d,]* tokens/i,
    window: [re(String.raw`must be <= ${N}`), re(String.raw`less than ${N} tokens`)],
    prompt: [re(String.raw`Given: ${N} \`inputs\` tokens`), re(String.raw`tokens\. Given: ${N}`)],
  },
  {
    // "the request exceeds the available context size, try increasing it" (400; 500 in some builds),
    // type exceed_context_size_error; newer servers add "n_prompt_tokens" and "n_ctx" to the body,
    // or say "request (4476 tokens) exceeds the available context size (4096 tokens)".
    provider: 'llama.cpp',
    statuses: [400, 500],
    words: /exceeds? the available context size|exceed_context_size_error|context size has been exceeded/i,
    window: [re(String.raw`"n_ctx"\s*:\s*${N}`), re(String.raw`available context size \(${N} tokens\)`)],
    prompt: [re(String.raw`"n_prompt_tokens"\s*:\s*${N}`), re(String.raw`request \(${N} tokens\)`)],
  },
  {
    // vLLM's engine: "The decoder prompt (length 17000) is longer than the maximum model length of 16000",
    // "Prompt length of 5016 is longer than the maximum model length of 4096", or its older scheduler's
    // "Input prompt (2664 tokens) is too long and exceeds limit of 2048" (400 BadRequestError).
    provider: 'vllm',
    statuses: [400],
    words: /longer than the maximum model length of \d|input prompt \([\d,]+ tokens\) is too long and exceeds limit of \d/i,
    window: [re(String.raw`maximum model length of ${N}`), re(String.raw`exceeds limit of ${N}`)],
    prompt: [re(String.raw`\(length ${N}\)`), re(String.raw`prompt length of ${N}`), re(String.raw`input prompt \(${N} tokens\)`)],
  },
  {
    // "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length" (400)
    provider: 'mistral',
    statuses: [400],
    words: /too large for model with [\d,]+ maximum context length/i,
    window: [re(String.raw`model with ${N} maximum context length`)],
    prompt: [re(String.raw`prompt contains ${N} tokens`)],
  },
  {
    // "Trying to keep the first 10136 tokens when context the overflows. However, the model is loaded
    // with context length of only 7866 tokens, which is not enough. …", or "The number of tokens to keep
    // from the initial prompt is greater than the context length" (400; some versions answer 200).
    provider: 'lm-studio',
    statuses: [400, 200],
    words: /model is loaded with context length of only|tokens to keep from the initial prompt is greater than the context length/i,
    window: [re(String.raw`context length of only ${N} tokens`)],
    prompt: [re(String.raw`keep the first ${N} tokens`)],
  },
  {
    // "prompt too long; exceeded max context length by 200 tokens", "the input length exceeds the context
    // length" (400): the number is the excess, not the window, so none is read.
    provider: 'ollama',
    statuses: [400, 500],
    words: /prompt too long; exceeded (?:max )?context length|input length exceeds the (?:maximum )?context length/i,
  },
  {
    // OpenAI and Azure OpenAI (400 `context_length_exceeded`: "This model's maximum context length is 8192
    // tokens. However, your messages resulted in 8545 tokens."; the Responses API: "Your input exceeds the
    // context window of this model"); vLLM's OpenAI server and OpenRouter in the same words ("However, you
    // requested 5000 tokens", "your request has 4176 input tokens", "you requested about 9000 tokens").
    provider: 'openai',
    statuses: [400],
    words: /maximum context length is [\d,]+ tokens|context_length_exceeded|exceeds the context window/i,
    window: [re(String.raw`maximum context length is ${N} tokens`)],
    prompt: [re(String.raw`(?:resulted in|requested(?: about)?|request has) ${N}(?: input)? tokens`)],
  },
];

/** What the general rule reads as a refusal for length, and what it leaves alone. */
const GENERAL_STATUSES: readonly number[] = [400, 413, 422];
const GENERAL_WORDS = /\bcontext\b|\btokens\b|\blength\b|too long|too large/i;
const NOT_LENGTH = /rate.?limit|per minute|quota|max_(?:completion_|new_|output_)?tokens|output tokens|completion tokens/i;

/** Numbers under this are no window (a typo, an index): the text is read as naming none. */
const MIN_WINDOW_TOKENS = 256;

/**
 * Read an answer as a refusal for length.
 * @param answer.status - the HTTP status (200 for an error inside a 2xx answer)
 * @param answer.text - the raw body, else the client's error message
 * @returns the reading, or undefined when the answer is no refusal for length
 */
export function readRefusal(answer: { status: number; text: string }): RefusalReading | undefined {
  const { status, text } = answer;
  for (const shape of SHAPES) {
    if (!shape.statuses.includes(status) || !shape.words.test(text)) continue;
    const windowTokens = firstNumber(text, shape.window ?? []);
    const promptTokens = firstNumber(text, shape.prompt ?? []);
    return {
      provider: shape.provider,
      ...(windowTokens !== undefined && windowTokens >= MIN_WINDOW_TOKENS ? { windowTokens } : {}),
      ...(promptTokens !== undefined && promptTokens > 0 ? { promptTokens } : {}),
    };
  }
  if (status === 413) return { provider: 'http-413' };
  if (GENERAL_STATUSES.includes(status) && GENERAL_WORDS.test(text) && !NOT_LENGTH.test(text)) return { provider: 'general' };
  return undefined;
}

function firstNumber(text: string, patterns: readonly RegExp[]): number | undefined {
  for (const p of patterns) {
    const m = p.exec(text);
    if (m) {
      const n = Number(m[1]!.replace(/,/g, ''));
      if (Number.isSafeInteger(n)) return n;
    }
  }
  return undefined;
}
