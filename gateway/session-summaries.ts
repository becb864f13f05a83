/**
 * What `GET /api/sessions` and the console's overview show of each session: its loop, heartbeat
 * and goal, when it was last active, and the first line of its last reply. Read from the stores;
 * nothing here changes anything.
 */
import type { GoalRecord } from '../scheduler/goal/goal-state.ts';
import type { GoalService } from '../scheduler/goal/goal-service.ts';
import type { LoopRecord } from '../scheduler/loop/loop-state.ts';
import type { LoopStore } from '../scheduler/loop/loop-store.ts';
import { sessionIdsAfter } from './session-index.ts';
import { readPage, type Page, type PageRequest } from '../scheduler/store/list-page.ts';
import type { SessionStore } from '../scheduler/session/session-store.ts';
import type { Keys } from '../scheduler/store/keys.ts';
import type { LoopKind } from '../scheduler/tick/tick-kind.ts';
import type { RedisClient } from '../scheduler/store/redis/connection-factory.ts';

/** A loop or heartbeat with when it is due next (epoch ms; `undefined` while not armed or not active). */
export interface ScheduleState {
  record: LoopRecord;
  nextDueAt: number | undefined;
}

/** One session at a glance. */
export interface SessionSummary {
  id: string;
  loop: ScheduleState | null;
  heartbeat: ScheduleState | null;
  goal: GoalRecord | null;
  /** Epoch ms of the newest event on the session's stream; `null` for an empty stream. */
  lastActivityAt: number | null;
  /** The first line of the newest reply among the recent events, or `null`. */
  lastReply: string | null;
}

/** What the summaries are read from. */
export interface SummaryStores {
  redis: RedisClient;
  keys: Keys;
  loops: LoopStore;
  goals: GoalService;
  sessions: SessionStore;
}

/** Events read back from a stream to find its last reply. */
const REPLY_LOOKBACK_EVENTS = 50;

/**
 * One page of session summaries in id order (`session-index.ts`): the page's sessions are read, no other.
 * @param prefix - only sessions whose id starts with it
 * @throws ScheduleInputError (`cursor`) for a cursor this list did not give
 */
export async function sessionSummaryPage(s: SummaryStores, request: PageRequest, prefix?: string): Promise<Page<SessionSummary>> {
  return await readPage<SessionSummary>(
    {
      list: 'sessions',
      members: (after, count) => sessionIdsAfter(s.redis, s.keys, { after, prefix }, count),
      load: async (ids) => await Promise.all(ids.map((id) => sessionSummary(s, id))),
    },
    request,
  );
}

/** One session's summary (`undefined` fields read from the stores). */
export async function sessionSummary(s: SummaryStores, id: string): Promise<SessionSummary> {
  const records = (await Promise.all((['loop', 'heartbeat'] as const).map((k) => s.loops.get(id, k)))).filter(
    (r): r is LoopRecord => r !== null,
  );
  return await summaryOf(s, id, records, await s.goals.get(id));
}

async function summaryOf(s: SummaryStores, id: string, records: LoopRecord[], goal: GoalRecord | null): Promise<SessionSummary> {
  const state = async (kind: LoopKind): Promise<ScheduleState | null> => {
    const record = records.find((r) => r.kind === kind && r.status !== 'finished');
    if (!record) return null;
    return { record, nextDueAt: record.status === 'active' ? await s.loops.nextDueAt(record) : undefined };
  };
  const [loop, heartbeat, recent] = await Promise.all([
    state('loop'),
    state('heartbeat'),
    s.sessions.recentEvents(id, REPLY_LOOKBACK_EVENTS),
  ]);
  const newest = recent.at(-1);
  const reply = [...recent].reverse().find((e) => e.type === 'reply' && typeof e.data.text === 'string');
  return {
    id,
    loop,
    heartbeat,
    goal: goal && (goal.status === 'active' || goal.status === 'paused') ? goal : null,
    lastActivityAt: newest ? Number(newest.id.split('-')[0]) : null,
    lastReply: reply ? firstLine(String(reply.data.text)) : null,
  };
}

/** The first non-empty line of a text, without surrounding blanks. */
export function firstLine(text: string): string {
  return (
    text
      .split('\n')
      .map((l) => l.trim())
      .find((l) => l !== '') ?? ''
  );
}
