/** `node --import tsx test/support/cron-cli-main.ts cron …`: the cron commands as a real process. */
import { Command } from 'commander';
import { registerCronCommands } from '../../cli/commands/cron.ts';
import { loadConfig } from '../../scheduler/config.ts';
import { cliContext } from './cron-cli.ts';

const program = new Command('hermes');
registerCronCommands(program, cliContext(loadConfig()));
await program.parseAsync(process.argv);
