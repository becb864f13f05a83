/**
 * `redis.wait_replicas` (scheduler/store/redis/replica-ack.ts): a loop tick's or a cron run's commit
 * resolves only once a replica holds it. A primary and a replica of its own; the replica is frozen
 * with SIGSTOP, so while it is stopped a commit that waits cannot resolve, and one that does not wait
 * resolves at once.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionStoreFor } from '../scheduler/services.ts';
import { Keys } from '../scheduler/store/keys.ts';
import { freePort } from '../scheduler/store/redis/embedded-redis.ts';
import { ReplicaAck, type ReplicaShortfall } from '../scheduler/store/redis/replica-ack.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { openTestCron } from './support/cron-worker.ts';
import { testEnv } from './support/env.ts';
import { cronJobFixture, cronRunFixture } from './support/record-fixtures.ts';
import { waitFor } from './support/wait-for.ts';

const cleanups = cleanupAfterEach();
let dir: string;
let primary: ChildProcess;
let replica: ChildProcess;
let primaryUrl: string;
let replicaClient: Redis;

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'hermes-test-replica-'));
  const [primaryPort, replicaPort] = [await freePort(), await freePort()];
  const common = ['--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'];
  primary = spawn('redis-server', ['--port', String(primaryPort), ...common], { stdio: 'ignore' });
  replica = spawn('redis-server', ['--port', String(replicaPort), '--replicaof', '127.0.0.1', String(primaryPort), ...common], {
    stdio: 'ignore',
  });
  primaryUrl = `redis://127.0.0.1:${primaryPort}`;
  replicaClient = new Redis({ port: replicaPort, host: '127.0.0.1', maxRetriesPerRequest: null, retryStrategy: () => 50 });
  replicaClient.on('error', () => {});
  await waitFor(
    async () => /master_link_status:up/.test(await replicaClient.info('replication').catch(() => '')),
    20_000,
    'replica in sync',
  );
}, 30_000);

afterAll(async () => {
  replicaClient?.disconnect();
  if (replica?.pid) process.kill(replica.pid, 'SIGCONT');
  await Promise.all([primary, replica].filter(Boolean).map(exited));
  rmSync(dir, { recursive: true, force: true });
});

/** Freeze the replica until the returned function is called (also on clean-up). */
function freezeReplica(): () => void {
  process.kill(replica.pid!, 'SIGSTOP');
  let thawed = false;
  const thaw = () => {
    if (!thawed) process.kill(replica.pid!, 'SIGCONT');
    thawed = true;
  };
  cleanups.push(thaw);
  return thaw;
}

/** A promise's settling, observable without awaiting it. */
function tracked<T>(p: Promise<T>): { promise: Promise<T>; settled: () => boolean } {
  let done = false;
  const promise = p.finally(() => (done = true));
  return { promise, settled: () => done };
}

function sessionStore(overrides: Record<string, unknown>, log?: { warn: (o: unknown, m: string) => void }) {
  const env = testEnv({ 'redis.url': primaryUrl, ...overrides });
  const redis = new Redis(primaryUrl, { maxRetriesPerRequest: 1 });
  cleanups.push(
    () => env.cleanup(),
    () => redis.disconnect(),
  );
  const keys = new Keys(env.config.redis.prefix);
  return { keys, redis, store: sessionStoreFor(env.config, redis, keys, log as never) };
}

const commit = (store: ReturnType<typeof sessionStore>['store'], occurrenceId: string) =>
  store.commitTurn('s1', {
    occurrenceId,
    messages: [{ role: 'assistant', content: 'hi', at: Date.now(), source: 'tick' } as never],
    event: { type: 'reply', data: { text: 'hi' } },
  });

