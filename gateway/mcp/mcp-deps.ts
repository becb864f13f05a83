/**
 * What this product's MCP server uses (`McpDeps`), built over one store connection by `mcpDepsFor`
 * — the same stores and services as `/api`, the CLI and the agent's `schedules` tool, so an MCP
 * client follows their rules.
 */
import type { Logger } from 'pino';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import type { CronService } from '../../scheduler/cron/cron-service.ts';
import type { LoopService } from '../../scheduler/loop/loop-service.ts';
import type { LoopStore } from '../../scheduler/loop/loop-store.ts';
import { cronServiceFor, loopServiceFor, loopStoreFor, sessionStoreFor, type StoreConnection } from '../../scheduler/services.ts';
import type { SessionStore } from '../../scheduler/session/session-store.ts';
import { CreationLedger } from '../../scheduler/store/creation-ledger.ts';

/** The stores and services an MCP server acts with. */
export interface McpDeps extends StoreConnection {
  config: HermesConfig;
  loops: LoopStore;
  schedules: LoopService;
  cron: CronService;
  sessions: SessionStore;
  /** Counts MCP creations for `mcp.max_created_per_day` (`Keys.mcpSchedulesCreated`). */
  ledger: CreationLedger;
  log: Logger;
  /** Epoch ms source (tests may pin it). */
  clock?: () => number;
}

/** The MCP server's deps over `conn` (the caller owns and closes the connection). */
export function mcpDepsFor(config: HermesConfig, conn: StoreConnection, log: Logger): McpDeps {
  const loops = loopStoreFor(config, conn);
  return {
    ...conn,
    config,
    loops,
    schedules: loopServiceFor(config, loops, log),
    cron: cronServiceFor(config, conn, log),
    sessions: sessionStoreFor(config, conn.redis, conn.keys),
    ledger: new CreationLedger(conn.redis),
    log,
  };
}
