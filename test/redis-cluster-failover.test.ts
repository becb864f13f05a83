/**
 * A master failover on Redis Cluster (docs/DESIGN.md §2): a local cluster of three
 * masters with one replica each, `cluster-node-timeout` 1000 ms, `redis.shards`
 * 6. Loops (command turns that append their tick number to a file) run on one
 * session per shard; the master that owns some of the shards is SIGKILLed and
 * its replica is promoted by the cluster's own automatic failover (no manual
 * `CLUSTER FAILOVER`). The worker's ioredis Cluster client follows the new
 * master; every loop keeps firing, and no occurrence is committed twice.
 *
 * Replication is asynchronous: a write acknowledged by the killed master just
 * before the kill may never have reached the replica (docs/RELIABILITY.md,
 * "Redis Cluster failover"). The test therefore asserts exactly-once on what
 * was committed (the reply events that survive in Redis), and bounds the rest:
 * a turn that ran but whose commit was lost is at most one per session.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import type { RunnerSpec } from '../scheduler/session/origin.ts';
import type { Keys } from '../scheduler/store/keys.ts';
import { clusterEnv, startRedisCluster, type TestCluster } from './support/redis-cluster.ts';
import { clients, events, startWorker, waitFor, waitForEvents } from './support/stack.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const SHARDS = 6;
let cluster: TestCluster;
const cleanups = cleanupAfterEach();

// Six redis-servers started and joined, and the replicas' sync waited for: up to a minute and more beside two other
// copies of the suite (30 s was not enough there).
beforeAll(async () => {
  cluster = await startRedisCluster(3, { replicas: 1, nodeTimeoutMs: 1000 });
}, 180_000);
afterAll(async () => {
  await cluster?.stop();
});

/** One session id per shard: `<tag>-<n>` for the first n that lands on each shard. */
function sessionPerShard(keys: Keys, tag: string): string[] {
  const out: string[] = [];
  for (let n = 0; out.filter(Boolean).length < keys.shardCount; n++) {
    const id = `${tag}-${n}`;
    out[keys.shardOfSession(id)] ??= id;
  }
  return out;
}

/** Port of the master serving `slot`, as `node` sees the cluster (CLUSTER SHARDS is 7.0+; CLUSTER NODES is older and enough). */
async function masterOfSlot(node: Redis, slot: number): Promise<number | undefined> {
  const lines = String(await node.cluster('NODES'))
    .trim()
    .split('\n');
  for (const line of lines) {
    const [, addr, flags, , , , , state, ...ranges] = line.split(' ');
    if (!flags!.split(',').includes('master') || flags!.includes('fail') || state !== 'connected') continue;
    for (const r of ranges) {
      const [lo, hi] = r.split('-').map(Number);
      if (slot >= lo! && slot <= (hi ?? lo!)) return Number(addr!.split('@')[0]!.split(':')[1]);
    }
  }
  return undefined;
}

const every = (prompt: string, intervalSeconds: number) => ({ prompt, intervalSeconds, times: null, until: null, notes: [] });

