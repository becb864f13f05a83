import type { HermesConfig } from '../../scheduler/config.ts';
import type { RunnerSpec } from '../../scheduler/loop-state.ts';
import { AgentRunner } from './agent-runner.ts';
import { CommandRunner } from './command-runner.ts';
import type { TurnRunner } from './turn-runner.ts';

/** Runners of one worker process: one shared agent runner, command runners made per spec. */
export class RunnerFactory {
  readonly agent: AgentRunner;

  constructor(config: HermesConfig) {
    this.agent = new AgentRunner({
      baseUrl: config.agent.base_url,
      apiKey: config.agent.api_key,
      model: config.agent.model,
      timeoutSeconds: config.agent.timeout_seconds,
    });
  }

  /** The runner for a stored spec. */
  forSpec(spec: RunnerSpec): TurnRunner {
    return spec.kind === 'command' ? new CommandRunner(spec.command, spec.timeoutSeconds * 1000) : this.agent;
  }
}