describe('redis.wait_replicas', () => {
  it('a turn commit with wait_replicas 1 resolves only after the frozen replica holds it', async () => {
    const { store, keys, redis } = sessionStore({ 'redis.wait_replicas': 1, 'redis.wait_timeout_ms': 60_000 });
    const thaw = freezeReplica();
    const c = tracked(commit(store, 'occ-1'));
    // The script ran on the primary, and the commit waits for the replica (its WAIT is out).
    await waitFor(async () => (await redis.zscore(keys.sessionCommitted('s1'), 'occ-1')) !== null, 10_000, 'commit on the primary');
    await waitFor(async () => String(await redis.client('LIST')).includes('cmd=wait'), 10_000, 'a WAIT on the primary');
    expect(c.settled()).toBe(false);
    thaw();
    expect((await c.promise).status).toBe('committed');
    // Resolved after the replica acknowledged: it holds the commit now, with no further wait.
    expect(await replicaClient.zscore(keys.sessionCommitted('s1'), 'occ-1')).not.toBeNull();
  });

  it('with wait_replicas 0 (the default) a commit resolves while the replica is frozen', async () => {
    const { store } = sessionStore({});
    freezeReplica();
    expect((await commit(store, 'occ-2')).status).toBe('committed');
  });

  it('a replica that does not answer in wait_timeout_ms: the commit stands, and the shortfall is logged', async () => {
    const warnings: unknown[] = [];
    const { store, keys, redis } = sessionStore(
      { 'redis.wait_replicas': 1, 'redis.wait_timeout_ms': 300 },
      { warn: (o: unknown) => warnings.push(o) },
    );
    freezeReplica();
    expect((await commit(store, 'occ-3')).status).toBe('committed');
    expect(await redis.zscore(keys.sessionCommitted('s1'), 'occ-3')).not.toBeNull();
    expect(warnings).toEqual([{ key: keys.sessionCommitted('s1'), wanted: 1, acknowledged: 0, timeoutMs: 300 }]);
  });

  it('a cron run commit waits for the replica too', async () => {
    const { api } = openTestCron(cleanups, { 'redis.url': primaryUrl, 'redis.wait_replicas': 1, 'redis.wait_timeout_ms': 60_000 });
    const now = Date.now();
    const id = 'c'.repeat(12);
    await api.store.put(cronJobFixture({ id, name: 'replicated', paused: true, now }), 'absent');
    const current = (await api.store.get(id))!;
    const run = cronRunFixture(id, now);
    const committedKey = api.keys.forCronJob(id).cronCommitted(id);
    const thaw = freezeReplica();
    const c = tracked(api.store.commitRun({ run, job: current, expectedVersion: current.version, localEvent: null }));
    await waitFor(async () => (await api.redis.zscore(committedKey, run.occurrence_id)) !== null, 10_000, 'run committed on the primary');
    await waitFor(async () => String(await api.redis.client('LIST')).includes('cmd=wait'), 10_000, 'a WAIT on the primary');
    expect(c.settled()).toBe(false);
    thaw();
    expect((await c.promise).status).toBe('committed');
    expect(await replicaClient.zscore(committedKey, run.occurrence_id)).not.toBeNull();
  });

  it('commits that end while a WAIT is out share the next one: a frozen replica costs them two timeouts, not one each', async () => {
    const shortfalls: ReplicaShortfall[] = [];
    const { store, keys, redis } = sessionStore(
      { 'redis.wait_replicas': 1, 'redis.wait_timeout_ms': 400 },
      { warn: (o: unknown) => shortfalls.push(o as ReplicaShortfall) },
    );
    const waits = async () => Number(/cmdstat_wait:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0);
    const before = await waits();
    freezeReplica();
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => commit(store, `many-${i}`)));
    expect(results.map((r) => r.status)).toEqual(Array(8).fill('committed'));
    // One WAIT for the first, at most one more for the seven that ended while it was out.
    expect((await waits()) - before).toBeLessThanOrEqual(2);
    expect(shortfalls).toHaveLength(8);
    expect(shortfalls.every((s) => s.key === keys.sessionCommitted('s1') && s.acknowledged === 0)).toBe(true);
  });

  it('ReplicaAck.none never sends WAIT', async () => {
    const fake = { duplicate: () => expect.unreachable('no connection of its own') } as never;
    expect(await ReplicaAck.none.after(fake, '{h}:k')).toBeNull();
  });
});