describe('Redis Cluster failover, 3 masters + 3 replicas, 6 shards', () => {
  it('a SIGKILLed master is replaced by its replica; every loop keeps firing, no occurrence committed twice', async () => {
    const env = clusterEnv(cluster, { 'redis.shards': SHARDS });
    const c = clients(env);
    cleanups.push(
      () => env.cleanup(),
      () => c.close(),
    );
    const dir = mkdtempSync(join(tmpdir(), 'hermes-failover-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const w = await startWorker(env);
    let drained = false;
    cleanups.push(() => (drained ? undefined : w.drain()));

    // Which master serves each shard; the victim is the master of shard 0's slot.
    const [probe] = cluster.masters();
    const sessions = sessionPerShard(c.keys, 'fo');
    const owners = await Promise.all(
      c.keys.shards().map(async (k) => {
        const slot = Number(await probe!.cluster('KEYSLOT', k.prefix));
        return { slot, port: (await masterOfSlot(probe!, slot))! };
      }),
    );
    const victim = owners[0]!.port;
    const onVictim = sessions.filter((_, shard) => owners[shard]!.port === victim);
    expect(onVictim.length).toBeGreaterThan(0);
    expect(onVictim.length).toBeLessThan(SHARDS); // the others are the control group on surviving masters

    const runner = (id: string): RunnerSpec => ({
      kind: 'command',
      command: `echo "$HERMES_TICK" >> ${join(dir, `${id}.log`)}; echo "tick $HERMES_TICK"`,
      timeoutSeconds: 10,
    });
    for (const id of sessions) await c.schedules.set(id, 'loop', every('report', 1), { origin: { surface: 'cli' }, runner: runner(id) });
    for (const id of sessions) await waitForEvents(c, id, 'reply', 2);

    // SIGKILL the victim master; the cluster promotes its replica by itself (node timeout 1000 ms).
    const killedAt = Date.now();
    await cluster.kill(victim);
    const survivor = cluster.masters().find((r) => r.options.port !== victim)!;
    const promoted = await waitFor(
      async () => {
        const port = await masterOfSlot(survivor, owners[0]!.slot).catch(() => undefined);
        const ok = /cluster_state:ok/.test(String(await survivor.cluster('INFO').catch(() => '')));
        return ok && port !== undefined && port !== victim ? port : undefined;
      },
      20_000,
      'a replica promoted in place of the killed master',
    ).catch(async (err) => {
      const extra = await Promise.all(
        cluster
          .masters()
          .filter((r) => r.options.port !== victim)
          .map(
            async (r) =>
              `${r.options.port}: ${String(await r.info('replication')).replace(/\r?\n/g, ' ')} ${String(await r.cluster('INFO'))
                .split('\n')
                .filter((l) => /state|epoch|failover/.test(l))
                .join(' ')}`,
          ),
      );
      throw new Error(`${(err as Error).message}; CLUSTER NODES:\n${String(await survivor.cluster('NODES'))}\n${extra.join('\n')}`);
    });
    const failoverMs = Date.now() - killedAt;
    const atFailover = new Map(await Promise.all(sessions.map(async (id) => [id, (await events(c, id, 'reply')).length] as const)));

    // Every loop keeps firing after the failover: three more committed ticks on every session
    // (those on the killed master included: the worker's blocking reads there must not hang).
    const after = await Promise.allSettled(sessions.map((id) => waitForEvents(c, id, 'reply', atFailover.get(id)! + 3, 25_000)));
    const stuck = sessions.filter((_, i) => after[i]!.status === 'rejected');
    // For a loop that stopped: its replies at the failover and now, its record and its in-flight mark.
    const why = await Promise.all(
      stuck.map(async (id) => {
        const loop = await c.loops.get(id, 'loop').catch(() => null);
        return `${id}: replies ${atFailover.get(id)} → ${(await events(c, id, 'reply')).length}; status ${loop?.status}, ticks ${loop?.ticksUsed}, next due ${loop?.nextDueAt}, last started ${loop?.lastTickStartedAt}; in flight ${JSON.stringify(await c.loops.getInflight(id, 'loop').catch((e: Error) => e.message))}; failover took ${failoverMs} ms`;
      }),
    );
    expect(stuck, `loops that stopped firing after the failover: ${why.join('; ')}`).toEqual([]);
    await w.drain();
    drained = true;

    for (const id of sessions) {
      const replies = await events(c, id, 'reply');
      const ticks = replies.map((e) => Number(e.data.tick));
      const occurrences = replies.map((e) => String(e.data.occurrenceId));
      // Exactly once on what was committed: no occurrence and no tick number twice, ticks in order.
      expect(new Set(occurrences).size, `${id}: an occurrence committed twice`).toBe(occurrences.length);
      expect(ticks, `${id}: tick numbers`).toEqual([...ticks].sort((a, b) => a - b));
      expect(new Set(ticks).size, `${id}: a tick number repeated`).toBe(ticks.length);
      for (const e of replies) expect(e.data.text).toBe(`tick ${Number(e.data.tick)}`);
      // Every committed tick ran; what ran without a surviving commit is at most the one turn in flight
      // on that session: on the dead master's shards its commit may not have replicated; on the others,
      // the whole cluster refuses commands until the replica is promoted (`cluster-require-full-coverage`,
      // Redis's default), and a failover slowed by a loaded machine can outlast the client's retries,
      // so a turn whose commit was refused runs again (docs/RELIABILITY.md).
      const ran = existsSync(join(dir, `${id}.log`))
        ? readFileSync(join(dir, `${id}.log`), 'utf8')
            .trim()
            .split('\n')
            .map(Number)
        : [];
      for (const t of ticks) expect(ran, `${id}: committed tick ${t} never ran`).toContain(t);
      const ranWithoutCommit = ran.length - ticks.length;
      expect(
        ranWithoutCommit,
        `${id}: turns that ran but whose commit was lost (ran ${ran.join(',')}; committed ${ticks.join(',')})`,
      ).toBeLessThanOrEqual(1);
    }
    console.info(
      `failover: master :${victim} killed, replica :${promoted} serving after ${failoverMs} ms; sessions on it: ${onVictim.join(', ')}`,
    );
  }, 60_000);
});
