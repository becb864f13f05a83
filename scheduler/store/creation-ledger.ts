/**
 * A count of creations in any 24 hours, for the per-day limits of those who create schedules without
 * a person typing them: the agent's `schedules` tool (per session, `tools.schedules.max_created_per_day`)
 * and MCP clients (fleet-wide, `mcp.max_created_per_day`). One sorted set per counted key, of
 * `<schedule id>:<ms>` → creation time (ms), trimmed to the last 24 hours as it is read. A schedule
 * counts from its creation, whatever became of it since (a removed one still counts), so removing and
 * creating again is no way around a limit.
 *
 * Counting and recording are two round trips, not one step: each caller runs its creations one
 * after another (the `schedules` tool per session, the MCP server per process), so a limit may be
 * passed by at most the creations that race across processes.
 */
import type { RedisClient } from './redis/connection-factory.ts';

/** The window a per-day limit counts over, ms. */
export const CREATION_WINDOW_MS = 24 * 3600_000;

export class CreationLedger {
  constructor(private readonly redis: RedisClient) {}

  /** Creations counted under `key` in the 24 hours before `now`. */
  async createdInWindow(key: string, now: number): Promise<number> {
    const res = await this.redis
      .multi()
      .zremrangebyscore(key, '-inf', now - CREATION_WINDOW_MS)
      .zcard(key)
      .exec();
    const count = res?.[1]?.[1];
    return typeof count === 'number' ? count : 0;
  }

  /** Count a creation under `key` (the key lives a window past its newest entry). */
  async record(key: string, scheduleId: string, now: number): Promise<void> {
    await this.redis.multi().zadd(key, now, `${scheduleId}:${now}`).pexpire(key, CREATION_WINDOW_MS).exec();
  }
}
