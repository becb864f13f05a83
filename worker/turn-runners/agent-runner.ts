/**
 * The `agent` runner: an OpenAI-compatible Chat Completions endpoint through
 * the official `openai` client (works with any compatible server).
 */
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIUserAbortError, APIError } from 'openai';
import { TurnError } from '../../scheduler/errors/turn-error.ts';
import type { ChatMessage, TurnRequest, TurnRunner } from './turn-runner.ts';

/** Settings of the agent runner (from `agent.*`). */
export interface AgentRunnerOptions {
  /** Endpoint root, e.g. `http://127.0.0.1:8000/v1`. */
  baseUrl: string | undefined;
  apiKey: string | undefined;
  model: string;
  /** Per call, seconds. */
  timeoutSeconds: number;
}

/** System prompt of every agent turn. */
export const SYSTEM_PROMPT =
  'You are Hermes, an agent that runs unattended tasks for its user. Be concise and factual; say what you checked.';

/** Runs a turn as one Chat Completions call; `complete()` is also used by the judges. */
export class AgentRunner implements TurnRunner {
  readonly kind = 'agent' as const;
  private readonly client: OpenAI | undefined;

  constructor(private readonly options: AgentRunnerOptions) {
    this.client = options.baseUrl || options.apiKey
      ? new OpenAI({
          baseURL: options.baseUrl,
          apiKey: options.apiKey ?? 'not-set',
          timeout: options.timeoutSeconds * 1000,
          maxRetries: 0,
        })
      : undefined;
  }

  /** One Chat Completions call. @returns the reply text ('' when the model returned none) */
  async run(request: TurnRequest): Promise<string> {
    return (await this.complete(request.messages, request.signal, request.sessionId)).content;
  }

  /**
   * Chat Completions with the system prompt prepended.
   * @returns reply text and token usage when reported
   * @throws TurnError `config` when no endpoint is configured, `network`, `timeout`, `aborted`, `model`
   */
  async complete(
    messages: ChatMessage[],
    signal: AbortSignal,
    sessionId?: string,
    options: { system?: string | null; jsonObject?: boolean } = {},
  ): Promise<{ content: string; usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } }> {
    if (!this.client) {
      throw new TurnError('No model is configured: set OPENAI_BASE_URL (and OPENAI_API_KEY) or agent.base_url.', { kind: 'config', sessionId });
    }
    const system = options.system === undefined ? SYSTEM_PROMPT : options.system;
    try {
      const res = await this.client.chat.completions.create(
        {
          model: this.options.model,
          messages: system ? [{ role: 'system', content: system }, ...messages] : messages,
          ...(options.jsonObject ? { response_format: { type: 'json_object' as const } } : {}),
        },
        { signal },
      );
      return { content: res.choices[0]?.message?.content ?? '', usage: res.usage ?? undefined };
    } catch (err) {
      throw toTurnError(err, sessionId);
    }
  }
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
