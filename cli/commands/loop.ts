/**
 * `hermes loop <args> --session S` — the `/loop` command from a trusted
 * surface. Besides the chat grammar it may attach a command runner:
 * `--command NAME` (from `commands:` in config.yaml) or `--run "<shell>"`.
 */
import type { Command } from 'commander';
import { parseLoopArgs } from '../../scheduler/loop-command.ts';
import { LOOP_HELP } from '../../scheduler/loop-command.ts';
import { LoopStore } from '../../scheduler/loop-store.ts';
import { ScheduleService } from '../../scheduler/schedule-service.ts';
import { ScheduleInputError } from '../../scheduler/errors/schedule-input-error.ts';
import { createLogger } from '../../scheduler/logger.ts';
import type { RunnerSpec } from '../../scheduler/loop-state.ts';
import type { HermesConfig } from '../../scheduler/config.ts';
import type { CliContext } from '../cli-context.ts';
import { action, cliLogLevel } from '../run-command.ts';

/** Runner spec of `--command NAME` / `--run CMD`. @throws ScheduleInputError for an unknown name or both flags */
export function runnerFromFlags(config: HermesConfig, flags: { command?: string; run?: string; timeoutSeconds?: string }): RunnerSpec {
  if (flags.command && flags.run) throw new ScheduleInputError('Use --command NAME or --run CMD, not both.');
  if (flags.command) {
    const c = config.commands[flags.command];
    if (!c) {
      const known = Object.keys(config.commands);
      throw new ScheduleInputError(`Unknown command "${flags.command}"; configured: ${known.length ? known.join(', ') : 'none (see commands: in config.yaml)'}.`, { field: 'command' });
    }
    return { kind: 'command', command: c.command, timeoutSeconds: c.timeout_seconds, name: flags.command };
  }
  if (flags.run !== undefined) {
    if (flags.run.trim() === '') throw new ScheduleInputError('--run needs a shell command.', { field: 'run' });
    const t = flags.timeoutSeconds === undefined ? 60 : Number(flags.timeoutSeconds);
    if (!Number.isFinite(t) || t <= 0) throw new ScheduleInputError('--timeout-seconds needs a positive number.', { field: 'timeout-seconds' });
    return { kind: 'command', command: flags.run, timeoutSeconds: t };
  }
  return { kind: 'agent' };
}

/**
 * Apply a loop command for a session and return the reply text.
 * @throws ScheduleInputError for bad input; StoreUnavailableError when Redis refused
 */
export async function applyLoopCommand(
  ctx: CliContext,
  sessionId: string,
  argText: string,
  runner: RunnerSpec,
): Promise<string> {
  const { config } = ctx;
  const cmd = parseLoopArgs(argText, { minIntervalSeconds: config.loops.min_interval_seconds, maxPromptChars: config.agent.max_prompt_chars });
  const conn = await ctx.connect();
  try {
    const service = new ScheduleService(
      new LoopStore(conn.redis, conn.keys, conn.queues, config.worker.prefetch_lead_ms),
      { maxTicks: config.loops.max_ticks, selfPacedFloorSeconds: config.loops.self_paced_floor_seconds },
      createLogger({ level: cliLogLevel(config), name: 'cli' }),
    );
    switch (cmd.action) {
      case 'set': return await service.set(sessionId, 'loop', cmd, { origin: { surface: 'cli' }, runner });
      case 'status': return await service.status(sessionId, 'loop');
      case 'pause': return await service.pause(sessionId, 'loop');
      case 'resume': return await service.resume(sessionId, 'loop');
      case 'stop': return await service.stop(sessionId, 'loop');
      default: return LOOP_HELP;
    }
  } finally {
    await conn.close();
  }
}

/** Add `hermes loop` to `program`; `ctx` is called when the command runs (config is loaded lazily). */
export function registerLoopCommand(program: Command, ctx: () => CliContext): void {
  program
    .command('loop')
    .description('set or control the loop of a session: hermes loop 10m check the CI build --session S')
    .argument('[args...]', 'interval, prompt, --times N, --until <condition>, or status|pause|resume|stop|help')
    .requiredOption('-s, --session <id>', 'session id')
    .option('--command <name>', 'run a configured command (commands: in config.yaml) instead of the agent')
    .option('--run <shell>', 'run this shell command as the turn instead of the agent')
    .option('--timeout-seconds <n>', 'timeout of --run')
    .allowUnknownOption()
    .action(action(async (args: string[], opts: { session: string; command?: string; run?: string; timeoutSeconds?: string }) => {
      const c = ctx();
      const runner = runnerFromFlags(c.config, opts);
      process.stdout.write(`${await applyLoopCommand(c, opts.session, args.join(' '), runner)}\n`);
    }));
}
