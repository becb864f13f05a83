/**
 * Running `hermes loop|heartbeat|hb|goal …` in tests: in this process, the product's commands
 * (`registerLoopCommand`, connecting as `hermes` does) with their output and exit code captured; a
 * process start (~0.45 s of CPU) fewer than `runHermes`. Real processes go through `cli/hermes.mjs`.
 */
import { Command, CommanderError } from 'commander';
import { registerLoopCommand } from '../../cli/commands/loop.ts';
import { connectCli } from '../../cli/connect-cli.ts';
import { exitCodeOf } from '../../cli/run-command.ts';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import type { CliResult } from './cron-cli.ts';

/** Run `hermes <args>` (`loop`, `heartbeat`, `hb` or `goal` and theirs) against `config`'s Redis. */
export async function runLoopCli(config: HermesConfig, args: string[]): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  let code = 0;
  const program = new Command('hermes').exitOverride().configureOutput({ writeOut: (t) => (stdout += t), writeErr: (t) => (stderr += t) });
  registerLoopCommand(program, () => ({ config, connect: () => connectCli(config) }), {
    out: (t) => (stdout += `${t}\n`),
    err: (t) => (stderr += `${t}\n`),
    setExitCode: (c) => (code = c),
  });
  try {
    await program.parseAsync(args, { from: 'user' });
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    code = exitCodeOf(err); // as cli/main.ts ends a commander exit
  }
  return { code, stdout, stderr };
}
