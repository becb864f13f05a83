/**
 * What a model call answered, checked before the runner reads it.
 *
 * `checkCompletion` (field report F27): an endpoint may answer 200 with a body that is no chat
 * completion — an `{"error": …}` object (some proxies and gateways do this for quota, auth and
 * upstream failures), an empty object, an HTML page. Such an answer is a model error that quotes
 * what the endpoint said, never a TypeError from reading `choices[0]` of nothing.
 *
 * `StreamAssembler`: a streamed Chat Completions answer (`stream: true`) put back together into one completion, the
 * way the OpenAI SDKs assemble it, and tolerant of what OpenAI-compatible upstreams send
 * differently (field report F25):
 *
 * - Content (and refusal) deltas are concatenated; each content delta is handed on as it arrives.
 * - Tool calls: a delta belongs to the call with its `id` when it names one already seen, else to
 *   a new call when it names a new `id`; without an `id` (or with an empty one, as some servers
 *   send on continuations) to the call with its `index`, and without an `index` either to the
 *   last call (the first delta of a stream without indexes opens call 0). A repeated `id`, a
 *   repeated name, or a last delta that repeats the whole arguments changes nothing, so an
 *   upstream that repeats id and name on the last delta still gives one call, and one whose
 *   deltas omit `index` gives its calls with their arguments joined.
 * - A call that never got an id is given one (`call_<n>`): the conversation needs one to pair the
 *   call with its result.
 * - What cannot be assembled is an error (`StreamAssemblyError`), never an empty answer: a stream
 *   that ended without any choice, without a `finish_reason`, a tool call without a name, or
 *   `finish_reason: "tool_calls"` with no call.
 *
 * The final usage chunk (`stream_options.include_usage`, empty `choices`) gives `usage`.
 */
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionMessageToolCall } from 'openai/resources/chat/completions';

/** A streamed answer that cannot be put together into a completion. */
export class StreamAssemblyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StreamAssemblyError';
  }
}

/** An answer (status 2xx) that is not a chat completion; `message` quotes what the endpoint said. */
export class MalformedAnswerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedAnswerError';
  }
}

/** Longest piece of an unexpected answer quoted in an error. */
const QUOTE_MAX_CHARS = 300;

/**
 * The answer of a non-streamed call, checked to be a chat completion with a message.
 * @throws MalformedAnswerError quoting the endpoint's own error message when the body carries one,
 *   else the start of the body
 */
export function checkCompletion(answer: unknown): ChatCompletion {
  const body = answer as { choices?: unknown; error?: unknown } | null | undefined;
  const choices = body && typeof body === 'object' ? body.choices : undefined;
  const first = Array.isArray(choices) ? (choices[0] as { message?: unknown } | undefined) : undefined;
  if (first && typeof first === 'object' && first.message && typeof first.message === 'object') return answer as ChatCompletion;
  const said = errorMessageOf(body && typeof body === 'object' ? body.error : undefined);
  if (said !== undefined) throw new MalformedAnswerError(`The model endpoint answered with an error: ${said}`);
  const what = Array.isArray(choices)
    ? choices.length === 0
      ? 'an answer with no choices'
      : 'a choice without a message'
    : 'an answer that is not a chat completion';
  throw new MalformedAnswerError(`The model endpoint sent ${what}: ${quote(answer)}`);
}

/** The message of an error object (`{message, code, type}`) or string, with its code when it has one. */
function errorMessageOf(error: unknown): string | undefined {
  if (typeof error === 'string' && error.trim()) return error.trim().slice(0, QUOTE_MAX_CHARS);
  if (!error || typeof error !== 'object') return undefined;
  const e = error as { message?: unknown; code?: unknown; type?: unknown };
  const message = typeof e.message === 'string' && e.message.trim() ? e.message.trim().slice(0, QUOTE_MAX_CHARS) : quote(error);
  const code = typeof e.code === 'string' || typeof e.code === 'number' ? String(e.code) : typeof e.type === 'string' ? e.type : undefined;
  return code && !message.includes(code) ? `${message} (${code})` : message;
}

function quote(value: unknown): string {
  const text = typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value));
  return text.length > QUOTE_MAX_CHARS ? `${text.slice(0, QUOTE_MAX_CHARS)}…` : text;
}

interface CallSlot {
  index: number | undefined;
  id: string;
  name: string;
  arguments: string;
}

/** Assembles the chunks of one streamed answer (choice 0). */
export class StreamAssembler {
  private id = '';
  private model = '';
  private created = 0;
  private content: string | null = null;
  private refusal: string | null = null;
  private finishReason: string | null = null;
  private usage: ChatCompletion['usage'];
  private readonly calls: CallSlot[] = [];
  private sawChoice = false;

