/**
 * The `hermes` command line: `up`, `worker`, `gateway`, `loop`, `heartbeat`,
 * `goal`, `chat`, `status`, `models`, `key`, `mcp`, `cron …`, `admin reshard`, `completion`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, CommanderError } from 'commander';
import { configFileWarning, loadConfig, type HermesConfig } from '../scheduler/config/config.ts';
import type { Logger } from '../scheduler/logger.ts';
import { nameTable } from '../scheduler/names/name-table.ts';
import type { RedisTopology } from '../scheduler/store/redis/connection-factory.ts';
import type { WorkerProcess } from '../worker/worker-process.ts';
import type { HermesMetrics } from '../scheduler/metrics.ts';
import type { Gateway } from '../gateway/gateway-process.ts';
import type { PlatformStatus } from '../gateway/plugins/platform-registry.ts';
import { isPlatformName } from '../scheduler/delivery/platforms.ts';
import { DEFAULT_SESSION, type CliConnection, type CliContext } from './cli-context.ts';
import { apiAuthText, platformStartedLine, upBanner } from './up-banner.ts';
import { takeUpLock } from './up-lock.ts';
import { commanderOutput, printOut } from './terminal-text.ts';
import {
  action,
  endQuietlyOnClosedPipe,
  exitCodeOf,
  reportError,
  reportFatal,
  settleWithin,
  stopDeadlineMs,
  waitForSignal,
} from './run-command.ts';

endQuietlyOnClosedPipe();
process.on('uncaughtException', reportFatal);
process.on('unhandledRejection', reportFatal);

const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

let config: HermesConfig | undefined;
function getConfig(): HermesConfig {
  config ??= loadConfig();
  return config;
}
/**
 * Connect to the product's Redis (`connectCli`). The Redis client, the stores and the logger load with
 * the first connection, so a command that needs none (`cron next`, `key`, usage errors) never loads them
 * (docs/BENCHMARKS.md, "CLI start-up").
 */
async function connectCli(cfg: HermesConfig, target?: RedisTopology | string): Promise<CliConnection> {
  return (await import('./connect-cli.ts')).connectCli(cfg, target);
}
/** The logger of a long-running command, loaded with it. */
async function createLogger(options: Parameters<typeof import('../scheduler/logger.ts').createLogger>[0]): Promise<Logger> {
  return (await import('../scheduler/logger.ts')).createLogger(options);
}
/** `resolveRedis` of a long-running command, loaded with it. */
async function resolveRedis(...args: Parameters<typeof import('../scheduler/store/redis/connect.ts').resolveRedis>) {
  return (await import('../scheduler/store/redis/connect.ts')).resolveRedis(...args);
}
const ctx = (): CliContext => ({ config: getConfig(), connect: () => connectCli(getConfig()) });

/** The configuration of `hermes up` and `hermes gateway`: with `--insecure-no-auth`, `api_server.insecure_no_auth` set. */
function serverConfig(opts: { insecureNoAuth?: boolean }): HermesConfig {
  if (opts.insecureNoAuth) config = loadConfig({ overrides: { 'api_server.insecure_no_auth': true }, overridesFrom: '--insecure-no-auth' });
  return getConfig();
}

/** `--insecure-no-auth` of `hermes up` and `hermes gateway` (scheduler/config/api-key.ts). */
const INSECURE_NO_AUTH_HELP = 'serve the HTTP API with no key: every user of this host can use it as you (loopback binds only)';

/**
 * The command this call runs (its first word), or `undefined` for none. A call loads only the
 * modules of that command; `--help`, `help`, `completion` and an unknown word load them all
 * (docs/BENCHMARKS.md, "CLI start-up").
 */
const invoked = process.argv.slice(2).find((a) => !a.startsWith('-'));
const COMMAND_MODULES = nameTable<'loop' | 'cron' | 'admin'>({
  loop: 'loop',
  proactive: 'loop',
  heartbeat: 'loop',
  hb: 'loop',
  goal: 'loop',
  cron: 'cron',
  admin: 'admin',
});
const OWN_COMMANDS = new Set(['up', 'worker', 'gateway', 'chat', 'status', 'models', 'key', 'mcp']);
const loadsAll = invoked === undefined || !(invoked in COMMAND_MODULES || OWN_COMMANDS.has(invoked));
const wants = (module: 'loop' | 'cron' | 'admin') => loadsAll || COMMAND_MODULES[invoked] === module;

const program = commanderOutput(new Command());
program
  .name('hermes')
  .description('Agent schedules that keep firing when every client has gone away.')
  .version(VERSION, '-V, --version', 'print the version')
  .showHelpAfterError()
  .exitOverride(); // usage errors exit 2 (see the catch at the end)

