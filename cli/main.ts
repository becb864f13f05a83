/**
 * The `hermes` command line: `up`, `worker`, `loop`, `chat`, `status`.
 */
import { Command } from 'commander';
import { loadConfig, type HermesConfig } from '../scheduler/config.ts';
import { createLogger } from '../scheduler/logger.ts';
import { resolveRedis } from '../scheduler/redis/connect.ts';
import { LoopStore } from '../scheduler/loop-store.ts';
import { statusLine } from '../scheduler/schedule-service.ts';
import { WorkerProcess } from '../worker/worker-process.ts';
import type { CliContext } from './cli-context.ts';
import { connectCli } from './connect-cli.ts';
import { runChat } from './chat-client.ts';
import { registerLoopCommand } from './commands/loop.ts';
import { registerCronCommands } from './commands/cron.ts';
import { action, reportError, waitForSignal } from './run-command.ts';

let config: HermesConfig | undefined;
function getConfig(): HermesConfig {
  config ??= loadConfig();
  return config;
}
const ctx = (): CliContext => ({ config: getConfig(), connect: () => connectCli(getConfig()) });

const program = new Command();
program.name('hermes').description('Agent schedules that keep firing when every client has gone away.').showHelpAfterError();

program
  .command('up')
  .description('start the stack: embedded Redis if needed, a worker, and the session client')
  .option('-s, --session <id>', 'session to attach to', 'main')
  .option('--no-chat', 'do not attach a client; run until Ctrl+C')
  .action(action(async (opts: { session: string; chat: boolean }) => {
    const cfg = getConfig();
    const log = createLogger({ level: cfg.log_level, name: 'up' });
    const target = await resolveRedis(cfg, { allowStart: true });
    if (target.embedded) log.info({ url: target.url, dir: `${cfg.home}/redis` }, 'embedded Redis started');
    const worker = await WorkerProcess.start({ config: cfg, redisUrl: target.url, log });
    const stop = async () => {
      await worker.drain();
      await target.embedded?.stop();
    };
    try {
      if (opts.chat && process.stdin.isTTY) {
        const conn = await connectCli(cfg, target.url);
        await runChat(cfg, conn, opts.session);
        await conn.close();
        process.stdout.write('The stack keeps running; Ctrl+C stops it.\n');
      } else {
        process.stdout.write(`hermes is up (Redis ${target.url}); Ctrl+C stops it.\n`);
      }
      await waitForSignal();
    } finally {
      await stop();
    }
  }));

program
  .command('worker')
  .description('run one worker process (for fleets); needs REDIS_URL or a running `hermes up`')
  .action(action(async () => {
    const cfg = getConfig();
    const log = createLogger({ level: cfg.log_level, name: 'worker' });
    const target = await resolveRedis(cfg, { allowStart: false });
    const worker = await WorkerProcess.start({ config: cfg, redisUrl: target.url, log });
    const sig = await waitForSignal();
    log.info({ signal: sig }, 'stopping');
    await worker.drain();
  }));

registerLoopCommand(program, ctx);
registerCronCommands(program, {
  get config() {
    return getConfig();
  },
  connect: () => connectCli(getConfig()),
});

program
  .command('chat')
  .description('attach to a session: type messages and slash commands; Ctrl+D detaches')
  .requiredOption('-s, --session <id>', 'session id')
  .action(action(async (opts: { session: string }) => {
    const cfg = getConfig();
    const conn = await connectCli(cfg);
    try {
      await runChat(cfg, conn, opts.session);
    } finally {
      await conn.close();
    }
  }));

program
  .command('status')
  .description('fleet health and every loop and heartbeat')
  .option('--json', 'machine-readable output')
  .action(action(async (opts: { json?: boolean }) => {
    const cfg = getConfig();
    const conn = await connectCli(cfg);
    try {
      const now = Date.now();
      const workers = await conn.redis.zrangebyscore(conn.keys.workers, now - 15_000, '+inf');
      const store = new LoopStore(conn.redis, conn.keys, conn.queues, cfg.worker.prefetch_lead_ms);
      const records = await store.list();
      if (opts.json) {
        process.stdout.write(`${JSON.stringify({ workers, schedules: records }, null, 2)}\n`);
        return;
      }
      process.stdout.write(`workers alive: ${workers.length}${workers.length ? ` (${workers.join(', ')})` : ''}\n`);
      for (const r of records) {
        const next = r.status === 'active' ? await store.nextDueAt(r) : undefined;
        process.stdout.write(`${r.sessionId}  ${statusLine(r, now, next)}\n`);
      }
      if (records.length === 0) process.stdout.write('no loops or heartbeats\n');
    } finally {
      await conn.close();
    }
  }));

try {
  await program.parseAsync(process.argv);
} catch (err) {
  process.exitCode = reportError(err);
}
