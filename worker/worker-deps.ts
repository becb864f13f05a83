/**
 * What a job processor of this worker process may use. Built once by
 * `WorkerProcess` and passed to every processor.
 */
import type { Queue } from 'bullmq';
import type { RedisClient } from '../scheduler/store/redis/connection-factory.ts';
import type { Logger } from 'pino';
import type { HermesConfig } from '../scheduler/config/config.ts';
import type { Keys } from '../scheduler/store/keys.ts';
import type { LoopStore } from '../scheduler/loop/loop-store.ts';
import type { CronStore } from '../scheduler/cron/cron-store.ts';
import type { OutboundData, TelegramOutboundData } from '../scheduler/delivery/outbound.ts';
import type { HermesQueues } from '../scheduler/store/queues.ts';
import type { SessionStore } from '../scheduler/session/session-store.ts';
import type { TurnJournalStore } from '../scheduler/journal/turn-journal-store.ts';
import type { LoopService } from '../scheduler/loop/loop-service.ts';
import type { GoalService } from '../scheduler/goal/goal-service.ts';
import type { HermesMetrics } from '../scheduler/metrics.ts';
import type { RunnerFactory } from './turn-runners/create-runner.ts';
import type { SessionLock } from './runtime/session-lock.ts';
import type { TurnTracker } from './runtime/turn-tracker.ts';
import type { Toolbox } from './tools/toolbox.ts';

export interface WorkerDeps {
  config: HermesConfig;
  /** Non-blocking client for the product's own keys. */
  redis: RedisClient;
  keys: Keys;
  queues: HermesQueues;
  sessions: SessionStore;
  /** Journals of agent turns: what a resumed turn does not do again (docs/RELIABILITY.md, "A turn resumes from its journal"). */
  journals: TurnJournalStore;
  loops: LoopStore;
  /** Cron job records, runs and their BullMQ side (cron ticks, the `schedules` tool, re-arming at start). */
  cron: CronStore;
  schedules: LoopService;
  goals: GoalService;
  runners: RunnerFactory;
  /** The operator's tools of agent turns (`tools.*`, `mcp_servers`, `schedule_status`). */
  tools: Toolbox;
  lock: SessionLock;
  outboundTelegram: Queue<TelegramOutboundData>;
  /** Replies for Slack (`outbound-slack`), on the same connection. */
  outboundSlack: Queue<OutboundData>;
  /** Replies for Discord (`outbound-discord`), on the same connection. */
  outboundDiscord: Queue<OutboundData>;
  /** Active turns by drain class; processors register every turn they run. */
  turns: TurnTracker;
  log: Logger;
  /** `<host>:<pid>:<random>` of this worker process. */
  workerId: string;
  /** Where processors record lateness, turns and deferrals (absent in deps built without a process). */
  metrics?: HermesMetrics;
}
