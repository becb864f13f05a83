/**
 * Finding Redis, the embedded default, and the start-up checks (issue: Foundation, point 3).
 *
 * Each test has its own HERMES_HOME (and embedded Redis) or Redis prefix, so the tests run side by side:
 * most of their time is spent waiting for a connection to fail or a CLI process to start.
 */
import { describe } from 'vitest';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { loadConfig } from '../scheduler/config/config.ts';
import { checkRedis, resolveRedis, compareVersions } from '../scheduler/store/redis/connect.ts';
import { describeTopology, openRedisClient, topologyFromConfig } from '../scheduler/store/redis/connection-factory.ts';
import { startEmbeddedRedis } from '../scheduler/store/redis/embedded-redis.ts';
import { embeddedPaths } from '../scheduler/store/redis/embedded-identity.ts';
import { StoreUnavailableError } from '../scheduler/errors/store-unavailable-error.ts';
import { clients, runHermes, startWorker } from './support/stack.ts';
import { connectCli } from '../cli/connect-cli.ts';
import { ConfigError } from '../scheduler/errors/config-error.ts';
import { testEnv } from './support/env.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { captureLog } from './support/log-capture.ts';
import { refusedPort } from './support/refused-port.ts';

/** A fresh HERMES_HOME, removed when the test ends. */
function home(cleanups: CleanUp[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'hermes-redis-test-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

describe.concurrent('resolveRedis', () => {
  it('an unreachable REDIS_URL is one clear error naming host and port and how to start Redis', async ({ cleanups, expect }) => {
    const port = await refusedPort();
    const config = loadConfig({ env: { HERMES_HOME: home(cleanups), REDIS_URL: `redis://127.0.0.1:${port}` } });
    const err = await resolveRedis(config, { allowStart: true }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as Error).message).toContain(`127.0.0.1:${port}`);
    expect((err as Error).message).toMatch(/redis-server --port/);
  });

  it('without REDIS_URL and without a running embedded Redis, a worker gets an error naming what was tried', async ({
    cleanups,
    expect,
  }) => {
    const h = home(cleanups);
    const config = loadConfig({ env: { HERMES_HOME: h } });
    const err = await resolveRedis(config, { allowStart: false }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as Error).message).toMatch(/REDIS_URL is not set and no embedded Redis of .* is running.*hermes up/);
  });

  it('starts the embedded default under HERMES_HOME on its unix socket (no TCP port) with AOF on, and other processes find it', async ({
    cleanups,
    expect,
  }) => {
    const h = home(cleanups);
    const config = loadConfig({ env: { HERMES_HOME: h } });
    const target = await resolveRedis(config, { allowStart: true });
    cleanups.push(() => target.embedded?.stop());
    expect(target.embedded).toBeDefined();
    expect(target.topology).toEqual({ kind: 'embedded', home: h });
    const client = openRedisClient(target.topology, 'commands');
    cleanups.push(() => client.disconnect());
    expect(await client.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
    expect(await client.config('GET', 'port')).toEqual(['port', '0']);
    expect(((await client.config('GET', 'dir')) as string[])[1]).toBe(join(h, 'redis'));
    expect(((await client.config('GET', 'unixsocket')) as string[])[1]).toBe(embeddedPaths(h).socket);
    const again = await resolveRedis(config, { allowStart: false });
    expect(again.topology).toEqual(target.topology);
    expect(again.url).toBe(`embedded unix:${embeddedPaths(h).socket}`);
    expect(again.embedded).toBeUndefined();
    await target.embedded!.stop();
    expect(existsSync(embeddedPaths(h).socket)).toBe(false);
    expect(existsSync(join(h, 'redis', 'redis.url'))).toBe(false);
    await expect(resolveRedis(config, { allowStart: false })).rejects.toThrow(/no embedded Redis of .* is running/);
  });

  it('a CLI command with no Redis prints one line, no stack trace, and exits 1', async ({ cleanups, expect }) => {
    const env = testEnv();
    cleanups.push(() => env.cleanup());
    const port = await refusedPort();
    const r = await runHermes(env, ['status'], { REDIS_URL: `redis://127.0.0.1:${port}` });
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(new RegExp(`^hermes: Redis at 127\\.0\\.0\\.1:${port} \\(REDIS_URL\\) is unreachable`));
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});

describe.concurrent('checkRedis', () => {
  it('warns unless maxmemory-policy is noeviction, and reads the version', async ({ cleanups, expect }) => {
    const dir = home(cleanups);
    const server = await startEmbeddedRedis({ dir, appendonly: false });
    cleanups.push(() => server.stop());
    const client = new Redis(server.url);
    cleanups.push(() => client.disconnect());
    const { log, lines } = captureLog();
    const ok = await checkRedis(client, log);
    expect(compareVersions(ok.version, '6.2.0')).toBeGreaterThanOrEqual(0);
    expect(lines.filter((l) => l.includes('maxmemory-policy'))).toHaveLength(0);
    await client.config('SET', 'maxmemory-policy', 'allkeys-lru');
    await checkRedis(client, log);
    expect(lines.some((l) => l.includes('"level":40') && l.includes('allkeys-lru') && l.includes('noeviction'))).toBe(true);
  });

  it('compares versions numerically', ({ expect }) => {
    expect(compareVersions('6.2.0', '6.2.0')).toBe(0);
    expect(compareVersions('6.0.16', '6.2.0')).toBeLessThan(0);
    expect(compareVersions('7.0.15', '6.2.0')).toBeGreaterThan(0);
    expect(compareVersions('10.0.0', '6.2.0')).toBeGreaterThan(0);
  });
});

describe.concurrent('connection factory: topologies from configuration', () => {
  it('REDIS_CLUSTER_NODES names a cluster, REDIS_SENTINELS with REDIS_SENTINEL_NAME a Sentinel-managed primary', ({ cleanups, expect }) => {
    const cluster = loadConfig({ env: { HERMES_HOME: home(cleanups), REDIS_CLUSTER_NODES: '10.0.0.1:7000, redis://:pw@10.0.0.2:7001' } });
    expect(topologyFromConfig(cluster)).toEqual({
      kind: 'cluster',
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: '10.0.0.2', port: 7001 },
      ],
      tls: false,
    });
    const tls = loadConfig({ env: { HERMES_HOME: home(cleanups), REDIS_CLUSTER_NODES: 'rediss://a:1', REDIS_PASSWORD: 'pw' } });
    expect(topologyFromConfig(tls)).toMatchObject({ kind: 'cluster', tls: true, password: 'pw' });
    const sentinel = loadConfig({
      env: { HERMES_HOME: home(cleanups), REDIS_SENTINELS: 's1:26379,s2:26379', REDIS_SENTINEL_NAME: 'mymaster' },
    });
    expect(topologyFromConfig(sentinel)).toEqual({
      kind: 'sentinel',
      name: 'mymaster',
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26379 },
      ],
      tls: false,
    });
    expect(describeTopology(topologyFromConfig(sentinel))).toBe('sentinel mymaster via s1:26379,s2:26379');
    const single = loadConfig({ env: { HERMES_HOME: home(cleanups), REDIS_URL: 'rediss://:secret@db:6380' } });
    expect(topologyFromConfig(single)).toEqual({ kind: 'single', url: 'rediss://:secret@db:6380' });
    expect(describeTopology(topologyFromConfig(single))).toBe('db:6380'); // no credentials in messages
  });

  it('conflicting or incomplete settings are refused with a message naming the key', ({ cleanups, expect }) => {
    expect(() => loadConfig({ env: { HERMES_HOME: home(cleanups), REDIS_URL: 'redis://a:1', REDIS_CLUSTER_NODES: 'b:2' } })).toThrow(
      /redis\.cluster_nodes.*only one of/,
    );
    expect(() => loadConfig({ env: { HERMES_HOME: home(cleanups), REDIS_SENTINELS: 's:26379' } })).toThrow(
      /redis\.sentinel_name.*REDIS_SENTINEL_NAME/,
    );
    expect(() => loadConfig({ env: { HERMES_HOME: home(cleanups), HERMES_REDIS_SHARDS: '4', HERMES_WORKER_SHARDS: '1,4' } })).toThrow(
      /worker\.shards/,
    );
    expect(
      loadConfig({ env: { HERMES_HOME: home(cleanups), HERMES_REDIS_SHARDS: '4', HERMES_WORKER_SHARDS: '1,3' } }).worker.shards,
    ).toEqual([1, 3]);
    const bad = loadConfig({ env: { HERMES_HOME: home(cleanups), REDIS_CLUSTER_NODES: 'no-port' } });
    expect(() => topologyFromConfig(bad)).toThrow(/REDIS_CLUSTER_NODES entry "no-port" is not host:port/);
  });

  it('an unreachable cluster is one clear error naming its nodes', async ({ cleanups, expect }) => {
    const port = await refusedPort();
    const config = loadConfig({ env: { HERMES_HOME: home(cleanups), REDIS_CLUSTER_NODES: `127.0.0.1:${port}` } });
    const err = await resolveRedis(config, { allowStart: false }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as Error).message).toContain(`cluster 127.0.0.1:${port}`);
  });
});

