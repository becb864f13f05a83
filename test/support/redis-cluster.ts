/**
 * A private Redis Cluster for tests: three `redis-server --cluster-enabled yes`
 * on free loopback ports (and, on request, one replica per master), joined with
 * `redis-cli --cluster create … --cluster-replicas N`, without persistence;
 * `kill(port)` SIGKILLs one node, `stop()` kills them all and removes their folder. Also a test
 * environment (`clusterEnv`) that points the product at it with `redis.shards`.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort } from '../../scheduler/store/redis/embedded-redis.ts';
import { testEnv, type TestEnv } from './env.ts';
import { waitFor } from './wait-for.ts';

const run = promisify(execFile);

/** A running test cluster. */
export interface TestCluster {
  /** `127.0.0.1:<port>` of every master. */
  nodes: string[];
  /** One plain client per node as started (masters first; for DBSIZE, KEYS … in assertions). */
  masters(): Redis[];
  /** SIGKILL the node on `port`; resolves when its process has exited. */
  kill(port: number): Promise<void>;
  stop(): Promise<void>;
}

/** How the test cluster is laid out. */
export interface TestClusterOptions {
  /** Replicas per master (`--cluster-replicas`); 0 by default. */
  replicas?: number;
  /** `cluster-node-timeout` in ms: how long a silent master takes to be failed over. 2000 by default. */
  nodeTimeoutMs?: number;
}

/**
 * Start a cluster of `masters` masters (and `replicas` replicas each).
 * Resolves when every node reports `cluster_state:ok`.
 */
export async function startRedisCluster(masters = 3, options: TestClusterOptions = {}): Promise<TestCluster> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(masters, options);
    } catch (err) {
      if (!(err instanceof PortClash) || attempt === 3) throw err;
    }
  }
}

class PortClash extends Error {
  constructor(ports: number[]) {
    super(`a cluster node could not bind its port (one of ${ports.join(', ')})`);
  }
}

async function startOnce(masters: number, options: TestClusterOptions): Promise<TestCluster> {
  const replicas = options.replicas ?? 0;
  const dir = mkdtempSync(join(tmpdir(), 'hermes-test-cluster-'));
  const ports: number[] = [];
  const children: ChildProcess[] = [];
  const clients: Redis[] = [];
  const stop = async () => {
    for (const c of clients) c.disconnect();
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null || c.signalCode !== null) return resolve();
            c.once('exit', () => resolve());
            c.kill('SIGKILL');
          }),
      ),
    );
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < masters * (1 + replicas); i++) {
      let port = await freePort();
      while (port > 55535) port = await freePort(); // its bus port, port + 10000, must exist too
      ports.push(port);
      children.push(
        spawn(
          'redis-server',
          [
            '--port',
            String(port),
            '--bind',
            '127.0.0.1',
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            join(dir, `nodes-${port}.conf`),
            '--dir',
            dir,
            '--save',
            '',
            '--appendonly',
            'no',
            '--maxmemory-policy',
            'noeviction',
            '--cluster-node-timeout',
            String(options.nodeTimeoutMs ?? 2000),
            '--repl-diskless-sync-delay',
            '0',
          ],
          { stdio: 'ignore' },
        ),
      );
    }
    for (const port of ports) {
      const c = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
      c.on('error', () => {});
      clients.push(c);
      await waitFor(async () => (await c.ping().catch(() => '')) === 'PONG', 30_000, `redis-server on ${port}`);
    }
    // A port (or its bus port, +10000) taken by another process between the pick and the bind makes one
    // node exit and its PONG come from someone else: the cluster would be joined with a node short.
    const ids = await Promise.all(clients.map(async (c) => String(await c.cluster('MYID'))));
    const exited = children.some((c) => c.exitCode !== null || c.signalCode !== null);
    if (exited || new Set(ids).size !== ids.length) throw new PortClash(ports);
    await run('redis-cli', [
      '--cluster',
      'create',
      ...ports.map((p) => `127.0.0.1:${p}`),
      '--cluster-replicas',
      String(replicas),
      '--cluster-yes',
    ]);
    for (const c of clients) {
      await waitFor(async () => /cluster_state:ok/.test(String(await c.cluster('INFO'))), 15_000, 'cluster_state:ok');
    }
    // A replica can be promoted only once it has synced with its master (else its data age is unknown).
    for (const c of clients) {
      await waitFor(
        async () => {
          const info = String(await c.info('replication'));
          return /role:master/.test(info) || /master_link_status:up/.test(info);
        },
        15_000,
        'replicas in sync with their masters',
      );
    }
  } catch (err) {
    await stop();
    throw err;
  }
  const kill = (port: number) =>
    new Promise<void>((resolve) => {
      const child = children[ports.indexOf(port)];
      if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    });
  return { nodes: ports.map((p) => `127.0.0.1:${p}`), masters: () => clients, kill, stop };
}

/**
 * A test environment on the cluster: like `testEnv` (own prefix, home, test
 * timings) but `redis.cluster_nodes` instead of `redis.url`, and `redis.shards`.
 */
export function clusterEnv(cluster: TestCluster, overrides: Record<string, unknown> & { 'redis.shards'?: number } = {}): TestEnv {
  const env = testEnv({ 'redis.url': undefined, 'redis.cluster_nodes': cluster.nodes, ...overrides });
  const childEnv: NodeJS.ProcessEnv = { ...env.childEnv, REDIS_CLUSTER_NODES: cluster.nodes.join(',') };
  delete childEnv.REDIS_URL;
  if (overrides['redis.shards'] !== undefined) childEnv.HERMES_REDIS_SHARDS = String(overrides['redis.shards']);
  return { ...env, redisUrl: '', childEnv };
}
