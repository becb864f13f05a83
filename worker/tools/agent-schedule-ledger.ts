/**
 * The schedules the agent created in a session (the `schedules` tool), for
 * `tools.schedules.max_created_per_day`: one sorted set per session
 * (`Keys.agentSchedulesCreated`) of schedule id → creation time (ms), trimmed
 * to the last 24 hours as it is read. A schedule counts from its creation,
 * whatever became of it since (a removed one still counts), so removing and
 * creating again is no way around the limit.
 *
 * Counting and recording are two round trips, not one step: the tool runs the
 * creations of one session one after another in its process, and a session's
 * turns run one at a time across the fleet (the turn lock), so no two
 * creations of one session race.
 */
import type { Keys } from '../../scheduler/store/keys.ts';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';

/** The window `max_created_per_day` counts over, ms. */
export const CREATION_WINDOW_MS = 24 * 3600_000;

export class AgentScheduleLedger {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  /** Schedules the agent created in `sessionId` in the 24 hours before `now`. */
  async createdInWindow(sessionId: string, now: number): Promise<number> {
    const key = this.keys.agentSchedulesCreated(sessionId);
    const res = await this.redis
      .multi()
      .zremrangebyscore(key, '-inf', now - CREATION_WINDOW_MS)
      .zcard(key)
      .exec();
    const count = res?.[1]?.[1];
    return typeof count === 'number' ? count : 0;
  }

  /** Count a creation (the key lives a window past its newest entry). */
  async record(sessionId: string, scheduleId: string, now: number): Promise<void> {
    const key = this.keys.agentSchedulesCreated(sessionId);
    await this.redis.multi().zadd(key, now, `${scheduleId}:${now}`).pexpire(key, CREATION_WINDOW_MS).exec();
  }
}
