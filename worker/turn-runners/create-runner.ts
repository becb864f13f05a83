import type { HermesConfig } from '../../scheduler/config/config.ts';
import type { RunnerSpec } from '../../scheduler/session/origin.ts';
import { commandEnv, type CommandEnvPolicy } from '../runtime/command-env.ts';
import { AgentRunner, type AgentRunnerOptions } from './agent-runner.ts';
import { CommandRunner } from './command-runner.ts';
import type { TurnRunner } from './turn-runner.ts';
import type { OnDoubt } from '../../scheduler/journal/turn-replay.ts';
import type { Toolbox } from '../tools/toolbox.ts';

/** Runners of one worker process: one shared agent runner, command runners made per spec. */
export class RunnerFactory {
  readonly agent: AgentRunner;
  private readonly config: HermesConfig;
  private readonly commandEnvSource: Readonly<Record<string, string | undefined>>;

  /**
   * @param options.commandEnvSource - the worker's environment, from which commands get the
   *   base variables and what the operator lets through (`../command-env.ts`); default empty
   * @param options.toolbox - the operator's tools for agent turns (none without it)
   * @param options.metrics - where the agent's model calls are counted, or a function giving them
   *   at each count (not counted without it)
   * @param options.modelState - the fleet's learned windows and breakers (without it the runner keeps its own)
   */
  constructor(
    config: HermesConfig,
    options: {
      commandEnvSource?: Readonly<Record<string, string | undefined>>;
      toolbox?: Toolbox;
      metrics?: AgentRunnerOptions['metrics'];
      modelState?: AgentRunnerOptions['modelState'];
    } = {},
  ) {
    this.config = config;
    this.commandEnvSource = options.commandEnvSource ?? {};
    this.agent = new AgentRunner({ ...agentRunnerOptions(config, options.metrics), modelState: options.modelState }, options.toolbox);
  }

  /** The runner for a stored spec. */
  forSpec(spec: RunnerSpec): TurnRunner {
    return spec.kind === 'command'
      ? new CommandRunner(spec.command, spec.timeoutSeconds * 1000, { env: this.commandEnv(spec.name), onDoubt: this.onDoubt })
      : this.agent;
  }

  /** A command runner for a cron job's `--script` (no name: only the global `command_env` applies). */
  script(command: string, timeoutMs: number): CommandRunner {
    return new CommandRunner(command, timeoutMs, { env: this.commandEnv(), onDoubt: this.onDoubt });
  }

  private get onDoubt(): OnDoubt {
    return this.config.worker.command_turn_on_doubt;
  }

  /**
   * The environment of a command before its turn's variables: the minimal base, `command_env`
   * of config, then `commands.<name>` (`env`, `pass_env`) when the command is a named one.
   */
  commandEnv(name?: string): Record<string, string> {
    const policies: CommandEnvPolicy[] = [{ pass: this.config.command_env.pass }];
    const named = name === undefined ? undefined : this.config.commands[name];
    if (named) policies.push({ pass: named.pass_env, set: named.env });
    return commandEnv(this.commandEnvSource, policies);
  }
}

/** The agent runner's settings from `agent.*` of config. */
export function agentRunnerOptions(config: HermesConfig, metrics?: AgentRunnerOptions['metrics']): AgentRunnerOptions {
  const a = config.agent;
  return {
    baseUrl: a.base_url,
    apiKey: a.api_key,
    model: a.model,
    timeoutSeconds: a.timeout_seconds,
    maxToolCalls: a.max_tool_calls,
    models: Object.fromEntries(
      Object.entries(a.models).map(([name, m]) => [
        name,
        {
          model: m.model,
          baseUrl: m.base_url,
          apiKey: m.api_key,
          contextWindowTokens: m.context_window_tokens,
        },
      ]),
    ),
    fallbackModels: a.fallback_models,
    contextWindowTokens: a.context_window_tokens,
    compaction: {
      threshold: a.compaction.threshold,
      target: a.compaction.target,
      keepRecentMessages: a.compaction.keep_recent_messages,
      model: a.compaction.model,
    },
    cutHeadShare: config.tools.result_head_share,
    maxRetries: a.max_retries,
    minContextWindowTokens: a.min_context_window_tokens,
    circuitBreaker: { failureThreshold: a.breaker_failure_threshold, cooldownSeconds: a.breaker_cooldown_seconds },
    maxTokensPerTurn: a.max_tokens_per_turn,
    metrics,
  };
}
