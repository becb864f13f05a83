/**
 * A private Sentinel set-up for tests: one primary, one replica and one
 * sentinel (quorum 1, down after 1 s) on free loopback ports, without
 * persistence. `killPrimary()` SIGKILLs the primary; the sentinel promotes
 * the replica. `stop()` kills what is left and removes the folder.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../../scheduler/store/redis/embedded-redis.ts';
import { testEnv, type TestEnv } from './env.ts';
import { waitFor } from './wait-for.ts';

export const SENTINEL_NAME = 'hermes-test';

/** A running primary, replica and sentinel. */
export interface TestSentinel {
  /** `127.0.0.1:<port>` of the sentinel. */
  sentinel: string;
  primaryPort: number;
  replicaPort: number;
  /** SIGKILL the primary and wait until the sentinel names the replica as the primary. */
  killPrimary(): Promise<void>;
  /** The port the sentinel names as the primary now. */
  currentPrimaryPort(): Promise<number>;
  stop(): Promise<void>;
}

function kill(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

async function answers(port: number): Promise<void> {
  const c = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
  c.on('error', () => {});
  try {
    await waitFor(async () => (await c.ping().catch(() => '')) === 'PONG', 10_000, `redis on ${port}`);
  } finally {
    c.disconnect();
  }
}

/** Start the three servers; resolves when the replica is in sync and the sentinel knows both. */
export async function startRedisSentinel(): Promise<TestSentinel> {
  const dir = mkdtempSync(join(tmpdir(), 'hermes-test-sentinel-'));
  const [primaryPort, replicaPort, sentinelPort] = [await freePort(), await freePort(), await freePort()];
  const common = ['--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', '--maxmemory-policy', 'noeviction'];
  const primary = spawn('redis-server', ['--port', String(primaryPort), ...common], { stdio: 'ignore' });
  const replica = spawn('redis-server', ['--port', String(replicaPort), '--replicaof', '127.0.0.1', String(primaryPort), ...common], {
    stdio: 'ignore',
  });
  const conf = join(dir, 'sentinel.conf');
  writeFileSync(
    conf,
    [
      `port ${sentinelPort}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor ${SENTINEL_NAME} 127.0.0.1 ${primaryPort} 1`,
      `sentinel down-after-milliseconds ${SENTINEL_NAME} 1000`,
      `sentinel failover-timeout ${SENTINEL_NAME} 5000`,
      '',
    ].join('\n'),
  );
  const children = [primary, replica];
  const stop = async () => {
    await Promise.all(children.map(kill));
    rmSync(dir, { recursive: true, force: true });
  };
  const probe = new Redis({ port: sentinelPort, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
  probe.on('error', () => {});
  const currentPrimaryPort = async () =>
    Number(((await probe.call('SENTINEL', 'get-master-addr-by-name', SENTINEL_NAME)) as string[] | null)?.[1]);
  try {
    await answers(primaryPort);
    await answers(replicaPort);
    children.push(spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' }));
    await answers(sentinelPort);
    const rep = new Redis({ port: replicaPort, host: '127.0.0.1', maxRetriesPerRequest: 1 });
    rep.on('error', () => {});
    try {
      await waitFor(async () => /master_link_status:up/.test(await rep.info('replication')), 15_000, 'replica in sync');
    } finally {
      rep.disconnect();
    }
    await waitFor(
      async () => {
        const replicas = (await probe.call('SENTINEL', 'replicas', SENTINEL_NAME).catch(() => [])) as unknown[];
        return replicas.length > 0;
      },
      15_000,
      'the sentinel to see the replica',
    );
  } catch (err) {
    probe.disconnect();
    await stop();
    throw err;
  }
  return {
    sentinel: `127.0.0.1:${sentinelPort}`,
    primaryPort,
    replicaPort,
    currentPrimaryPort,
    async killPrimary() {
      await kill(primary);
      await waitFor(async () => (await currentPrimaryPort().catch(() => 0)) === replicaPort, 20_000, 'the sentinel to promote the replica');
    },
    async stop() {
      probe.disconnect();
      await stop();
    },
  };
}

/** A test environment whose Redis is the sentinel's primary (`REDIS_SENTINELS`, `REDIS_SENTINEL_NAME`). */
export function sentinelEnv(s: TestSentinel, overrides: Record<string, unknown> = {}): TestEnv {
  const env = testEnv({ 'redis.url': undefined, 'redis.sentinels': [s.sentinel], 'redis.sentinel_name': SENTINEL_NAME, ...overrides });
  const childEnv: NodeJS.ProcessEnv = { ...env.childEnv, REDIS_SENTINELS: s.sentinel, REDIS_SENTINEL_NAME: SENTINEL_NAME };
  delete childEnv.REDIS_URL;
  return { ...env, redisUrl: '', childEnv };
}
