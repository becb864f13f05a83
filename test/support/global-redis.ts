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
import { currentCliBuild } from './global-build.ts';
import { buildTestPrograms } from './test-programs.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // The run's compiled CLI (test/support/global-build.ts) and its bundled test programs
  // (test/support/test-programs.ts) are made while the run's Redis starts.
  const building = Promise.all([currentCliBuild(), buildTestPrograms()]);
  const removeBuilds = (removes: Array<() => void>) => removes.forEach((remove) => remove());
  if (process.env.REDIS_URL) {
    project.provide('redisUrl', process.env.REDIS_URL);
    const removes = await building;
    return async () => removeBuilds(removes);
  }
  const dir = mkdtempSync(join(tmpdir(), 'hermes-test-redis-'));
  const [server, removes] = await Promise.all([startEmbeddedRedis({ dir, appendonly: false }), building]);
  project.provide('redisUrl', server.url);
  return async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
    removeBuilds(removes);
  };
}
