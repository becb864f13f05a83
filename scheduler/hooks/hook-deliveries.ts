/**
 * What signed webhooks (`POST /hooks/<name>`, docs/GATEWAY.md "Webhooks") leave in the store: each
 * delivery taken, under its id for the replay window (`Keys.hookDelivery`), and each hook's last
 * delivery (`Keys.hookLastDelivery`), which `hermes status` shows with what became of it. The gateway
 * takes deliveries (gateway/hooks/hook-actions.ts); this module only spells their records.
 */
import type { Keys } from '../store/keys.ts';
import type { RedisClient } from '../store/redis/connection-factory.ts';
import type { LoopKind } from '../tick/tick-kind.ts';

/** What a delivery that was taken started (the 202 answer's body). */
export type HookAccepted =
  | { status: 'accepted'; hook: string; action: 'turn'; session: string; message_id: string; occurrence_id: string }
  | { status: 'accepted'; hook: string; action: 'run_job'; cron_job: string; run_id: string }
  | { status: 'accepted'; hook: string; action: 'wake_loop'; session: string; schedule: LoopKind; loop_id: string };

/** A hook's last delivery taken. */
export interface HookDeliveryRecord {
  /** When it was taken, epoch ms. */
  at: number;
  delivery_id: string;
  /** The event header's value (empty when the sender sent none). */
  event: string;
  accepted: HookAccepted;
}

/**
 * Record a delivery as taken: its mark (already set `pending` by `SET NX`) now holds what it started,
 * and it is the hook's last delivery. One transaction (both keys are fleet-wide, one slot).
 * @throws the error Redis answered either write with
 */
export async function recordHookDelivery(redis: RedisClient, keys: Keys, record: HookDeliveryRecord): Promise<void> {
  const hook = record.accepted.hook;
  const replies = await redis
    .multi()
    .set(keys.hookDelivery(hook, record.delivery_id), JSON.stringify(record.accepted), 'KEEPTTL', 'XX')
    .set(keys.hookLastDelivery(hook), JSON.stringify(record))
    .exec();
  const failed = replies?.find(([err]) => err !== null)?.[0];
  if (failed) throw failed;
}

/** The last delivery of each of `hooks` (`undefined` for a hook that took none yet, or whose record cannot be read). */
export async function lastHookDeliveries(
  redis: RedisClient,
  keys: Keys,
  hooks: readonly string[],
): Promise<Map<string, HookDeliveryRecord | undefined>> {
  const found = new Map<string, HookDeliveryRecord | undefined>();
  // One read per hook rather than MGET: on a cluster the keys share a slot, but a hook list is short.
  for (const hook of hooks) {
    const raw = await redis.get(keys.hookLastDelivery(hook));
    let record: HookDeliveryRecord | undefined;
    try {
      record = raw === null ? undefined : (JSON.parse(raw) as HookDeliveryRecord);
    } catch {
      record = undefined;
    }
    found.set(hook, record);
  }
  return found;
}
