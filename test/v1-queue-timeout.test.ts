/**
 * Queueing a `/v1` run is bounded (gateway/http/v1/v1-run.ts, `queueRun`): when
 * the Redis behind BullMQ stops answering after the run record was written,
 * the caller gets 503 `store_unavailable` with `Retry-After` within
 * `gateway.redis_timeout_ms`, not a request held until Redis returns. The run
 * records live on the test Redis; the BullMQ queue talks to a local server
 * that accepts connections and never answers (a Redis that hung).
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { InflightRuns } from '../gateway/drain.ts';
import { errorHandler } from '../gateway/http/errors.ts';
import { v1Router } from '../gateway/http/v1/v1-routes.ts';
import { Keys } from '../scheduler/store/keys.ts';
import { createLogger } from '../scheduler/logger.ts';
import { RunStore, v1RunsQueue } from '../scheduler/v1/v1-runs.ts';
import { testEnv } from './support/env.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const cleanups = cleanupAfterEach();

describe('/v1: queueing a run is bounded', () => {
  it('a Redis that stops answering after the run record was written: 503 store_unavailable with Retry-After within the bound', async () => {
    const env = testEnv();
    cleanups.push(() => env.cleanup());
    const sockets = new Set<Socket>();
    const silent: Server = createServer((s) => {
      sockets.add(s);
      s.on('error', () => {});
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    cleanups.push(
      () =>
        new Promise<void>((r) => {
          for (const s of sockets) s.destroy();
          silent.close(() => r());
        }),
    );
    const redis = new Redis(env.redisUrl);
    cleanups.push(() => redis.disconnect());
    const keys = new Keys(env.prefix);
    const runs = new RunStore(redis, keys, 60);
    const hung = new Redis({
      port: (silent.address() as AddressInfo).port,
      host: '127.0.0.1',
      maxRetriesPerRequest: null,
      lazyConnect: false,
    });
    hung.on('error', () => {});
    cleanups.push(() => hung.disconnect());
    const queue = v1RunsQueue(keys, hung);
    queue.on('error', () => {});
    const log = createLogger({ level: 'silent' });
    const app = express();
    app.use(express.json());
    app.use(
      '/v1',
      v1Router({
        runs,
        queue,
        keys,
        fanout: undefined as never,
        inflight: new InflightRuns(),
        model: 'm',
        maxPromptChars: 10_000,
        runTimeoutMs: 60_000,
        queueTimeoutMs: 500,
        streams: new Set(),
        log,
      }),
    );
    app.use(errorHandler(log));
    const server = app.listen(0, '127.0.0.1');
    await new Promise<void>((r) => server.once('listening', () => r()));
    cleanups.push(() => new Promise<void>((r) => server.close(() => r())));

    const started = Date.now();
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'hello' }),
      signal: AbortSignal.timeout(10_000),
    });
    const tookMs = Date.now() - started;
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('5');
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({ type: 'service_unavailable', code: 'store_unavailable' });
    expect(tookMs).toBeGreaterThanOrEqual(450);
    expect(tookMs).toBeLessThan(3_000);
    // The record was written before the queue was tried.
    expect((await redis.keys(`${env.prefix}*`)).length).toBeGreaterThan(0);
  }, 20_000);
});