  /** @param onDelta - gets each content delta as it arrives */
  constructor(private readonly onDelta?: (text: string) => void) {}

  /** Add one chunk. @throws StreamAssemblyError for a tool-call delta that belongs to no call and opens none */
  add(chunk: ChatCompletionChunk): void {
    if (chunk.id) this.id = chunk.id;
    if (chunk.model) this.model = chunk.model;
    if (chunk.created) this.created = chunk.created;
    if (chunk.usage) this.usage = chunk.usage;
    for (const choice of Array.isArray(chunk.choices) ? chunk.choices : []) {
      // One agent, one answer (`n` is never sent): other choices are not ours.
      if (choice.index !== undefined && choice.index !== null && choice.index !== 0) continue;
      this.sawChoice = true;
      if (choice.finish_reason) this.finishReason = choice.finish_reason;
      const delta = choice.delta;
      if (!delta) continue;
      if (typeof delta.content === 'string' && delta.content.length > 0) {
        this.content = (this.content ?? '') + delta.content;
        this.onDelta?.(delta.content);
      }
      if (typeof delta.refusal === 'string' && delta.refusal.length > 0) this.refusal = (this.refusal ?? '') + delta.refusal;
      for (const call of delta.tool_calls ?? []) this.addToolCallDelta(call);
    }
  }

  private addToolCallDelta(delta: NonNullable<ChatCompletionChunk.Choice.Delta['tool_calls']>[number]): void {
    const index = typeof delta.index === 'number' ? delta.index : undefined;
    const id = typeof delta.id === 'string' && delta.id.length > 0 ? delta.id : undefined;
    const name = typeof delta.function?.name === 'string' && delta.function.name.length > 0 ? delta.function.name : undefined;
    const args = typeof delta.function?.arguments === 'string' ? delta.function.arguments : '';
    let slot: CallSlot | undefined;
    if (id !== undefined) {
      slot = this.calls.find((c) => c.id === id);
      if (!slot) {
        // A new id at an index whose call has none yet (the id came late) names that call.
        const byIndex = index !== undefined ? this.lastWithIndex(index) : undefined;
        slot = byIndex && byIndex.id === '' ? byIndex : this.open(index);
        slot.id = id;
      }
    } else if (index !== undefined) {
      slot = this.lastWithIndex(index) ?? this.open(index);
    } else {
      slot = this.calls.at(-1) ?? this.open(undefined);
    }
    if (name !== undefined) slot.name = name; // set, never appended: a repeated name stays one name
    if (args.length > 0 && !repeatsWhole(slot.arguments, args)) slot.arguments += args;
  }

  private lastWithIndex(index: number): CallSlot | undefined {
    for (let i = this.calls.length - 1; i >= 0; i--) if (this.calls[i]!.index === index) return this.calls[i];
    return undefined;
  }

  private open(index: number | undefined): CallSlot {
    const slot: CallSlot = { index, id: '', name: '', arguments: '' };
    this.calls.push(slot);
    return slot;
  }

  /**
   * The assembled completion.
   * @throws StreamAssemblyError when the stream cannot make one (see the module comment)
   */
  finish(): ChatCompletion {
    if (!this.sawChoice) throw new StreamAssemblyError('the stream ended without any answer (no chunk had a choice)');
    if (!this.finishReason)
      throw new StreamAssemblyError('the stream ended without a finish_reason (cut off before the answer was complete)');
    const nameless = this.calls.findIndex((c) => c.name === '');
    if (nameless >= 0) throw new StreamAssemblyError(`tool call ${nameless + 1} of ${this.calls.length} has no function name`);
    if (this.finishReason === 'tool_calls' && this.calls.length === 0) {
      throw new StreamAssemblyError('finish_reason is "tool_calls" but no tool call could be assembled from the stream');
    }
    const toolCalls: ChatCompletionMessageToolCall[] = this.calls.map((c, i) => ({
      id: c.id || `call_${i}`,
      type: 'function',
      function: { name: c.name, arguments: c.arguments },
    }));
    return {
      id: this.id,
      object: 'chat.completion',
      created: this.created,
      model: this.model,
      choices: [
        {
          index: 0,
          logprobs: null,
          finish_reason: this.finishReason as ChatCompletion.Choice['finish_reason'],
          message: {
            role: 'assistant',
            content: this.content,
            refusal: this.refusal,
            ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
          },
        },
      ],
      ...(this.usage ? { usage: this.usage } : {}),
    };
  }
}

/** A fragment that is the whole of what is already there and already complete JSON: a repeat, not more. */
function repeatsWhole(sofar: string, fragment: string): boolean {
  if (sofar.length === 0 || fragment !== sofar) return false;
  try {
    JSON.parse(sofar);
    return true;
  } catch {
    return false;
  }
}
