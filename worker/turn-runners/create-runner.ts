import type { HermesConfig } from '../../scheduler/config/config.ts';
import type { RunnerSpec } from '../../scheduler/loop/loop-state.ts';
import { commandEnv, type CommandEnvPolicy } from '../command-env.ts';
import { AgentRunner } from './agent-runner.ts';
import { CommandRunner } from './command-runner.ts';
import type { TurnRunner } from './turn-runner.ts';
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
   */
  constructor(config: HermesConfig, options: { commandEnvSource?: Readonly<Record<string, string | undefined>>; toolbox?: Toolbox } = {}) {
    this.config = config;
    this.commandEnvSource = options.commandEnvSource ?? {};
    this.agent = new AgentRunner({
      baseUrl: config.agent.base_url,
      apiKey: config.agent.api_key,
      model: config.agent.model,
      timeoutSeconds: config.agent.timeout_seconds,
      maxToolCalls: config.agent.max_tool_calls,
    }, options.toolbox);
  }

  /** The runner for a stored spec. */
  forSpec(spec: RunnerSpec): TurnRunner {
    return spec.kind === 'command'
      ? new CommandRunner(spec.command, spec.timeoutSeconds * 1000, { env: this.commandEnv(spec.name) })
      : this.agent;
  }

  /** A command runner for a cron job's `--script` (no name: only the global `command_env` applies). */
  script(command: string, timeoutMs: number): CommandRunner {
    return new CommandRunner(command, timeoutMs, { env: this.commandEnv() });
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
