/**
 * Sampling and output parameters a `/v1` caller may set for the model calls of its turn: the
 * fields docs/GATEWAY.md "Client parameters" marks as sent to the model. The gateway checks them
 * (gateway/http/v1/v1-params.ts), the run's job carries them, and the agent runner sends them
 * with every model call of the turn (worker/turn-runners/agent-runner.ts). Each is the Chat
 * Completions field of that name.
 */

/** `response_format` of Chat Completions. */
export type ModelResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; json_schema: { name: string; schema?: Record<string, unknown>; strict?: boolean | null; description?: string } };

/** What a caller may ask of the model; unset fields are not sent (the endpoint's defaults apply). */
export interface ModelParams {
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  max_completion_tokens?: number;
  stop?: string | string[];
  seed?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  /** Token id (of the model's tokenizer) → bias, -100 to 100. */
  logit_bias?: Record<string, number>;
  response_format?: ModelResponseFormat;
  user?: string;
  safety_identifier?: string;
}

/** The names of `ModelParams`, in the order they are documented. */
export const MODEL_PARAM_NAMES = [
  'temperature',
  'top_p',
  'max_tokens',
  'max_completion_tokens',
  'stop',
  'seed',
  'presence_penalty',
  'frequency_penalty',
  'logit_bias',
  'response_format',
  'user',
  'safety_identifier',
] as const satisfies ReadonlyArray<keyof ModelParams>;

/** Why the model stopped: the Chat Completions `finish_reason` (`stop`, `length`, `content_filter`, `tool_calls`, or an upstream's own). */
export type FinishReason = string;
