/**
 * `hermes loop|heartbeat|goal <args> [--session S]` — the `/loop`,
 * `/heartbeat` and `/goal` commands from a trusted surface (the shell). The
 * grammar is the chat's; `--session` defaults to `main` (the session
 * `hermes up` attaches to). Besides the chat grammar a loop or heartbeat may
 * attach a command runner (`--command NAME` from `commands:` in config.yaml, or
 * `--run "<shell>"`) and a messaging route (`--deliver telegram:<chat>`).
 * Replies name shell commands, not chat commands; `--json` prints the reply
 * and the record after the change.
 */
import { printOut, terminalJson } from '../terminal-text.ts';
import { goalObject, scheduleObject } from '../../scheduler/loop/schedule-view.ts';
import type { Command } from 'commander';
import { parseLoopArgs, LOOP_HELP } from '../../scheduler/loop/loop-command.ts';
import { parseHeartbeatArgs, HEARTBEAT_HELP } from '../../scheduler/loop/heartbeat-command.ts';
import { parseGoalArgs, GOAL_HELP } from '../../scheduler/goal/goal-command.ts';
import type { LoopSpec } from '../../scheduler/loop/loop-service.ts';
import { ScheduleInputError } from '../../scheduler/errors/schedule-input-error.ts';
import { parseDeliveryTarget, routeOfTarget, type DeliveryTarget } from '../../scheduler/delivery/delivery-target.ts';
import { parseDeliverList } from '../../scheduler/delivery/deliver-list.ts';
import { unconfiguredPlatformWarnings } from '../../scheduler/delivery/unconfigured-platform.ts';
import { createLogger } from '../../scheduler/logger.ts';
import { chatToShell } from '../shell-text.ts';
import type { LoopKind } from '../../scheduler/tick/tick-kind.ts';
import type { Origin, RunnerSpec } from '../../scheduler/session/origin.ts';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import type { CliConnection, CliContext } from '../cli-context.ts';
import { action, cliLogLevel, processErrorSink, type ErrorSink } from '../run-command.ts';
import { goalServiceFor, loopStoreFor, loopServiceFor } from '../../scheduler/services.ts';

/** Session of shell commands that are given no `--session` (the one `hermes up` attaches to). */
export { DEFAULT_SESSION } from '../cli-context.ts';
import { DEFAULT_SESSION } from '../cli-context.ts';

/** Runner spec of `--command NAME` / `--run CMD`. @throws ScheduleInputError for an unknown name or both flags */
export function runnerFromFlags(config: HermesConfig, flags: { command?: string; run?: string; timeoutSeconds?: string }): RunnerSpec {
  if (flags.command && flags.run) throw new ScheduleInputError('Use --command NAME or --run CMD, not both.');
  if (flags.command) {
    const c = config.commands[flags.command];
    if (!c) {
      const known = Object.keys(config.commands);
      throw new ScheduleInputError(
        `Unknown command "${flags.command}"; configured: ${known.length ? known.join(', ') : 'none (see commands: in config.yaml)'}.`,
        { field: 'command' },
      );
    }
    return { kind: 'command', command: c.command, timeoutSeconds: c.timeout_seconds, name: flags.command };
  }
  if (flags.run !== undefined) {
    if (flags.run.trim() === '') throw new ScheduleInputError('--run needs a shell command.', { field: 'run' });
    const t = flags.timeoutSeconds === undefined ? 60 : Number(flags.timeoutSeconds);
    if (!Number.isFinite(t) || t <= 0)
      throw new ScheduleInputError('--timeout-seconds needs a positive number.', { field: 'timeout-seconds' });
    return { kind: 'command', command: flags.run, timeoutSeconds: t };
  }
  return { kind: 'agent' };
}

/**
 * Origin of a goal set from the shell: the CLI surface, with the messaging route of
 * `--deliver telegram:<chat>[:<thread>]` (or a Slack or Discord channel) when given. Loops and
 * heartbeats take every delivery target instead (`applyScheduleCommand`).
 * @throws ScheduleInputError for any other target
 */
