/**
 * Whether agent turns have a model to call, in the words every surface uses to say so (`hermes up`'s
 * banner, the reply that sets a loop, heartbeat or goal, `hermes cron add`). Agent turns need an
 * OpenAI-compatible endpoint: `agent.base_url` (OPENAI_BASE_URL), or a declared model
 * (`agent.models.<name>`) with its own `base_url` for schedules that name it with `--model`.
 * Without one every agent turn fails ("No model is configured", worker/turn-runners/agent-runner.ts).
 */
import type { HermesConfig } from './config/config.ts';

/** The endpoint and model an agent turn calls. */
export interface AgentModel {
  baseUrl: string;
  model: string;
}

/**
 * The model a turn on `modelName` (a declared name, `--model`) or on the primary calls, or
 * `undefined` when there is no endpoint for it.
 */
export function agentModel(config: HermesConfig, modelName?: string | null): AgentModel | undefined {
  const declared = modelName ? config.agent.models[modelName] : undefined;
  const baseUrl = declared?.base_url ?? config.agent.base_url;
  if (!baseUrl) return undefined;
  return { baseUrl, model: declared?.model ?? config.agent.model };
}

/** What is missing, and how to set it: the line a surface shows when there is no model. */
export const NO_MODEL =
  'no model: agent turns will fail — set OPENAI_BASE_URL and OPENAI_API_KEY (or agent.base_url and agent.api_key in config.yaml)';

/**
 * The warning for a schedule of agent turns set without a model (`modelName`: its `--model`), or
 * `undefined` when its turns have one. `where` names whose configuration was read when that is not
 * the workers' own (the CLI's: a fleet's workers may have a model the shell lacks).
 */
export function noModelWarning(config: HermesConfig, modelName?: string | null, where?: string): string | undefined {
  if (agentModel(config, modelName)) return undefined;
  return `Warning: ${NO_MODEL}${where ? ` (${where})` : ''}.`;
}
