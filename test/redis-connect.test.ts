/** Finding Redis, the embedded default, and the start-up checks (issue: Foundation, point 3). */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { Writable } from 'node:stream';
import { loadConfig } from '../scheduler/config.ts';
import { checkRedis, resolveRedis, compareVersions } from '../scheduler/redis/connect.ts';
import { freePort, startEmbeddedRedis, embeddedUrlFile } from '../scheduler/redis/embedded-redis.ts';
import { StoreUnavailableError } from '../scheduler/errors/store-unavailable-error.ts';
import { runHermes } from './support/stack.ts';
import { testEnv } from './support/env.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function home(): string {
  const dir = mkdtempSync(join(tmpdir(), 'hermes-redis-test-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

describe('resolveRedis', () => {
  it('an unreachable REDIS_URL is one clear error naming host and port and how to start Redis', async () => {
    const port = await freePort();
    const config = loadConfig({ env: { HERMES_HOME: home(), REDIS_URL: `redis://127.0.0.1:${port}` } });
    const err = await resolveRedis(config, { allowStart: true }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as Error).message).toContain(`127.0.0.1:${port}`);
    expect((err as Error).message).toMatch(/redis-server --port/);
  });

  it('without REDIS_URL and without a running embedded Redis, a worker gets an error naming what was tried', async () => {
    const h = home();
    const config = loadConfig({ env: { HERMES_HOME: h } });
    const err = await resolveRedis(config, { allowStart: false }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as Error).message).toMatch(/REDIS_URL is not set and no embedded Redis of .* is running.*hermes up/);
  });

  it('starts the embedded default under HERMES_HOME with AOF on, and other processes find it', async () => {
    const h = home();
    const config = loadConfig({ env: { HERMES_HOME: h } });
    const target = await resolveRedis(config, { allowStart: true });
    cleanups.push(() => target.embedded?.stop());
    expect(target.embedded).toBeDefined();
    const client = new Redis(target.url);
    cleanups.push(() => client.disconnect());
    expect(await client.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
    expect(((await client.config("GET", "dir")) as string[])[1]).toBe(join(h, "redis"));
    expect(readFileSync(embeddedUrlFile(h), 'utf8').trim()).toBe(target.url);
    const again = await resolveRedis(config, { allowStart: false });
    expect(again.url).toBe(target.url);
    expect(again.embedded).toBeUndefined();
    await target.embedded!.stop();
    expect(existsSync(embeddedUrlFile(h))).toBe(false);
  });

  it('a CLI command with no Redis prints one line, no stack trace, and exits 1', async () => {
    const env = testEnv();
    cleanups.push(() => env.cleanup());
    const port = await freePort();
    const r = await runHermes(env, ['status'], { REDIS_URL: `redis://127.0.0.1:${port}` });
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(new RegExp(`^hermes: Redis at 127\\.0\\.0\\.1:${port} \\(REDIS_URL\\) is unreachable`));
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('checkRedis', () => {
  it('warns unless maxmemory-policy is noeviction, and reads the version', async () => {
    const dir = home();
    const server = await startEmbeddedRedis({ dir, appendonly: false });
    cleanups.push(() => server.stop());
    const client = new Redis(server.url);
    cleanups.push(() => client.disconnect());
    const lines: string[] = [];
    const log = pino({ level: 'info' }, new Writable({ write(chunk, _e, cb) { lines.push(String(chunk)); cb(); } }));
    const ok = await checkRedis(client, log);
    expect(compareVersions(ok.version, '6.2.0')).toBeGreaterThanOrEqual(0);
    expect(lines.filter((l) => l.includes('maxmemory-policy'))).toHaveLength(0);
    await client.config('SET', 'maxmemory-policy', 'allkeys-lru');
    await checkRedis(client, log);
    expect(lines.some((l) => l.includes('"level":40') && l.includes('allkeys-lru') && l.includes('noeviction'))).toBe(true);
  });

  it('compares versions numerically', () => {
    expect(compareVersions('6.2.0', '6.2.0')).toBe(0);
    expect(compareVersions('6.0.16', '6.2.0')).toBeLessThan(0);
    expect(compareVersions('7.0.15', '6.2.0')).toBeGreaterThan(0);
    expect(compareVersions('10.0.0', '6.2.0')).toBeGreaterThan(0);
  });
});
