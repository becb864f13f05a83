/**
 * The schedules the agent created in a session (the `schedules` tool), for
 * `tools.schedules.max_created_per_day`: one sorted set per session
 * (`Keys.agentSchedulesCreated`), counted by `CreationLedger`
 * (scheduler/store/creation-ledger.ts: what counts, and for how long).
 *
 * The tool runs the creations of one session one after another in its
 * process, and a session's turns run one at a time across the fleet (the
 * turn lock), so no two creations of one session race.
 */
import type { Keys } from '../../scheduler/store/keys.ts';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { CreationLedger } from '../../scheduler/store/creation-ledger.ts';

export class AgentScheduleLedger {
  private readonly ledger: CreationLedger;

  constructor(
    redis: RedisClient,
    private readonly keys: Keys,
  ) {
    this.ledger = new CreationLedger(redis);
  }

  /** Schedules the agent created in `sessionId` in the 24 hours before `now`. */
  async createdInWindow(sessionId: string, now: number): Promise<number> {
    return await this.ledger.createdInWindow(this.keys.agentSchedulesCreated(sessionId), now);
  }

  /** Count a creation. */
  async record(sessionId: string, scheduleId: string, now: number): Promise<void> {
    await this.ledger.record(this.keys.agentSchedulesCreated(sessionId), scheduleId, now);
  }
}
