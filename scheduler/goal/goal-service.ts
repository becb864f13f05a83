/**
 * Setting and controlling a session's standing goal, and queueing its
 * continuation turns. Shared by every surface.
 *
 * No silent writes (docs/DESIGN.md §6; the old system replied "Goal set" for a goal a
 * slow store had dropped): every change is written with a version check and
 * the reply is produced only after Redis confirmed it. A refused write is
 * logged at WARNING and reaches the user as a StoreUnavailableError.
 */
import type { ScheduleEconomy } from '../economy/economy-flags.ts';
import { budgetSetWarning } from '../economy/token-budget.ts';
import { randomBytes } from 'node:crypto';
import type { RedisClient } from '../store/redis/connection-factory.ts';
import type { Logger } from 'pino';
import { StoreUnavailableError } from '../errors/store-unavailable-error.ts';
import { bullJobId, type Keys } from '../store/keys.ts';
import type { HermesQueues } from '../store/queues.ts';
import { INBOX_PRIORITY, type InboxJobData } from '../session/inbox.ts';
import { createGoal, goalStatusLine, resumeGoal, type GoalRecord } from './goal-state.ts';
import type { Origin } from '../session/origin.ts';
import { putVersioned, type ExpectedVersion } from '../store/versioned-json.ts';
import { lexRange } from '../store/lex-index.ts';
import { readPage, type Page, type PageRequest } from '../store/list-page.ts';
import { ensureOrder } from '../store/order-repair.ts';
import { assertSessionId } from '../session/session-id.ts';
import { CONFLICT, retryOnConflict } from '../store/optimistic-retry.ts';

