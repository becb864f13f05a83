/**
 * A Redis outage does not dump stack traces: every BullMQ object the worker
 * and the gateway create has an error listener that logs one structured,
 * rate-limited line instead of BullMQ's console.error fallback.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startEmbeddedRedis, type EmbeddedRedis } from '../scheduler/store/redis/embedded-redis.ts';
import { spawnGateway } from './support/child-gateway.ts';
import { testEnv } from './support/env.ts';
import { HERMES_BIN } from './support/stack.ts';
import { sleep, waitFor } from './support/wait-for.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const cleanups = cleanupAfterEach();

/** A stack frame line as Node prints it. */
const STACK_FRAME = /^ {4}at /m;

describe('Redis outage', () => {
  it('the worker and the gateway log one structured line per queue instead of stack traces while their Redis is down', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hermes-outage-redis-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    let redis: EmbeddedRedis = await startEmbeddedRedis({ dir, appendonly: false });
    cleanups.push(() => redis.stop());
    const port = Number(new URL(redis.url).port);
    const env = testEnv();
    cleanups.push(() => env.cleanup());
    const childEnv = { ...env.childEnv, REDIS_URL: redis.url, HERMES_LOG_LEVEL: 'info', HERMES_API_SERVER_PORT: '0' };

    const worker: ChildProcess = spawn(process.execPath, [HERMES_BIN, 'worker'], { env: childEnv, stdio: ['ignore', 'ignore', 'pipe'] });
    let workerErr = '';
    worker.stderr!.on('data', (d: Buffer) => (workerErr += d.toString()));
    cleanups.push(() => {
      if (worker.exitCode === null) worker.kill('SIGKILL');
    });
    const gateway = await spawnGateway(childEnv);
    cleanups.push(() => gateway.kill());
    await waitFor(() => workerErr.includes('worker started'), 30_000, 'worker started');

    await redis.stop();
    const down = Date.now();
    // BullMQ reports the lost connection: as a log line, or (without a listener) as a stack dump
    const reported = (stderr: string) => stderr.includes('BullMQ error') || STACK_FRAME.test(stderr);
    await waitFor(() => reported(workerErr) && reported(gateway.stderr), 15_000, 'BullMQ errors reported');
    await sleep(Math.max(0, 2500 - (Date.now() - down))); // the outage lasts a few seconds (ioredis retries meanwhile)
    redis = await startEmbeddedRedis({ dir, appendonly: false, port });

    for (const [who, stderr] of [
      ['worker', workerErr],
      ['gateway', gateway.stderr],
    ] as const) {
      expect(stderr, `${who} stderr`).not.toMatch(STACK_FRAME);
      const lines = stderr
        .split('\n')
        .filter((l) => l.includes('BullMQ error'))
        .map((l) => JSON.parse(l) as { queue: string; err: string });
      expect(lines.length).toBeGreaterThan(0);
      // rate-limited: one line per queue object in a 2.5 s outage (a name may be shared by a Queue and a Worker)
      const perQueue = new Map<string, number>();
      for (const l of lines) perQueue.set(l.queue, (perQueue.get(l.queue) ?? 0) + 1);
      for (const [queue, n] of perQueue) expect(n, `${who} ${queue}`).toBeLessThanOrEqual(3);
    }
  }, 60_000);
});