export function originFromDeliver(deliver: string | undefined): Origin {
  if (deliver === undefined || deliver.trim() === '') return { surface: 'cli' };
  const invalid = (cause?: unknown) =>
    new ScheduleInputError(
      `Invalid --deliver "${deliver}": use telegram:<chat id>[:<thread id>], slack:<channel id>[:<thread_ts>], discord:<channel id>[:<thread id>] (or local, the default).`,
      { field: 'deliver', cause },
    );
  let target: DeliveryTarget;
  try {
    target = parseDeliveryTarget(deliver);
  } catch (err) {
    throw invalid(err);
  }
  if (target.kind === 'local') return { surface: 'cli' };
  if (target.kind !== 'telegram' && target.kind !== 'slack' && target.kind !== 'discord') throw invalid();
  return { surface: 'cli', route: routeOfTarget(target) };
}

/** What one shell command did: the reply text and the record after the change. */
export interface ShellReply {
  session: string;
  kind: LoopKind | 'goal';
  reply: string;
  record: unknown;
  /** What would keep it from working as set (written on stderr, not part of `--json`). */
  warnings?: string[];
}

/**
 * Apply a `/loop` or `/heartbeat` argument text to a session from the shell.
 * @param options.deliver - `--deliver`, parsed (`parseDeliverList`): it wins over one in the text
 * @returns with `warnings` for `--deliver` platform targets this shell's configuration has no bot token for
 *   (`unconfiguredPlatformWarnings`, as `hermes cron add` says them)
 * @throws ScheduleInputError for bad input — a webhook off the allow-list included (nothing changes);
 *   StoreUnavailableError when Redis refused
 */
export async function applyScheduleCommand(
  ctx: CliContext,
  kind: LoopKind,
  sessionId: string,
  argText: string,
  options: { runner: RunnerSpec; origin?: Origin; deliver?: string[] },
): Promise<ShellReply> {
  const { config } = ctx;
  const shell = (text: string) => chatToShell(text, sessionId);
  let spec: LoopSpec | undefined;
  let control: string;
  try {
    if (kind === 'loop') {
      const c = parseLoopArgs(argText, {
        minIntervalSeconds: config.loops.min_interval_seconds,
        maxPromptChars: config.agent.max_prompt_chars,
      });
      control = c.action;
      if (c.action === 'set') spec = c;
    } else {
      const c = parseHeartbeatArgs(argText, {
        minIntervalSeconds: config.heartbeat.min_interval_seconds,
        maxPromptChars: config.agent.max_prompt_chars,
      });
      control = c.action;
      if (c.action === 'set') spec = { ...c, times: null, until: null };
    }
  } catch (err) {
    if (err instanceof ScheduleInputError) err.message = shell(err.message);
    throw err;
  }
  if (control === 'help') return { session: sessionId, kind, reply: shell(kind === 'loop' ? LOOP_HELP : HEARTBEAT_HELP), record: null };
  return await withConnection(ctx, async (conn) => {
    const store = loopStoreFor(config, conn);
    const service = loopServiceFor(config, store, createLogger({ level: cliLogLevel(config), name: 'cli' }));
    if (control !== 'set' && control !== 'status') await mustExist(store.get(sessionId, kind), kind, shell);
    let reply: string;
    switch (control) {
      case 'set':
        if (options.deliver?.length) spec = { ...spec!, deliver: options.deliver };
        reply = await service.set(sessionId, kind, spec!, { origin: options.origin ?? { surface: 'cli' }, runner: options.runner });
        break;
      case 'pause':
        reply = await service.pause(sessionId, kind);
        break;
      case 'resume':
        reply = await service.resume(sessionId, kind);
        break;
      case 'stop':
        reply = await service.stop(sessionId, kind);
        break;
      default:
        reply = await service.status(sessionId, kind);
    }
    const record = await store.get(sessionId, kind);
    const warnings = control === 'set' ? unconfiguredPlatformWarnings(config, spec?.deliver ?? [], "this shell's configuration") : [];
    return {
      session: sessionId,
      kind,
      reply: shell(reply),
      record: record && scheduleObject(record, Date.now()),
      ...(warnings.length ? { warnings } : {}),
    };
  });
}

