/**
 * The signed webhooks as `hermes status` shows them: each hook the configuration declares, what it
 * starts where, and its last delivery with what became of it — for a `turn`, whether the turn in its
 * session answered yet (its `reply` or `error` event, found by the occurrence id the delivery was
 * given). Reads only.
 */
import type { HermesConfig } from '../config/config.ts';
import type { SessionStore } from '../session/session-store.ts';
import type { Keys } from '../store/keys.ts';
import type { RedisClient } from '../store/redis/connection-factory.ts';
import { lastHookDeliveries, type HookDeliveryRecord } from './hook-deliveries.ts';

/** Events read back from a session's stream to find a hook turn's answer. */
const TURN_LOOKBACK_EVENTS = 200;

/**
 * Where a hook's turn is: `replied` or `failed` (its event is on the session's stream, `answered_at`
 * its time), `done` (committed, its event no longer among the recent ones), or `waiting` (queued or running).
 */
export type HookTurnState = 'waiting' | 'replied' | 'failed' | 'done';

/** One hook in `hermes status` (and its `--json`, `hooks`). */
export interface HookStatusView {
  name: string;
  action: HermesConfig['hooks'][string]['action'];
  /** The session (`turn`, `wake_loop`: `<session>` or `<session> (heartbeat)`) or cron job (`run_job`) it acts on. */
  target: string;
  /** Its last delivery taken, or `null` for none yet. */
  last_delivery: (HookDeliveryRecord & { turn?: { state: HookTurnState; answered_at?: number } }) | null;
}

/** Every declared hook, sorted by name, with its last delivery. */
export async function hookStatuses(
  stores: { redis: RedisClient; keys: Keys; sessions: SessionStore },
  hooks: HermesConfig['hooks'],
): Promise<HookStatusView[]> {
  const names = Object.keys(hooks).sort();
  const last = await lastHookDeliveries(stores.redis, stores.keys, names);
  return await Promise.all(
    names.map(async (name) => {
      const hook = hooks[name]!;
      const target =
        hook.action === 'run_job'
          ? `cron ${hook.cron_job!}`
          : hook.action === 'wake_loop' && hook.schedule === 'heartbeat'
            ? `${hook.session!} (heartbeat)`
            : hook.session!;
      const record = last.get(name);
      if (!record) return { name, action: hook.action, target, last_delivery: null };
      const a = record.accepted;
      return {
        name,
        action: hook.action,
        target,
        last_delivery: a.action === 'turn' ? { ...record, turn: await turnState(stores.sessions, a.session, a.occurrence_id) } : record,
      };
    }),
  );
}

async function turnState(
  sessions: SessionStore,
  sessionId: string,
  occurrenceId: string,
): Promise<{ state: HookTurnState; answered_at?: number }> {
  const events = await sessions.recentEvents(sessionId, TURN_LOOKBACK_EVENTS);
  const answer = events.findLast((e) => (e.type === 'reply' || e.type === 'error') && e.data.occurrenceId === occurrenceId);
  if (answer) return { state: answer.type === 'reply' ? 'replied' : 'failed', answered_at: Number(answer.id.split('-')[0]) };
  return { state: (await sessions.isCommitted(sessionId, occurrenceId)) ? 'done' : 'waiting' };
}