/** Start the gateway with its `/api/cron` backed by the cron service. */
async function gatewayFor(
  cfg: HermesConfig,
  topology: RedisTopology,
  log: Logger,
  metrics?: HermesMetrics,
): Promise<{ gateway: Gateway; close(): Promise<void> }> {
  const [{ startGateway }, { openCronApi }] = await Promise.all([import('../gateway/gateway-process.ts'), import('./gateway-cron-api.ts')]);
  const cron = await openCronApi(cfg, topology, log);
  try {
    const gateway = await startGateway({ config: cfg, topology, log, cron: cron.api, metrics, version: VERSION });
    return {
      gateway,
      close: async () => {
        await gateway.close();
        await cron.close();
      },
    };
  } catch (err) {
    await cron.close();
    throw err;
  }
}

/**
 * Warnings a long-running process logs once at start: a `config.yaml` others may read.
 * @param show - also print them here (`hermes up` with the chat attached logs to a file)
 */
function warnAtStart(cfg: HermesConfig, log: Logger, show?: (line: string) => void): void {
  const warning = configFileWarning(cfg.home);
  if (!warning) return;
  log.warn({ file: join(cfg.home, 'config.yaml') }, warning);
  show?.(`Warning: ${warning}`);
}

/**
 * Wait for `work` (a drain) at most the stop deadline; past it, log that the process stops
 * without waiting more (Redis does not answer) and return false.
 */
async function stopInTime(cfg: HermesConfig, log: Logger, work: Promise<unknown>): Promise<boolean> {
  const deadlineMs = stopDeadlineMs(cfg);
  if (await settleWithin(work, deadlineMs)) return true;
  log.warn({ deadlineMs }, `stop deadline (${deadlineMs / 1000}s) passed, Redis not answering: stopping without waiting more`);
  return false;
}

/**
 * Print one line for each platform that was still starting when the banner was printed, once it has
 * started or failed (`platformStartedLine`); later changes are `hermes status`'s. Called in the same
 * turn as the snapshot the banner was made from, so no change falls between the two.
 */
function announcePlatformStarts(gateway: Gateway, shown: readonly PlatformStatus[], cfg: HermesConfig): void {
  const starting = new Set(shown.filter((p) => isPlatformName(p.name) && (p.state === 'idle' || p.state === 'loading')).map((p) => p.name));
  if (starting.size === 0) return;
  const unsubscribe = gateway.onPlatformChange((status) => {
    if (!starting.has(status.name) || !isPlatformName(status.name)) return;
    const line = platformStartedLine(status.name, status, cfg);
    if (line === undefined) return;
    starting.delete(status.name);
    printOut(line);
    if (starting.size === 0) unsubscribe();
  });
}

/** Start a worker in this process (its modules load only for the commands that run one). */
async function startWorker(cfg: HermesConfig, topology: RedisTopology, log: Logger): Promise<WorkerProcess> {
  const { WorkerProcess } = await import('../worker/worker-process.ts');
  return await WorkerProcess.start({ config: cfg, topology, log });
}

