/**
 * One private `redis-server` for the whole test run, on a free port, without
 * persistence; or the Redis of `REDIS_URL` when given. Tests never touch a
 * Redis they did not start: each test also works under its own key prefix.
 */
import type { TestProject } from 'vitest/node';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedRedis } from '../../scheduler/store/redis/embedded-redis.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (process.env.REDIS_URL) {
    project.provide('redisUrl', process.env.REDIS_URL);
    return async () => {};
  }
  const dir = mkdtempSync(join(tmpdir(), 'hermes-test-redis-'));
  const server = await startEmbeddedRedis({ dir, appendonly: false });
  project.provide('redisUrl', server.url);
  return async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
