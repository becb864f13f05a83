/**
 * Building `WorkerDeps` from a configuration and two Redis connections (one
 * for the product's keys, one for BullMQ queues). Used by `WorkerProcess` and
 * by anything that runs processors itself (tests, embedders).
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { RedisClient } from '../scheduler/store/redis/connection-factory.ts';
import type { Logger } from 'pino';
import type { HermesConfig } from '../scheduler/config/config.ts';
import { Keys } from '../scheduler/store/keys.ts';
import { outboundQueue, telegramOutboundQueue } from '../scheduler/delivery/outbound.ts';
import { RunnerFactory } from './turn-runners/create-runner.ts';
import { Toolbox } from './tools/toolbox.ts';
import { SessionLock } from './runtime/session-lock.ts';
import { TurnTracker, type TurnSlot } from './runtime/turn-tracker.ts';
import type { WorkerDeps } from './worker-deps.ts';
import {
  cronServiceFor,
  cronStoreFor,
  goalServiceFor,
  loopStoreFor,
  modelStateFor,
  loopServiceFor,
  sessionStoreFor,
  turnJournalStoreFor,
  openQueues,
} from '../scheduler/services.ts';
import { AgentScheduleLedger } from './tools/agent-schedule-ledger.ts';
import { deliverToRoute } from './runtime/delivery.ts';

/**
 * @param input.redis - client for the product's keys (commands time out; no blocking calls)
 * @param input.queueConnection - client for BullMQ queues (`maxRetriesPerRequest: null`)
 * @param input.runners - default: from config
 * @returns the dependencies of the first shard (`keys`, `queues` of shard 0); `depsForShard` gives another shard's
 * @param input.commandEnvSource - environment commands take their base variables and operator-listed
 *   pass-throughs from (`runtime/command-env.ts`); default this process's environment (this is the
 *   composition root that reads it)
 */
export function createWorkerDeps(input: {
  config: HermesConfig;
  redis: RedisClient;
  queueConnection: RedisClient;
  log: Logger;
  runners?: RunnerFactory;
  workerId?: string;
  commandEnvSource?: Readonly<Record<string, string | undefined>>;
}): WorkerDeps {
  const { config, redis, log } = input;
  const keys = new Keys(config.redis.prefix, { shards: config.redis.shards });
  const queues = openQueues(keys, input.queueConnection, log);
  const workerId = input.workerId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const base = shardStores({ config, redis, keys, queues, log });
  const envSource = input.commandEnvSource ?? process.env;
  const w = config.worker;
  const turns = new TurnTracker({ heldTicks: w.max_held_ticks, agent: w.max_agent_turns, command: w.max_command_turns });
  // The stores route every session and cron job to its shard, so one toolbox serves every shard.
  const tools = new SlottedToolbox(config, { schedules: base.schedules, goals: base.goals, cron: base.cron }, envSource, turns);
  // The agent's `schedules` tool acts with the same services as `/loop` and `hermes cron`.
  tools.addSchedulesTool({
    config,
    loops: base.loops,
    schedules: base.schedules,
    cron: cronServiceFor(config, { redis, keys, queues, cron: base.cron }, log),
    ledger: new AgentScheduleLedger(redis, keys),
    log,
    // The product itself tells the chat what the agent scheduled: a notice on its stream and on its route.
    announce: async ({ sessionId, origin, text, action, kind, id }) => {
      await deps.sessions.appendEvent(sessionId, 'notice', { text, by: 'agent', action, schedule: { kind, id } });
      await deliverToRoute(deps, {
        sessionId,
        origin,
        text,
        occurrenceId: `agent-schedule:${sessionId}:${kind}:${id}:${action}:${Date.now()}`,
      });
    },
  });
  const deps: WorkerDeps = {
    config,
    redis,
    keys,
    queues,
    workerId,
    tools,
    ...base,
    log: log.child({ workerId }),
    // Model calls are counted in the process's metrics, set on these deps after they are made.
    runners:
      input.runners ??
      new RunnerFactory(config, {
        commandEnvSource: envSource,
        toolbox: tools,
        metrics: () => deps.metrics,
        // Windows learned from refusals and circuit breakers are the fleet's (docs/CONTEXT.md).
        modelState: modelStateFor(redis, keys),
      }),
    lock: new SessionLock(redis, keys, config.worker.lock_duration_ms),
    // Replies for Telegram go through one queue on the first shard, so one chat's replies share a queue.
    outboundTelegram: telegramOutboundQueue(keys, input.queueConnection, log),
    outboundSlack: outboundQueue('slack', keys, input.queueConnection, log),
    outboundDiscord: outboundQueue('discord', keys, input.queueConnection, log),
    turns,
  };
  return deps;
}

/**
 * The toolbox of a worker process: a command tool starts a process on this host, so each call
 * runs within a slot of the `command` pool (`worker.max_command_turns`), waited for in order
 * (within the turn's signal). A command turn's own check (`--watch` with a command tool) runs
 * within the slot its turn holds.
 */
class SlottedToolbox extends Toolbox {
  constructor(
    config: ConstructorParameters<typeof Toolbox>[0],
    status: ConstructorParameters<typeof Toolbox>[1],
    envSource: ConstructorParameters<typeof Toolbox>[2],
    private readonly turns: TurnTracker,
  ) {
    super(config, status, envSource);
  }

  protected override async slotted<T>(name: string, signal: AbortSignal, run: () => Promise<T>): Promise<T> {
    // Command tools are the `commands` group (`tools.commands.<name>`); MCP tools end in `mcp`.
    const tool = this.all().find((t) => t.name === name);
    if (tool?.groups.at(-1) !== 'commands' || this.turns.holdsCommandSlot(signal)) return await run();
    let slot: TurnSlot;
    try {
      slot = await this.turns.slots.acquire('command', signal);
    } catch {
      return await run(); // the turn was stopped while it waited: the call says so
    }
    try {
      return await run();
    } finally {
      slot.release();
    }
  }
}

/**
 * The dependencies of a processor working on the jobs of shard `index`:
 * `keys` and `queues` of that shard (the `ticks` and `inbox` queues its jobs
 * come from), everything else shared with `base` (the connections, the turn
 * tracker that drain reads, the outbound queue, the worker id).
 */
export function depsForShard(base: WorkerDeps, index: number): WorkerDeps {
  if (index === base.keys.shardIndex) return base;
  const keys = base.keys.shard(index);
  const queues = base.queues.forShard(index);
  return { ...base, keys, queues, ...shardStores({ config: base.config, redis: base.redis, keys, queues, log: base.log }) };
}

/** The stores bound to one shard's keys and queues, each built once here (they still route other sessions to their shards). */
function shardStores(
  d: Pick<WorkerDeps, 'config' | 'redis' | 'keys' | 'queues' | 'log'>,
): Pick<WorkerDeps, 'loops' | 'cron' | 'sessions' | 'journals' | 'schedules' | 'goals'> {
  const { config, redis, keys, queues, log } = d;
  const loops = loopStoreFor(config, { redis, keys, queues });
  return {
    loops,
    cron: cronStoreFor(config, { redis, keys, queues }, log),
    sessions: sessionStoreFor(config, redis, keys, log),
    journals: turnJournalStoreFor(config, redis, keys),
    schedules: loopServiceFor(config, loops, log),
    goals: goalServiceFor(config, { redis, keys, queues }, log),
  };
}