describe.concurrent('redis.shards on a store that has data', () => {
  it('a store written with one shard refuses another count; a sharded store refuses a change; nothing is written', async ({
    cleanups,
    expect,
  }) => {
    const env = testEnv();
    cleanups.push(() => env.cleanup());
    const c = clients(env);
    cleanups.push(() => c.close());
    await c.schedules.set(
      'keep',
      'loop',
      { prompt: 'x', intervalSeconds: 60, times: null, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: { kind: 'command', command: 'echo x', timeoutSeconds: 5 },
      },
    );
    const withShards = (n: number) => ({ ...env.config, redis: { ...env.config.redis, shards: n } });
    // The store predates the marker: its data is under the one-shard layout.
    const err = await connectCli(withShards(4)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/written with 1 shard\(s\), not 4.*HERMES_REDIS_SHARDS=1.*hermes admin reshard --to 4/);
    expect(await c.redis.get(c.keys.shardCountMarker)).toBeNull();
    await expect(startWorker(env, { config: withShards(2) })).rejects.toThrow(/written with 1 shard/);
    await (await connectCli(env.config)).close(); // the right count is accepted and recorded
    expect(await c.redis.get(c.keys.shardCountMarker)).toBe('1');

    const fresh = testEnv({ 'redis.shards': 3 });
    cleanups.push(() => fresh.cleanup());
    await (await connectCli(fresh.config)).close();
    const again = await connectCli({ ...fresh.config, redis: { ...fresh.config.redis, shards: 2 } }).catch((e: unknown) => e);
    expect((again as Error).message).toMatch(/written with 3 shard\(s\), not 2/);
  });
});
