/**
 * A value a client sends for each `/v1` field the parameter table ignores or refuses
 * (gateway/http/v1/v1-param-table.ts), per endpoint, for the tests that send them all: every
 * ignored field accepted and kept from the model, every refusal answered with the field and why.
 * test/v1-param-table.test.ts checks that every such rule of the table has its sample here.
 */
import type { V1Endpoint } from '../../gateway/http/v1/v1-param-table.ts';

/** A value of each ignored field, as the official clients would send it. */
export const IGNORED_SAMPLES: Record<V1Endpoint, Record<string, unknown>> = {
  chat: {
    metadata: { ticket: 'T-1', team: 'ops' },
    store: true,
    parallel_tool_calls: false,
    service_tier: 'flex',
    prompt_cache_key: 'tenant-7',
    prompt_cache_options: { mode: 'implicit', ttl: '30m' },
    prompt_cache_retention: '24h',
    reasoning_effort: 'high',
    verbosity: 'low',
    prediction: { type: 'content', content: 'the old text' },
  },
  responses: {
    stream_options: { include_obfuscation: false },
    include: ['reasoning.encrypted_content'],
    parallel_tool_calls: false,
    service_tier: 'priority',
    prompt_cache_key: 'tenant-7',
    prompt_cache_options: { mode: 'explicit' },
    prompt_cache_retention: 'in_memory',
    reasoning: { effort: 'high', summary: 'auto' },
    context_management: [{ type: 'compaction', compact_threshold: 100_000 }],
    max_tool_calls: 5,
    access_programs: { cyber: 'standard' },
  },
};

/**
 * A value of each refused field, and a refused value of each field that is otherwise taken
 * (the table's `refused`), as the official clients would send it.
 */
export const REFUSED_SAMPLES: Record<V1Endpoint, Record<string, unknown>> = {
  chat: {
    tools: [{ type: 'function', function: { name: 'shell', parameters: { type: 'object' } } }],
    tool_choice: 'auto',
    functions: [{ name: 'shell', parameters: {} }],
    function_call: 'auto',
    web_search_options: { search_context_size: 'low' },
    audio: { voice: 'alloy', format: 'mp3' },
    moderation: { model: 'omni-moderation-latest' },
    n: 2,
    logprobs: true,
    top_logprobs: 3,
    modalities: ['text', 'audio'],
  },
  responses: {
    tools: [{ type: 'function', name: 'shell', parameters: {}, strict: false }],
    tool_choice: 'required',
    moderation: { model: 'omni-moderation-latest' },
    prompt: { id: 'pmpt_123', version: '2' },
    conversation: 'conv_123',
    top_logprobs: 2,
    include: ['message.output_text.logprobs'],
  },
};