/**
 * Apply a `/loop` argument text to a session and return the reply text (shell wording).
 * @throws ScheduleInputError for bad input; StoreUnavailableError when Redis refused
 */
export async function applyLoopCommand(ctx: CliContext, sessionId: string, argText: string, runner: RunnerSpec): Promise<string> {
  return (await applyScheduleCommand(ctx, 'loop', sessionId, argText, { runner })).reply;
}

/**
 * Apply a `/goal` argument text to a session from the shell.
 * @throws ScheduleInputError for bad input; StoreUnavailableError when Redis refused
 */
export async function applyGoalCommand(
  ctx: CliContext,
  sessionId: string,
  argText: string,
  origin: Origin = { surface: 'cli' },
): Promise<ShellReply> {
  const { config } = ctx;
  const shell = (text: string) => chatToShell(text, sessionId);
  let c: ReturnType<typeof parseGoalArgs>;
  try {
    c = parseGoalArgs(argText, { maxPromptChars: config.agent.max_prompt_chars });
  } catch (err) {
    if (err instanceof ScheduleInputError) err.message = shell(err.message);
    throw err;
  }
  if (c.action === 'help') return { session: sessionId, kind: 'goal', reply: shell(GOAL_HELP), record: null };
  return await withConnection(ctx, async (conn) => {
    const goals = goalServiceFor(config, conn, createLogger({ level: cliLogLevel(config), name: 'cli' }));
    if (c.action !== 'set' && c.action !== 'status') await mustExist(goals.get(sessionId), 'goal', shell);
    let reply: string;
    switch (c.action) {
      case 'set':
        reply = await goals.set(sessionId, c.text, origin, Date.now(), c.economy);
        break;
      case 'pause':
        reply = await goals.pause(sessionId);
        break;
      case 'resume':
        reply = await goals.resume(sessionId);
        break;
      case 'clear':
        reply = await goals.clear(sessionId);
        break;
      default:
        reply = await goals.status(sessionId);
    }
    const record = await goals.get(sessionId);
    return { session: sessionId, kind: 'goal', reply: shell(reply), record: record && goalObject(record) };
  });
}

/**
 * The CLI's one rule for a command with nothing to act on: pausing, resuming, stopping or clearing a
 * schedule the session does not have is bad input (exit 2, the reason on stderr), as `cron show` of an
 * unknown job is; `status` answers "none" and exits 0.
 * @throws ScheduleInputError when `record` resolves to null
 */
async function mustExist(record: Promise<unknown>, kind: LoopKind | 'goal', shell: (text: string) => string): Promise<void> {
  if ((await record) === null) throw new ScheduleInputError(shell(`No ${kind} in this session.`));
}

async function withConnection<T>(ctx: CliContext, fn: (conn: CliConnection) => Promise<T>): Promise<T> {
  const conn = await ctx.connect();
  try {
    return await fn(conn);
  } finally {
    await conn.close();
  }
}

/** Where `hermes loop|heartbeat|goal` write, and where their exit code is recorded. Tests pass their own. */
export interface LoopCliIo extends ErrorSink {
  out(text: string): void;
}

const processIo: LoopCliIo = { ...processErrorSink, out: printOut };

/** The reply (or, with `--json`, the reply and the record) on stdout; the warnings on stderr, as `hermes cron add` writes them. */
function print(io: LoopCliIo, { warnings, ...result }: ShellReply, json: boolean | undefined): void {
  io.out(json ? terminalJson(result) : result.reply);
  for (const warning of warnings ?? []) io.err(`Warning: ${warning}`);
}