program
  .command('up')
  .description('start the stack: embedded Redis if needed, a worker, the gateway, and the session client')
  .option('-s, --session <id>', 'session to attach to', DEFAULT_SESSION)
  .option('--no-chat', 'do not attach a client; run until Ctrl+C')
  .option('--no-gateway', 'do not start the gateway (Telegram, Slack, HTTP /v1 and /api)')
  .option('--insecure-no-auth', INSECURE_NO_AUTH_HELP)
  .action(
    action(async (opts: { session: string; chat: boolean; gateway: boolean; insecureNoAuth?: boolean }) => {
      const cfg = serverConfig(opts);
      // With the chat attached, logs go to a file so they do not run through the conversation.
      const attach = opts.chat && process.stdin.isTTY;
      const logFile = attach ? join(cfg.home, 'logs', 'hermes.log') : undefined;
      // One `hermes up` per home: a second one says where the first is instead of failing to bind (up-lock.ts).
      const lock = takeUpLock(cfg.home);
      process.on('exit', () => lock.release());
      // Without the chat the log goes to stderr: its start-up lines wait until the banner is out.
      let bannerShown = () => {};
      const holdUntil = logFile ? undefined : new Promise<void>((resolve) => (bannerShown = resolve));
      const log = await createLogger({ level: cfg.log_level, name: 'up', file: logFile, holdUntil });
      // A Ctrl+C during the start is remembered (not Node's default exit, which would strand the
      // embedded Redis): the start completes, then everything is stopped in order.
      let stopEarly = false;
      const onEarly = () => {
        stopEarly = true;
      };
      process.on('SIGINT', onEarly);
      process.on('SIGTERM', onEarly);
      warnAtStart(cfg, log, logFile ? printOut : undefined);
      const target = await resolveRedis(cfg, { allowStart: true, log }).catch((err: unknown) => {
        bannerShown(); // the held lines say why
        throw err;
      });
      const embedded = target.embedded;
      if (embedded) log.info({ socket: embedded.paths.socket, dir: embedded.paths.dir, redisPid: embedded.pid }, 'embedded Redis started');
      let worker: WorkerProcess | undefined;
      let gw: Awaited<ReturnType<typeof gatewayFor>> | undefined;
      try {
        worker = await startWorker(cfg, target.topology, log);
        // One process: the gateway's /metrics also shows the worker's ticks and turns.
        gw = opts.gateway ? await gatewayFor(cfg, target.topology, log, worker.metrics) : undefined;
      } catch (err) {
        // Nothing half-started stays behind: not the worker, not the embedded Redis.
        bannerShown();
        process.off('SIGINT', onEarly);
        process.off('SIGTERM', onEarly);
        await worker?.drain();
        await embedded?.stop();
        throw err;
      }
      const running = worker;
      if (gw) log.info({ url: gw.gateway.httpAddress.url }, 'gateway listening');
      const platforms = gw?.gateway.platforms() ?? [];
      const banner = upBanner(cfg, {
        redis: (await import('../scheduler/store/redis/connection-factory.ts')).describeTopology(target.topology),
        ...(gw ? { apiUrl: gw.gateway.httpAddress.url, auth: gw.gateway.auth } : { apiUrl: undefined }),
        platforms: Object.fromEntries(platforms.filter((p) => isPlatformName(p.name)).map((p) => [p.name, p])),
        chatSession: attach ? opts.session : undefined,
        logFile,
      });
      if (!stopEarly) for (const line of banner) printOut(line);
      bannerShown();
      if (gw && !stopEarly) announcePlatformStarts(gw.gateway, platforms, cfg);
      // An embedded Redis that died and could not be restarted stops the stack.
      const redisLost: Promise<Error> = embedded ? embedded.failed : new Promise<never>(() => {});
      /** Stop everything; false when the stop deadline cut the drain short (Redis not answering). */
      const stop = async (): Promise<boolean> => {
        // The gateway keeps delivering replies while the worker drains; the embedded Redis goes last.
        const drained = await stopInTime(
          cfg,
          log,
          (async () => {
            await Promise.all([gw?.gateway.drain(), running.drain()]);
            await gw?.close();
          })(),
        );
        await embedded?.stop();
        return drained;
      };
      let lost: Error | undefined;
      let drained: boolean;
      try {
        let interrupted = stopEarly;
        if (interrupted) {
          // Stopped during the start: straight to the stop below.
        } else if (attach) {
          const conn = await connectCli(cfg, target.topology);
          const { runChat } = await import('./chat-client.ts');
          const ended = await Promise.race([runChat(cfg, conn, opts.session), redisLost]);
          if (ended instanceof Error) {
            lost = ended;
          } else {
            interrupted = ended === 'interrupt';
            await conn.close();
            // Ctrl+C in the attached chat stops everything `hermes up` started; Ctrl+D only detaches.
            if (!interrupted) printOut('The stack keeps running; Ctrl+C stops it.');
          }
        }
        // Later Ctrl+Cs are acknowledged while the drain runs (waitForSignal keeps listening).
        const signal = waitForSignal({ stopping: interrupted || lost !== undefined });
        // The start-up listener stays until here, so no Ctrl+C ever meets Node's default exit.
        process.off('SIGINT', onEarly);
        process.off('SIGTERM', onEarly);
        if (!interrupted && !lost) {
          const first = await Promise.race([signal, redisLost]);
          if (first instanceof Error) lost = first;
        }
        if (lost) log.error({ err: lost.message }, 'embedded Redis lost; stopping the stack');
        if (attach) printOut(lost ? `${lost.message}\nStopping: worker drain, gateway…` : 'Stopping: worker drain, gateway, Redis…');
      } finally {
        process.off('SIGINT', onEarly);
        process.off('SIGTERM', onEarly);
        drained = await stop();
      }
      if (attach) printOut('Stopped.');
      if (lost) process.exitCode = reportError(lost);
      else if (!drained) process.exitCode = 1;
      // Whatever still waits on a Redis that is gone (or the chat's input) must not keep the process.
      if (lost || !drained) process.exit();
    }),
  );

