/**
 * `hermes admin …`: store maintenance run with the fleet stopped.
 *
 *   hermes admin reshard --to N   move every session and cron job to the layout of N shards
 */
import { InvalidArgumentError, type Command } from 'commander';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { resolveRedis } from '../../scheduler/store/redis/connect.ts';
import { openRedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { reshard } from '../reshard.ts';
import { action } from '../run-command.ts';
import { printOut } from '../terminal-text.ts';

/** A positive whole number of shards. */
function parseShardCount(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a positive whole number of shards');
  return n;
}

/** Register `hermes admin` and its subcommands on `program`. */
export function registerAdminCommands(program: Command, getConfig: () => HermesConfig): void {
  const admin = program.command('admin').description('store maintenance (run with every worker stopped)');
  admin
    .command('reshard')
    .description('move every session and cron job to another shard count (redis.shards), then record it')
    .requiredOption('--to <n>', 'the new shard count', parseShardCount)
    .action(
      action(async (opts: { to: number }) => {
        const cfg = getConfig();
        const { topology } = await resolveRedis(cfg, { allowStart: false });
        const redis = openRedisClient(topology, 'commands');
        const queueConn = openRedisClient(topology, 'bullmq');
        redis.on('error', () => {});
        queueConn.on('error', () => {});
        try {
          const r = await reshard(redis, queueConn, cfg, opts.to, printOut);
          if (r.from === r.to && r.sessionsMoved === 0 && r.cronJobsMoved === 0) {
            printOut(`The store already has ${r.to} shard(s); nothing to move.`);
          } else {
            printOut(
              `Resharded ${r.from} → ${r.to} shard(s). Start every process with HERMES_REDIS_SHARDS=${r.to} (redis.shards: ${r.to}).`,
            );
          }
        } finally {
          redis.disconnect();
          queueConn.disconnect();
        }
      }),
    );
}