/** How `hermes loop` and `hermes heartbeat` differ; everything else of the two commands is shared. */
interface ScheduleCommandSpec {
  kind: 'loop' | 'heartbeat';
  alias?: string;
  description: string;
  argument: string;
  /** `--times`/`--until` and the economy flags belong to the grammar, so commander must pass unknown options through. */
  passUnknownOptions: boolean;
}

const SCHEDULE_COMMANDS: readonly ScheduleCommandSpec[] = [
  {
    kind: 'loop',
    description: 'set or control the loop of a session: hermes loop 10m check the CI build',
    argument:
      'interval, prompt, --times N, --until <condition>, --notify auto|always|done|never, --watch <check>, --max-tokens N, --model <name>, or status|pause|resume|stop|help',
    passUnknownOptions: true,
  },
  {
    kind: 'heartbeat',
    alias: 'hb',
    description: 'set or control the heartbeat of a session: hermes heartbeat every 30m anything new in my inbox?',
    argument:
      'every <interval> <prompt>, --notify auto|always|done|never, --watch <check>, --max-tokens N, --model <name>, or status|pause|resume|stop|clear|help',
    passUnknownOptions: true,
  },
];

/**
 * Add `hermes loop`, `hermes heartbeat` and `hermes goal` to `program`; `ctx` is called when a command runs (config is loaded lazily).
 * @param io - output and exit code (default: the process's)
 */
export function registerLoopCommand(program: Command, ctx: () => CliContext, io: LoopCliIo = processIo): void {
  for (const spec of SCHEDULE_COMMANDS) {
    const command = program.command(spec.kind);
    if (spec.alias) command.alias(spec.alias);
    command
      .description(spec.description)
      .argument('[args...]', spec.argument)
      .option('-s, --session <id>', 'session id', DEFAULT_SESSION)
      .option('--command <name>', 'run a configured command (commands: in config.yaml) instead of the agent')
      .option('--run <shell>', 'run this shell command as the turn instead of the agent')
      .option('--timeout-seconds <n>', 'timeout of --run')
      .option(
        '--deliver <targets>',
        'also send each reply to these targets (a comma list): telegram:<chat>[:<thread>], slack:<channel>[:<thread_ts>], discord:<channel>[:<thread>], an http(s) webhook, or local (the session only)',
      )
      .option('--json', `print the reply and the ${spec.kind} record as JSON`);
    if (spec.passUnknownOptions) command.allowUnknownOption();
    command.action(
      action(
        async (
          args: string[],
          opts: { session: string; command?: string; run?: string; timeoutSeconds?: string; deliver?: string; json?: boolean },
        ) => {
          const c = ctx();
          const runner = runnerFromFlags(c.config, opts);
          const deliver = opts.deliver === undefined ? undefined : parseDeliverList(opts.deliver);
          print(io, await applyScheduleCommand(c, spec.kind, opts.session, args.join(' '), { runner, deliver }), opts.json);
        },
        io,
      ),
    );
  }

  program
    .command('goal')
    .description('set or control the standing goal of a session: hermes goal get the test suite green')
    .argument('[args...]', 'the goal (--max-tokens N, --model <name>), or status|pause|resume|stop|clear|help')
    .option('-s, --session <id>', 'session id', DEFAULT_SESSION)
    .option(
      '--deliver <target>',
      "also send each turn's reply to telegram:<chat>[:<thread>], slack:<channel>[:<thread_ts>] or discord:<channel>[:<thread>]",
    )
    .option('--json', 'print the reply and the goal record as JSON')
    .allowUnknownOption() // --max-tokens and --model belong to the goal grammar
    .action(
      action(async (args: string[], opts: { session: string; deliver?: string; json?: boolean }) => {
        print(io, await applyGoalCommand(ctx(), opts.session, args.join(' '), originFromDeliver(opts.deliver)), opts.json);
      }, io),
    );
}
