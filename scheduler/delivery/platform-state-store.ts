/**
 * Where gateways publish their platforms' states (`platform-state.ts`) and where `hermes status` and the
 * console read them: one hash per gateway instance (`Keys.gatewayPlatforms`) and a sorted set of the
 * instances by their last heartbeat (`Keys.gateways`).
 *
 * Liveness: a gateway writes its states at each change and every `GATEWAY_HEARTBEAT_MS`; its hash
 * expires, and its index entry stops counting, `GATEWAY_ALIVE_MS` (three missed beats) after its last
 * write, so a gateway that died (SIGKILL) is not shown with the state it had. A gateway that stops
 * removes both at once.
 */
import type { Keys } from '../store/keys.ts';
import type { RedisClient } from '../store/redis/connection-factory.ts';
import type { GatewayPlatforms, PlatformState } from './platform-state.ts';
import { isPlatformName, PLATFORM_NAMES } from './platforms.ts';

/** Known platforms in their order, then others by name. */
function byPlatform(a: PlatformState, b: PlatformState): number {
  const rank = (p: PlatformState) => (isPlatformName(p.platform) ? PLATFORM_NAMES.indexOf(p.platform) : PLATFORM_NAMES.length);
  return rank(a) - rank(b) || a.platform.localeCompare(b.platform);
}

/** Milliseconds between a gateway's writes of its platform states when nothing changes. */
export const GATEWAY_HEARTBEAT_MS = 5_000;

/** A gateway's published states count while younger than this, ms (three missed beats). */
export const GATEWAY_ALIVE_MS = 3 * GATEWAY_HEARTBEAT_MS;

/**
 * Write `states` as the gateway `instanceId`'s, replacing what it published before, and renew its liveness.
 * @throws when Redis refused or did not answer
 */
export async function publishPlatformStates(
  redis: RedisClient,
  keys: Keys,
  instanceId: string,
  states: readonly PlatformState[],
  now = Date.now(),
): Promise<void> {
  const key = keys.gatewayPlatforms(instanceId);
  const tx = redis.multi().del(key);
  if (states.length > 0) tx.hset(key, Object.fromEntries(states.map((s) => [s.platform, JSON.stringify(s)])));
  const results = await tx
    .pexpire(key, GATEWAY_ALIVE_MS)
    .zadd(keys.gateways, now, instanceId)
    // Instances gone for longer than the liveness window are forgotten by whoever writes next.
    .zremrangebyscore(keys.gateways, '-inf', `(${now - GATEWAY_ALIVE_MS}`)
    .exec();
  const failed = results?.find(([err]) => err)?.[0];
  if (failed) throw failed;
}

/** Remove what the gateway `instanceId` published (it stops). */
export async function removePlatformStates(redis: RedisClient, keys: Keys, instanceId: string): Promise<void> {
  await redis.multi().del(keys.gatewayPlatforms(instanceId)).zrem(keys.gateways, instanceId).exec();
}

/**
 * The platform states of every live gateway, by gateway id; Telegram, Slack and Discord first, in
 * that order, then a plugin's own platforms by name. A gateway whose hash is gone (expired between
 * two reads) is left out.
 */
export async function readPlatformStates(redis: RedisClient, keys: Keys, now = Date.now()): Promise<GatewayPlatforms[]> {
  const ids = await redis.zrangebyscore(keys.gateways, now - GATEWAY_ALIVE_MS, '+inf', 'WITHSCORES');
  const out: GatewayPlatforms[] = [];
  for (let i = 0; i < ids.length; i += 2) {
    const gateway = ids[i]!;
    const fields = await redis.hgetall(keys.gatewayPlatforms(gateway));
    const platforms = Object.values(fields).flatMap((raw) => {
      try {
        return [JSON.parse(raw) as PlatformState];
      } catch {
        return [];
      }
    });
    if (platforms.length > 0) out.push({ gateway, seenAt: Number(ids[i + 1]), platforms: platforms.sort(byPlatform) });
  }
  return out.sort((a, b) => a.gateway.localeCompare(b.gateway));
}