/** Goal records of sessions (versioned JSON in Redis) and the queueing of continuation turns. */
export class GoalService {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly queues: HermesQueues,
    /** `goals.max_turns` */
    private readonly maxTurns: number,
    private readonly log: Logger,
    /** Checks `--model`/`--max-tokens` against the operator's config (`economy/economy-check.ts`). @throws ScheduleInputError */
    private readonly checkEconomy: (economy: ScheduleEconomy, surface: string) => void = () => {},
    /** The warning for goal turns without a model (`agent-model.ts`), or `undefined` when they have one. */
    private readonly noModelWarning: (model: string | null | undefined, surface: string) => string | undefined = () => undefined,
  ) {}

  /** The session's goal record, or `null`. */
  async get(sessionId: string): Promise<GoalRecord | null> {
    const raw = await this.redis.get(this.keys.goal(sessionId));
    return raw ? (JSON.parse(raw) as GoalRecord) : null;
  }

  /** Every session's goal record, over every shard (`hermes status`), in no set order. */
  async list(): Promise<GoalRecord[]> {
    const out: GoalRecord[] = [];
    for (const k of this.keys.shards()) {
      const ids = await this.redis.smembers(k.goalIndex);
      for (let i = 0; i < ids.length; i += 1000) {
        const chunk = ids.slice(i, i + 1000);
        const raws = await this.redis.mget(...chunk.map((id) => this.keys.goal(id)));
        for (const raw of raws) if (raw !== null) out.push(JSON.parse(raw) as GoalRecord);
      }
    }
    return out;
  }

  /**
   * One page of goal records by session id (`Keys.goalOrder`), of every shard; `keep` filters the records read
   * (`store/list-page.ts`). An order that differs in size from its index is made again first (`store/order-repair.ts`).
   * @throws ScheduleInputError (`cursor`) for a cursor this list did not give
   */
  async page(request: PageRequest, keep?: (goal: GoalRecord) => boolean): Promise<Page<GoalRecord>> {
    const shards = this.keys.shards();
    await Promise.all(
      shards.map((k) => ensureOrder(this.redis, { index: k.goalIndex, order: k.goalOrder, membersOf: async (ids) => ids })),
    );
    return await readPage<GoalRecord>(
      {
        list: 'goals',
        members: (after, count) =>
          lexRange(
            this.redis,
            shards.map((k) => k.goalOrder),
            { after },
            count,
          ),
        load: async (ids) => await Promise.all(ids.map((id) => this.get(id))),
        ...(keep ? { keep } : {}),
      },
      request,
    );
  }

  /** Versioned write (see versioned-json.ts). @throws StoreUnavailableError */
  async put(goal: GoalRecord, expected: ExpectedVersion): Promise<GoalRecord | null> {
    return await putVersioned(
      this.redis,
      {
        key: this.keys.goal(goal.sessionId),
        indexKey: this.keys.forSession(goal.sessionId).goalIndex,
        member: goal.sessionId,
        what: 'goal',
        orders: [
          { key: this.keys.forSession(goal.sessionId).sessionOrder, member: goal.sessionId },
          { key: this.keys.forSession(goal.sessionId).goalOrder, member: goal.sessionId },
        ],
      },
      goal,
      expected,
    );
  }

  /**
   * Set (or replace) the goal and queue its first turn.
   * @returns the reply, e.g. "Goal set (20-turn budget): …"
   * @throws StoreUnavailableError when Redis did not confirm the goal
   */
  async set(sessionId: string, text: string, origin: Origin, now = Date.now(), economy: ScheduleEconomy = {}): Promise<string> {
    assertSessionId(sessionId);
    this.checkEconomy(economy, origin.surface);
    const goal = createGoal({ goalId: randomBytes(6).toString('hex'), sessionId, text, maxTurns: this.maxTurns, origin, now, economy });
    let previous = null as GoalRecord | null; // read inside the write below
    const stored = await this.confirmed(sessionId, async () => {
      previous = await this.get(sessionId);
      return await this.put(goal, previous ? previous.version : 'absent');
    });
    if (!stored) throw new StoreUnavailableError('The goal changed while it was being saved; try again.');
    await this.confirmed(sessionId, () => this.enqueueContinuation(stored));
    this.log.info({ sessionId, goalId: stored.goalId }, 'goal set');
    const extra = [
      stored.model ? `model ${stored.model}` : '',
      stored.maxTokens ? `max ${stored.maxTokens.toLocaleString('en-US')} tokens` : '',
    ].filter(Boolean);
    // A budget one turn uses up: the last turn of the goal this one replaces says what one costs.
    const tooSmall = budgetSetWarning(stored.maxTokens, previous?.spend, 'turn');
    const warnings = [this.noModelWarning(stored.model, origin.surface), tooSmall && `Warning: ${tooSmall}`];
    return [`Goal set (${stored.maxTurns}-turn budget${extra.map((e) => `, ${e}`).join('')}): ${text}`, ...warnings.filter(Boolean)].join(
      '\n',
    );
  }

  /** @returns the reply */
  async pause(sessionId: string, now = Date.now()): Promise<string> {
    const r = await this.change(sessionId, (g) =>
      g.status === 'active' ? { ...g, status: 'paused', statusReason: 'paused by user', updatedAt: now } : undefined,
    );
    if (!r.previous) return 'No goal in this session.';
    return r.stored
      ? `Goal paused after ${r.stored.turnsUsed} turn(s). /goal resume continues it.`
      : `Goal is ${r.previous.status}; nothing to pause.`;
  }

  /** Resume and queue the next turn at once (F6: resume must not wait for the user). @returns the reply */
  async resume(sessionId: string, now = Date.now()): Promise<string> {
    const r = await this.change(sessionId, (g) =>
      g.status === 'paused' || (g.status === 'active' && g.parked) ? resumeGoal(g, now, this.maxTurns) : undefined,
    );
    if (!r.previous) return 'No goal in this session.';
    if (!r.stored) return `Goal is ${r.previous.status}; nothing to resume.`;
    const resumed = r.stored;
    await this.confirmed(sessionId, () => this.enqueueContinuation(resumed));
    return `Goal resumed (${r.stored.maxTurns - r.stored.turnsUsed} turn(s) left); the next turn is queued.`;
  }

  /** @returns the reply */
  async clear(sessionId: string, now = Date.now()): Promise<string> {
    const r = await this.change(sessionId, (g) =>
      g.status !== 'cleared' ? { ...g, status: 'cleared', statusReason: 'cleared by user', updatedAt: now } : undefined,
    );
    return r.stored ? 'Goal cleared.' : 'No goal in this session.';
  }

  async status(sessionId: string): Promise<string> {
    return goalStatusLine(await this.get(sessionId));
  }

  /**
   * Queue the goal's next continuation turn (idempotent: one job per turn number).
   * Priority 2: behind real user input, ahead of ticks.
   */
  async enqueueContinuation(goal: GoalRecord): Promise<void> {
    const turn = goal.turnsUsed + 1;
    const data: InboxJobData = {
      type: 'goal-continuation',
      sessionId: goal.sessionId,
      text: '',
      messageId: `goal-${goal.goalId}-${turn}`,
      origin: goal.origin,
      receivedAt: Date.now(),
      goalId: goal.goalId,
      goalTurn: turn,
    };
    await this.queues.forSession(goal.sessionId).inbox.add('goal-continuation', data, {
      jobId: bullJobId('goal', goal.sessionId, goal.goalId, turn),
      priority: INBOX_PRIORITY.goal,
    });
  }

  private async change(
    sessionId: string,
    fn: (g: GoalRecord) => GoalRecord | undefined,
  ): Promise<{ previous: GoalRecord | null; stored: GoalRecord | null }> {
    assertSessionId(sessionId);
    return await retryOnConflict(
      async () => {
        const previous = await this.confirmed(sessionId, () => this.get(sessionId));
        if (!previous) return { previous, stored: null };
        const next = fn(previous);
        if (!next) return { previous, stored: null };
        const stored = await this.confirmed(sessionId, () => this.put(next, previous.version));
        return stored ? { previous, stored } : CONFLICT;
      },
      () => new StoreUnavailableError('The goal kept changing while it was being updated; try again.'),
    );
  }

  /** Run a store step; a failure is logged at WARNING and surfaces as StoreUnavailableError. */
  private async confirmed<T>(sessionId: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      this.log.warn({ sessionId, err: (err as Error).message }, 'goal write not confirmed by Redis; the user is told');
      throw new StoreUnavailableError(`The goal was not saved: Redis refused the write (${(err as Error).message}). Nothing changed.`, {
        cause: err,
      });
    }
  }
}
