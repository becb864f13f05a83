/**
 * The `agent` runner: an OpenAI-compatible Chat Completions endpoint through
 * the official `openai` client (works with any compatible server).
 *
 * A turn is a tool-calling loop (SPEC §3): the model gets the tools the
 * operator declared for the turn's surface; every `tool_calls` answer is run
 * (the calls of one answer concurrently), the results are appended as `tool`
 * messages and the model is called again, until it answers without tool calls.
 *
 * Limits: `agent.max_tool_calls` calls per turn — a call past it is refused
 * with a message the model sees, and the model is then asked to answer
 * without tools (`tool_choice: none`); a model that still keeps calling ends
 * the turn with an error after `EXTRA_ROUNDS_AFTER_LIMIT` more rounds. Each
 * call has the toolbox's timeout and result cap. The whole turn, tools
 * included, is bounded by `agent.timeout_seconds`; the turn's AbortSignal
 * (drain, interrupt, stop) stops the model call or the running tools at once.
 */
import { setMaxListeners } from 'node:events';
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIUserAbortError, APIError } from 'openai';
import type {
  ChatCompletion, ChatCompletionCreateParamsNonStreaming, ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import { TurnError } from '../../scheduler/errors/turn-error.ts';
import type { Toolbox } from '../tools/toolbox.ts';
import type { TurnSurfaces } from '../tools/tool.ts';
import type { ChatMessage, ToolCallRecord, TurnEvent, TurnOutput, TurnRequest, TurnRunner } from './turn-runner.ts';

/** Settings of the agent runner (from `agent.*`). */
export interface AgentRunnerOptions {
  /** Endpoint root, e.g. `http://127.0.0.1:8000/v1`. */
  baseUrl: string | undefined;
  apiKey: string | undefined;
  model: string;
  /** Per model call, and for a whole turn with its tool calls, seconds. */
  timeoutSeconds: number;
  /** Tool calls one turn may make (`agent.max_tool_calls`). @defaultValue 20 */
  maxToolCalls?: number;
}

/** Model rounds allowed after the tool-call limit was reached before the turn fails. */
export const EXTRA_ROUNDS_AFTER_LIMIT = 2;

/** Longest `arguments` text of a call shown in events (the model sees it whole). */
export const EVENT_ARGUMENTS_MAX_CHARS = 200;

/** System prompt of every agent turn. */
export const SYSTEM_PROMPT =
  'You are Hermes, an agent that runs unattended tasks for its user. Be concise and factual; say what you checked.';

/** What `complete()` returns. */
export interface Completion {
  content: string;
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  /** Tool-calling steps before the answer (empty without tools). */
  steps: ChatMessage[];
}

/** Options of `complete()`. */
export interface CompleteOptions {
  /** System prompt; `null` sends none (the messages carry their own). Default `SYSTEM_PROMPT`. */
  system?: string | null;
  jsonObject?: boolean;
  /** Offer the operator's tools allowed from this surface (each of these surfaces); without it the call has no tools. */
  surface?: TurnSurfaces;
  onEvent?: TurnRequest['onEvent'];
  onDelta?: TurnRequest['onDelta'];
}

/** Runs agent turns; `complete()` is also used by the judges (with tools, so they judge what a tool saw). */
export class AgentRunner implements TurnRunner {
  readonly kind = 'agent' as const;
  private readonly client: OpenAI | undefined;
  private readonly maxToolCalls: number;

  /** @param toolbox - the operator's tools; without it turns have none */
  constructor(
    private readonly options: AgentRunnerOptions,
    private readonly toolbox?: Toolbox,
  ) {
    this.maxToolCalls = options.maxToolCalls ?? 20;
    this.client = options.baseUrl || options.apiKey
      ? new OpenAI({
          baseURL: options.baseUrl,
          apiKey: options.apiKey ?? 'not-set',
          timeout: options.timeoutSeconds * 1000,
          maxRetries: 0,
        })
      : undefined;
  }

  /** One agent turn, tools included. */
  async run(request: TurnRequest): Promise<TurnOutput> {
    const res = await this.complete(request.messages, request.signal, request.sessionId, {
      surface: request.surface ?? 'cli', onEvent: request.onEvent, onDelta: request.onDelta,
    });
    return { reply: res.content, steps: res.steps, usage: res.usage };
  }

  /**
   * Chat Completions with the system prompt prepended, as a tool-calling loop
   * when `options.surface` is set and tools are declared.
   * @returns reply text, token usage when reported, and the tool steps
   * @throws TurnError `config` when no endpoint is configured, `network`, `timeout`, `aborted`, `model`
   */
  async complete(messages: ChatMessage[], signal: AbortSignal, sessionId?: string, options: CompleteOptions = {}): Promise<Completion> {
    if (!this.client) {
      throw new TurnError('No model is configured: set OPENAI_BASE_URL (and OPENAI_API_KEY) or agent.base_url.', { kind: 'config', sessionId });
    }
    const client = this.client;
    const system = options.system === undefined ? SYSTEM_PROMPT : options.system;
    const deadline = AbortSignal.timeout(this.options.timeoutSeconds * 1000);
    const turnSignal = AbortSignal.any([signal, deadline]);
    // One listener per model call and per tool call, up to the call limit: not a leak.
    setMaxListeners(this.maxToolCalls + 50, turnSignal);
    const surface = options.surface;
    const tools = surface && this.toolbox && this.maxToolCalls > 0 ? this.toolbox.definitions(surface) : [];
    const convo: ChatCompletionMessageParam[] = [...(system ? [{ role: 'system' as const, content: system }] : []), ...messages.map(toParam)];
    const steps: ChatMessage[] = [];
    const usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
    let sawUsage = false;
    let calls = 0;
    let roundsAfterLimit = 0;
    try {
      for (;;) {
        const limitReached = calls >= this.maxToolCalls;
        const body: ChatCompletionCreateParamsNonStreaming = {
          model: this.options.model,
          messages: convo,
          ...(tools.length > 0 ? { tools, ...(limitReached ? { tool_choice: 'none' as const } : {}) } : {}),
          ...(options.jsonObject ? { response_format: { type: 'json_object' as const } } : {}),
        };
        const res = options.onDelta ? await streamed(client, body, options.onDelta, turnSignal) : await client.chat.completions.create(body, { signal: turnSignal });
        if (res.usage) {
          sawUsage = true;
          usage.prompt_tokens += res.usage.prompt_tokens;
          usage.completion_tokens += res.usage.completion_tokens;
          usage.total_tokens += res.usage.total_tokens;
        }
        const message = res.choices[0]?.message;
        const toolCalls: ToolCallRecord[] = (message?.tool_calls ?? []).flatMap((c) =>
          c.type === 'function' ? [{ id: c.id, name: c.function.name, arguments: c.function.arguments }] : [],
        );
        if (toolCalls.length === 0 || tools.length === 0) {
          return { content: message?.content ?? '', steps, ...(sawUsage ? { usage } : {}) };
        }
        if (limitReached && ++roundsAfterLimit > EXTRA_ROUNDS_AFTER_LIMIT) {
          throw new TurnError(`The model kept calling tools after the limit of ${this.maxToolCalls} calls per turn.`, { kind: 'model', sessionId });
        }
        const assistant: ChatMessage = { role: 'assistant', content: message?.content ?? '', tool_calls: toolCalls };
        steps.push(assistant);
        convo.push(toParam(assistant));
        const results = await Promise.all(toolCalls.map((call) => {
          calls += 1;
          return this.runCall(call, calls, { sessionId: sessionId ?? '', surface: surface!, signal: turnSignal }, options.onEvent);
        }));
        if (turnSignal.aborted) throw turnSignal.reason;
        for (const r of results) {
          steps.push(r);
          convo.push(toParam(r));
        }
      }
    } catch (err) {
      if (err instanceof TurnError) throw err;
      if (signal.aborted) throw new TurnError('The turn was aborted.', { kind: 'aborted', sessionId, cause: err });
      if (deadline.aborted) {
        throw new TurnError(`The turn did not finish within ${this.options.timeoutSeconds}s.`, { kind: 'timeout', sessionId, cause: err });
      }
      throw toTurnError(err, sessionId);
    }
  }

  /** Run the `n`th call of the turn (or refuse it past the limit), with its events. */
  private async runCall(
    call: ToolCallRecord,
    n: number,
    ctx: { sessionId: string; surface: TurnSurfaces; signal: AbortSignal },
    onEvent: CompleteOptions['onEvent'],
  ): Promise<ChatMessage> {
    const shownArgs = call.arguments.slice(0, EVENT_ARGUMENTS_MAX_CHARS);
    emit(onEvent, { type: 'tool.called', data: { callId: call.id, name: call.name, arguments: shownArgs } });
    if (n > this.maxToolCalls) {
      const content = `Error: refused — this turn has used its limit of ${this.maxToolCalls} tool calls. Answer now with what you have.`;
      emit(onEvent, { type: 'tool.result', data: { callId: call.id, name: call.name, arguments: shownArgs, ms: 0, bytes: 0, error: 'tool call limit reached' } });
      return { role: 'tool', tool_call_id: call.id, name: call.name, content };
    }
    const r = await this.toolbox!.call(call.name, call.arguments, ctx);
    emit(onEvent, {
      type: 'tool.result',
      data: { callId: call.id, name: call.name, arguments: shownArgs, ms: r.ms, bytes: r.bytes, ...(r.error ? { error: r.error.message } : {}), ...(r.truncated ? { truncated: true } : {}) },
    });
    return { role: 'tool', tool_call_id: call.id, name: call.name, content: r.content };
  }
}

/** One model call with `stream: true`: content deltas go to `onDelta`; resolves with the assembled completion. */
async function streamed(
  client: OpenAI,
  body: ChatCompletionCreateParamsNonStreaming,
  onDelta: (text: string) => void,
  signal: AbortSignal,
): Promise<ChatCompletion> {
  const stream = client.chat.completions.stream({ ...body, stream: true, stream_options: { include_usage: true } }, { signal });
  stream.on('content', (delta) => {
    if (delta) onDelta(delta);
  });
  return (await stream.finalChatCompletion()) as ChatCompletion;
}

function emit(onEvent: CompleteOptions['onEvent'], event: TurnEvent): void {
  if (!onEvent) return;
  try {
    void Promise.resolve(onEvent(event)).catch(() => {});
  } catch {
    /* an event sink never fails a turn */
  }
}

/** A runner message as a Chat Completions message. */
function toParam(m: ChatMessage): ChatCompletionMessageParam {
  if (m.role === 'tool') return { role: 'tool', tool_call_id: m.tool_call_id, content: m.content };
  if (m.role === 'assistant' && m.tool_calls?.length) {
    return {
      role: 'assistant',
      content: m.content || null,
      tool_calls: m.tool_calls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } })),
    };
  }
  return { role: m.role, content: m.content };
}

function toTurnError(err: unknown, sessionId: string | undefined): TurnError {
  if (err instanceof TurnError) return err;
  if (err instanceof APIUserAbortError) return new TurnError('The turn was aborted.', { kind: 'aborted', sessionId, cause: err });
  if (err instanceof APIConnectionTimeoutError) return new TurnError('The model did not answer in time.', { kind: 'timeout', sessionId, cause: err });
  if (err instanceof APIConnectionError) {
    return new TurnError(`The model endpoint could not be reached: ${err.message}`, { kind: 'network', sessionId, cause: err });
  }
  if (err instanceof APIError) {
    return new TurnError(`The model endpoint answered ${err.status ?? 'an error'}: ${err.message}`, { kind: 'model', sessionId, cause: err });
  }
  return new TurnError(`The model call failed: ${(err as Error).message}`, { kind: 'model', sessionId, cause: err });
}