program
  .command('worker')
  .description('run one worker process (for fleets); needs REDIS_URL or a running `hermes up`')
  .action(
    action(async () => {
      const cfg = getConfig();
      const log = await createLogger({ level: cfg.log_level, name: 'worker' });
      // Listening before the start: a Ctrl+C during the start still drains instead of killing.
      const signal = waitForSignal();
      warnAtStart(cfg, log);
      const target = await resolveRedis(cfg, { allowStart: false, log });
      const worker = await startWorker(cfg, target.topology, log);
      const sig = await signal;
      log.info({ signal: sig }, 'stopping');
      if (!(await stopInTime(cfg, log, worker.drain()))) process.exit(1);
    }),
  );

program
  .command('gateway')
  .description(
    'run the gateway sidecar: Telegram, Slack and Discord relays, OpenAI-compatible /v1, /api, the web console and session streams',
  )
  .option('--insecure-no-auth', INSECURE_NO_AUTH_HELP)
  .action(
    action(async (opts: { insecureNoAuth?: boolean }) => {
      const cfg = serverConfig(opts);
      const log = await createLogger({ level: cfg.log_level, name: 'gateway' });
      // Listening before the start: a Ctrl+C during the start still drains instead of killing.
      const signal = waitForSignal();
      warnAtStart(cfg, log);
      const target = await resolveRedis(cfg, { allowStart: false, log });
      const gw = await gatewayFor(cfg, target.topology, log);
      printOut(`gateway listening on ${gw.gateway.httpAddress.url} · ${apiAuthText(gw.gateway.auth)}`);
      const sig = await signal;
      log.info({ signal: sig }, 'stopping');
      if (
        !(await stopInTime(
          cfg,
          log,
          (async () => {
            await gw.gateway.drain();
            await gw.close();
          })(),
        ))
      )
        process.exit(1);
    }),
  );

if (wants('loop')) (await import('./commands/loop.ts')).registerLoopCommand(program, ctx);
if (wants('cron')) {
  (await import('./commands/cron.ts')).registerCronCommands(program, {
    get config() {
      return getConfig();
    },
    connect: () => connectCli(getConfig()),
  });
}

program
  .command('chat')
  .description('attach to a session: type messages and slash commands; Ctrl+D detaches')
  .option('-s, --session <id>', 'session id', DEFAULT_SESSION)
  .action(
    action(async (opts: { session: string }) => {
      const cfg = getConfig();
      const conn = await connectCli(cfg);
      try {
        const { runChat } = await import('./chat-client.ts');
        await runChat(cfg, conn, opts.session);
      } finally {
        await conn.close();
      }
    }),
  );

program
  .command('status')
  .description('workers, the loops, heartbeats and goals of every session, and the cron jobs (a page of each; finished ones with --all)')
  .option(
    '--all',
    'every loop, heartbeat and cron job (every page), finished schedules, achieved or cleared goals and completed cron jobs too',
  )
  .option('--limit <n>', 'loops and heartbeats, and cron jobs, shown of each (default api_server.page_size, 50)')
  .option('--json', 'machine-readable output')
  .action(
    action(async (opts: { all?: boolean; json?: boolean; limit?: string }) => {
      const cfg = getConfig();
      const conn = await connectCli(cfg);
      try {
        const { runStatus } = await import('./commands/status.ts');
        await runStatus(cfg, conn, opts);
      } finally {
        await conn.close();
      }
    }),
  );

program
  .command('models')
  .description("the models the agent may call: each one's context window and where it comes from, and its circuit breaker")
  .option('--json', 'machine-readable output')
  .action(
    action(async (opts: { json?: boolean }) => {
      const cfg = getConfig();
      const conn = await connectCli(cfg);
      try {
        const { runModels } = await import('./commands/models.ts');
        await runModels(cfg, conn, opts);
      } finally {
        await conn.close();
      }
    }),
  );

program
  .command('key')
  .description("print the key of this home's HTTP API (API_SERVER_KEY, else $HERMES_HOME/api.key, made if there is none yet)")
  .option('--json', 'machine-readable output: key, source (config or file) and file')
  .action(
    action(async (opts: { json?: boolean }) => {
      const { printApiKey } = await import('./commands/key.ts');
      printApiKey(getConfig(), opts);
    }),
  );

program
  .command('mcp')
  .description('serve MCP on stdio: other agents (Claude Code, Cursor, Codex) create and manage schedules (docs/MCP.md)')
  .action(
    action(async () => {
      const cfg = getConfig();
      const conn = await connectCli(cfg);
      try {
        const { runMcpServer } = await import('./commands/mcp.ts');
        await runMcpServer(cfg, conn, VERSION);
      } finally {
        await conn.close();
      }
    }),
  );

if (wants('admin')) (await import('./commands/admin.ts')).registerAdminCommands(program, getConfig);
if (loadsAll) (await import('./commands/completion.ts')).registerCompletionCommand(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // commander has printed the message; help and version are not errors
    process.exitCode = exitCodeOf(err);
  } else {
    process.exitCode = reportError(err);
  }
}
