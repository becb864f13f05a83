/**
 * Running `hermes cron …` in tests: in-process with captured output and exit
 * code (`runCronCli`); real processes go through `cli/hermes.mjs`.
 */
import { Command } from 'commander';
import type { CliContext } from '../../cli/cli-context.ts';
import { registerCronCommands, type CronCliIo } from '../../cli/commands/cron.ts';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { Keys } from '../../scheduler/store/keys.ts';
import { openQueues } from '../../scheduler/services.ts';
import { StoreUnavailableError } from '../../scheduler/errors/store-unavailable-error.ts';
import { describeUrl } from '../../scheduler/store/redis/connect.ts';
import { ping } from '../../scheduler/store/redis/embedded-redis.ts';
import { openRedisClient } from '../../scheduler/store/redis/connection-factory.ts';

/** A CliContext over `config` (Redis at `config.redis.url`). */
export function cliContext(config: HermesConfig): CliContext {
  return {
    config,
    async connect() {
      const url = config.redis.url;
      if (!url || !(await ping(url))) {
        throw new StoreUnavailableError(`Redis at ${url ? describeUrl(url) : '(no REDIS_URL)'} is unreachable.`);
      }
      const topology = { kind: 'single' as const, url };
      const redis = openRedisClient(topology, 'commands');
      const keys = new Keys(config.redis.prefix, { shards: config.redis.shards });
      const queues = openQueues(keys, redis);
      return {
        redis,
        keys,
        queues,
        url,
        topology,
        async close() {
          await queues.close();
          redis.disconnect();
        },
      };
    },
  };
}

class ExitSignal extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}

/** Result of one CLI invocation. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run `hermes cron <args>` in this process. */
export async function runCronCli(config: HermesConfig, args: string[], now: () => number = Date.now): Promise<CliResult> {
  const out: string[] = [];
  const err: string[] = [];
  let code = 0;
  const io: CronCliIo = {
    out: (t) => out.push(t),
    err: (t) => err.push(t),
    setExitCode: (c) => {
      code = c;
    },
    exit: (c) => {
      throw new ExitSignal(c);
    },
    now,
  };
  const program = new Command('hermes').exitOverride();
  registerCronCommands(program, cliContext(config), io);
  try {
    await program.parseAsync(['cron', ...args], { from: 'user' });
  } catch (e) {
    if (e instanceof ExitSignal) code = e.code;
    else throw e;
  }
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}
