/**
 * Health of the gateway, as its HTTP endpoints report it:
 *
 * - live: the process is up and serving HTTP (`GET /health/live`, always 200
 *   while it runs);
 * - ready: Redis takes a write within `gateway.redis_timeout_ms` (a `SET` of
 *   `Keys.healthProbe` that expires; a refusal such as OOM, MISCONF or
 *   READONLY, gateway/http/write-refusal.ts, is named as the reason; on a
 *   sharded cluster the master of the fleet-wide keys is the one asked), and
 *   some worker wrote its heartbeat within
 *   `gateway.ready_worker_max_age_seconds` (`GET /health/ready` and its alias
 *   `GET /health`: 200, else 503 with the reasons) — without Redis, or with a
 *   Redis that refuses writes, nothing can be stored or queued, and without a
 *   worker nothing queued is run;
 * - store up: the gateway's Redis connection is ready right now (no I/O). While
 *   it is not, `/v1` and `/api` answer 503 with `Retry-After` at once instead
 *   of waiting for Redis (server.ts).
 */
import type { Keys } from '../scheduler/store/keys.ts';
import type { RedisClient } from '../scheduler/store/redis/connection-factory.ts';
import { redisRefusal } from './http/write-refusal.ts';

/** What `ready()` found. */
export interface Readiness {
  ready: boolean;
  /** Why not ready, each a short sentence (empty when ready). */
  reasons: string[];
  redis: 'up' | 'down';
  /** Age of the newest worker heartbeat, ms, or null when none was found (or Redis is down). */
  workerHeartbeatAgeMs: number | null;
}

/** How long the readiness check's written probe lives, ms. */
const HEALTH_PROBE_TTL_MS = 60_000;

/** Seconds a client should wait before retrying while Redis is away. */
export const REDIS_RETRY_AFTER_SECONDS = 5;

/** The checks behind the health endpoints. */
export class GatewayHealth {
  /**
   * @param options.redisTimeoutMs - longest wait for each Redis answer (`gateway.redis_timeout_ms`)
   * @param options.workerMaxAgeMs - newest worker heartbeat must be younger (`gateway.ready_worker_max_age_seconds`)
   */
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly options: { redisTimeoutMs: number; workerMaxAgeMs: number },
  ) {}

  /** True while the Redis connection is ready (no I/O). */
  storeUp(): boolean {
    return this.redis.status === 'ready';
  }

  /** The checks under way: probes that come meanwhile share them (each check writes; the endpoint needs no key). */
  private checking: Promise<Readiness> | undefined;

  /** Run the readiness checks, or share those under way; never throws, never waits longer than `redisTimeoutMs` per Redis call. */
  ready(): Promise<Readiness> {
    this.checking ??= this.check(Date.now()).finally(() => (this.checking = undefined));
    return this.checking;
  }

  private async check(now: number): Promise<Readiness> {
    const bounded = <T>(p: Promise<T>): Promise<T> => {
      let timer: NodeJS.Timeout | undefined;
      return Promise.race([
        p,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${this.options.redisTimeoutMs} ms`)), this.options.redisTimeoutMs);
        }),
      ]).finally(() => clearTimeout(timer));
    };
    if (!this.storeUp()) {
      return {
        ready: false,
        reasons: [`Redis is unreachable (connection ${this.redis.status}).`],
        redis: 'down',
        workerHeartbeatAgeMs: null,
      };
    }
    try {
      await bounded(this.redis.set(this.keys.healthProbe, String(now), 'PX', HEALTH_PROBE_TTL_MS));
    } catch (err) {
      const refusal = redisRefusal(err);
      const reason = refusal ? `Redis refuses writes: ${refusal.message}` : `Redis does not answer: ${(err as Error).message}.`;
      return { ready: false, reasons: [reason], redis: refusal ? 'up' : 'down', workerHeartbeatAgeMs: null };
    }
    let newest: number | undefined;
    try {
      const top = await bounded(this.redis.zrevrange(this.keys.workers, 0, 0, 'WITHSCORES'));
      newest = top[1] === undefined ? undefined : Number(top[1]);
    } catch (err) {
      return { ready: false, reasons: [`Redis does not answer: ${(err as Error).message}.`], redis: 'down', workerHeartbeatAgeMs: null };
    }
    const age = newest === undefined ? null : Math.max(0, now - newest);
    const maxS = Math.round(this.options.workerMaxAgeMs / 1000);
    if (age === null)
      return {
        ready: false,
        reasons: ['No worker has registered: start one with `hermes worker`.'],
        redis: 'up',
        workerHeartbeatAgeMs: null,
      };
    if (age > this.options.workerMaxAgeMs) {
      return {
        ready: false,
        reasons: [`No worker heartbeat in the last ${maxS}s (newest ${Math.round(age / 1000)}s ago).`],
        redis: 'up',
        workerHeartbeatAgeMs: age,
      };
    }
    return { ready: true, reasons: [], redis: 'up', workerHeartbeatAgeMs: age };
  }
}
