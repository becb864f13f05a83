/**
 * How each provider refuses a request over its context window: the status and body the local model
 * server (`fake-openai.ts`) answers in its words, so the product's reading of refusals
 * (worker/context/refusal-shapes.ts) is tested against what these servers send, where they send it.
 * `window` is the limit, `prompt` the refused request's size as the server counted it.
 */

/** The refusals the model server can answer with. */
export const PROVIDER_REFUSALS = [
  /** OpenAI and Azure OpenAI: 400 `context_length_exceeded`, both numbers in the message. */
  'openai',
  /** Anthropic's 400 `invalid_request_error` "prompt is too long: N tokens > M maximum". */
  'anthropic',
  /** Gemini's OpenAI-compatible endpoint: 400 INVALID_ARGUMENT, the error inside a list. */
  'gemini',
  /** vLLM's OpenAI server: 400 with a top-level error object and no `error` key, `code` the number 400. */
  'vllm',
  /** vLLM's engine: "The decoder prompt (length N) is longer than the maximum model length of M". */
  'vllm-engine',
  /** llama.cpp's server: 400 `exceed_context_size_error` with no number anywhere. */
  'llama.cpp',
  /** llama.cpp's newer server: the numbers in the message and as `n_prompt_tokens`, `n_ctx`. */
  'llama.cpp-counts',
  /** Text Generation Inference: 422 "Input validation error: `inputs` tokens + `max_new_tokens` must be <= M". */
  'tgi',
  /** Ollama: 400 "prompt too long; exceeded max context length by N tokens" (the excess, not the window). */
  'ollama',
  /** Mistral: 400 "Prompt contains N tokens … too large for model with M maximum context length". */
  'mistral',
  /** LM Studio: 400 "… the model is loaded with context length of only M tokens …". */
  'lm-studio',
] as const;
export type ProviderRefusal = (typeof PROVIDER_REFUSALS)[number];

/** The answer a server of `provider` sends for a request of `prompt` tokens over its `window`. */
export function refusalAnswer(provider: ProviderRefusal, window: number, prompt: number): { status: number; body: unknown } {
  switch (provider) {
    case 'openai':
      return {
        status: 400,
        body: {
          error: {
            message: `This model's maximum context length is ${window} tokens. However, your messages resulted in ${prompt} tokens. Please reduce the length of the messages.`,
            type: 'invalid_request_error',
            param: 'messages',
            code: 'context_length_exceeded',
          },
        },
      };
    case 'anthropic':
      return {
        status: 400,
        body: {
          type: 'error',
          error: { type: 'invalid_request_error', message: `prompt is too long: ${prompt} tokens > ${window} maximum` },
        },
      };
    case 'gemini':
      return {
        status: 400,
        body: [
          {
            error: {
              code: 400,
              message: `The input token count (${prompt}) exceeds the maximum number of tokens allowed (${window}).`,
              status: 'INVALID_ARGUMENT',
            },
          },
        ],
      };
    case 'vllm':
      return {
        status: 400,
        body: {
          object: 'error',
          message: `This model's maximum context length is ${window} tokens. However, you requested ${prompt} tokens (${prompt} in the messages, 0 in the completion). Please reduce the length of the messages or completion.`,
          type: 'BadRequestError',
          param: null,
          code: 400,
        },
      };
    case 'vllm-engine':
      return {
        status: 400,
        body: {
          error: {
            message: `The decoder prompt (length ${prompt}) is longer than the maximum model length of ${window}. Make sure that \`max_model_len\` is no smaller than the number of text tokens.`,
            type: 'BadRequestError',
            param: null,
            code: 400,
          },
        },
      };
    case 'llama.cpp':
      return {
        status: 400,
        body: {
          error: {
            code: 400,
            message: 'the request exceeds the available context size, try increasing it',
            type: 'exceed_context_size_error',
          },
        },
      };
    case 'llama.cpp-counts':
      return {
        status: 400,
        body: {
          error: {
            code: 400,
            message: `request (${prompt} tokens) exceeds the available context size (${window} tokens), try increasing it`,
            type: 'exceed_context_size_error',
            n_prompt_tokens: prompt,
            n_ctx: window,
          },
        },
      };
    case 'tgi':
      return {
        status: 422,
        body: {
          error: `Input validation error: \`inputs\` tokens + \`max_new_tokens\` must be <= ${window}. Given: ${prompt} \`inputs\` tokens and 1 \`max_new_tokens\``,
          error_type: 'validation',
        },
      };
    case 'ollama':
      return { status: 400, body: { error: `prompt too long; exceeded max context length by ${prompt - window} tokens` } };
    case 'mistral':
      return {
        status: 400,
        body: {
          object: 'error',
          message: `Prompt contains ${prompt} tokens and 0 draft tokens, too large for model with ${window} maximum context length`,
          type: 'invalid_request_error',
          param: null,
          code: null,
        },
      };
    case 'lm-studio':
      return {
        status: 400,
        body: {
          error: `Trying to keep the first ${prompt} tokens when context the overflows. However, the model is loaded with context length of only ${window} tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input`,
        },
      };
  }
}
