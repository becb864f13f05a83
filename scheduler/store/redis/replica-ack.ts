/**
 * `redis.wait_replicas`: a commit is delivered only once that many replicas hold it (Redis `WAIT`).
 *
 * Replication is asynchronous, so a commit the master acknowledged just before it died can vanish with
 * it (docs/RELIABILITY.md, "What replication can lose"). After a commit's script has answered, the
 * process writes a probe key in the commit's slot on a connection of its own and sends `WAIT n timeout`
 * there: the replication stream is ordered, so a replica that acknowledged the probe holds the commit
 * too. The wait runs on its own connection because `WAIT` blocks the connection it is sent on, and the
 * commands connection serves every other turn of the process. Commits that end while a wait is out are
 * covered together by the next one (one probe and one `WAIT` for all of them), so a slow replica costs
 * each commit at most two timeouts, not one per commit queued before it.
 *
 * It does not make the commit synchronous: on a timeout the commit stands (it cannot be taken back),
 * the occurrence is delivered as usual and the shortfall is reported, so the operator sees that the
 * guarantee was not reached.
 */
import type { RedisClient } from './connection-factory.ts';

/** What a commit reports when fewer replicas than asked acknowledged it in time. */
export interface ReplicaShortfall {
  /** A key the commit wrote (names the shard). */
  key: string;
  wanted: number;
  acknowledged: number;
  timeoutMs: number;
}

/** One slot's rounds of probe + `WAIT` on the waiting connection. */
interface Rounds {
  running: Promise<number> | null;
  queued: Promise<number> | null;
}

/** The replica acknowledgement a store's commits wait for (`redis.wait_replicas`, `redis.wait_timeout_ms`). */
export class ReplicaAck {
  private readonly waiters = new WeakMap<RedisClient, { connection: RedisClient; rounds: Map<string, Rounds> }>();

  constructor(
    /** Replicas that must hold a commit; 0 = do not wait. */
    readonly replicas: number,
    /** Longest wait for them, ms. */
    readonly timeoutMs: number,
    private readonly onShortfall: (shortfall: ReplicaShortfall) => void = () => {},
  ) {}

  /** No waiting (the default, `redis.wait_replicas` 0). */
  static readonly none = new ReplicaAck(0, 0);

  /**
   * Wait until `replicas` replicas hold every write `redis` made to `key`'s slot before this call.
   * @param key - a key the commit wrote; its hash tag names the slot
   * @returns the replicas that acknowledged (`null` when no wait is configured)
   */
  async after(redis: RedisClient, key: string): Promise<number | null> {
    if (this.replicas === 0) return null;
    const tag = /^\{[^{}]+\}/.exec(key)?.[0] ?? key;
    const rounds = this.roundsOf(redis, tag);
    // A round already out may have sent its probe before this commit: wait for the next one.
    const next = () => this.round(redis, tag, rounds);
    if (rounds.running) rounds.queued ??= rounds.running.then(next, next);
    const acknowledged = await (rounds.queued ?? this.round(redis, tag, rounds));
    if (acknowledged < this.replicas) this.onShortfall({ key, wanted: this.replicas, acknowledged, timeoutMs: this.timeoutMs });
    return acknowledged;
  }

  private roundsOf(redis: RedisClient, tag: string): Rounds {
    let waiter = this.waiters.get(redis);
    if (!waiter) {
      const connection = redis.duplicate();
      connection.on('error', () => {}); // its failures reach the waiting commit as a rejected WAIT
      redis.once('end', () => connection.disconnect());
      waiter = { connection, rounds: new Map() };
      this.waiters.set(redis, waiter);
    }
    let rounds = waiter.rounds.get(tag);
    if (!rounds) waiter.rounds.set(tag, (rounds = { running: null, queued: null }));
    return rounds;
  }

  private round(redis: RedisClient, tag: string, rounds: Rounds): Promise<number> {
    const connection = this.waiters.get(redis)!.connection;
    const run = (async () => {
      // One pipeline to the slot's master (a cluster sends a keyed pipeline to the node of its slot).
      const res = await connection
        .pipeline()
        .set(`${tag}:replica-ack`, Date.now(), 'PX', 60_000)
        .wait(this.replicas, this.timeoutMs)
        .exec();
      const [err, acknowledged] = res?.[1] ?? [new Error('WAIT got no answer'), 0];
      if (err) throw err;
      return Number(acknowledged);
    })();
    rounds.running = run;
    rounds.queued = null;
    const done = () => {
      if (rounds.running === run) rounds.running = null;
    };
    run.then(done, done);
    return run;
  }
}
