/**
 * Drain of the gateway on SIGTERM (docs/DESIGN.md §9; field report F9 and the old
 * system's "/v1 runs killed after 0.00 s" bug): `/v1` runs get
 * `agent.cron_drain_timeout`, not the chat budget; 0 opts them out and the
 * caller gets a 503 at once; after the deadline the caller gets a 503, never a
 * hang. The F9 case runs the gateway as a child process and sends it a real
 * SIGTERM (drain, close, exit 0); the rules of the drain itself are checked on
 * in-process gateways through `drain()`, the function the signal handler calls.
 * The worker is an in-process BullMQ worker running `processV1Run` against a
 * local model.
 *
 * Each test has its own Redis prefix, model, worker, gateways and fake Telegram, so the tests run side
 * by side (most of their time is spent waiting for a slow answer or a deadline).
 */
import { describe } from 'vitest';
import { startGateway } from '../gateway/gateway-process.ts';
import type { PlatformPlugin } from '../gateway/plugins/platform-plugin.ts';
import { Keys } from '../scheduler/store/keys.ts';
import { createLogger } from '../scheduler/logger.ts';
import { enqueueTelegramOutbound, telegramOutboundQueue } from '../scheduler/delivery/outbound.ts';
import { Redis } from 'ioredis';
import { spawnGateway } from './support/child-gateway.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { echoLast, startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import { startFakeTelegram } from './support/fake-telegram.ts';
import { readJson, waitFor } from './support/http.ts';
import { waitForRunStatus } from './support/wait-for.ts';
import { memoryLogger, telegramEnv } from './support/telegram-env.ts';
import { startV1Worker } from './support/v1-worker.ts';
import { it, type CleanUp } from './support/cleanup.ts';

const KEY = 'drain-key-123';

async function setup(
  cleanups: CleanUp[],
  overrides: Record<string, unknown>,
  modelDelayMs: number,
): Promise<{ env: TestEnv; model: FakeOpenAI }> {
  const model = await startFakeOpenAI();
  model.respond((req) => ({ delayMs: modelDelayMs, text: echoLast(req) }));
  cleanups.push(() => model.close());
  const env = testEnv({ 'agent.base_url': model.baseUrl, 'agent.api_key': 'k', 'api_server.port': 0, 'api_server.key': KEY, ...overrides });
  cleanups.push(() => env.cleanup());
  const worker = await startV1Worker(env);
  cleanups.push(() => worker.close());
  return { env, model };
}

async function gatewayChild(cleanups: CleanUp[], env: TestEnv) {
  const child = await spawnGateway({ ...env.childEnv, HERMES_LOG_LEVEL: 'info' });
  cleanups.push(async () => {
    child.kill('SIGKILL');
    await child.exited;
  });
  return child;
}

function ask(url: string, text: string): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: text }] }),
  });
}

describe.concurrent('gateway drain on SIGTERM', () => {
  it('F9: a /v1 run in flight finishes within cron_drain_timeout 30 (restart_drain_timeout 0) and is delivered', async ({
    cleanups,
    expect,
  }) => {
    const { env, model } = await setup(cleanups, { 'agent.cron_drain_timeout': 30, 'agent.restart_drain_timeout': 0 }, 1000);
    const gw = await gatewayChild(cleanups, env);
    const pending = ask(gw.url, 'two second task');
    await waitFor(() => model.pending === 1, 15_000, 'model call running');
    const signalled = Date.now();
    gw.kill('SIGTERM');
    const res = await pending;
    expect(res.status).toBe(200);
    expect((await readJson(res)).choices[0].message.content).toBe('echo: two second task');
    expect(await gw.exited).toBe(0);
    const waited = Date.now() - signalled;
    expect(waited).toBeGreaterThanOrEqual(700);
    expect(waited).toBeLessThan(10_000);
    expect(gw.stderr).toMatch(/waiting up to 30s for 1 \/v1 run\(s\)/);
  });

  it('with cron_drain_timeout 0 the caller gets a 503 at once, not a hang', async ({ cleanups, expect }) => {
    const { env, model } = await setup(cleanups, { 'agent.cron_drain_timeout': 0 }, 6000);
    const { log, lines } = memoryLogger();
    const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log });
    cleanups.push(() => gw.close());
    const pending = ask(gw.httpAddress.url, 'opted out');
    await waitFor(() => model.pending === 1, 15_000, 'model call running');
    const signalled = Date.now();
    const drained = gw.drain();
    const res = await pending;
    // At once: well before the model's 6 s answer (a loaded machine may take a while to reply at all).
    expect(Date.now() - signalled).toBeLessThan(4000);
    expect(res.status).toBe(503);
    expect((await readJson(res)).error).toMatchObject({ type: 'service_unavailable', code: 'server_draining' });
    await drained;
    expect(lines.map((l) => l.msg)).toContain('drain: cron_drain_timeout is 0; interrupting 1 /v1 run(s) now');
  });

  it('after the deadline the caller gets a 503; the run itself finishes in the worker and stays readable', async ({ cleanups, expect }) => {
    const { env, model } = await setup(cleanups, { 'agent.cron_drain_timeout': 0.5 }, 5000);
    const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: 'silent' }) });
    cleanups.push(() => gw.close());
    const pending = ask(gw.httpAddress.url, 'too slow');
    await waitFor(() => model.pending === 1, 15_000, 'model call running');
    const signalled = Date.now();
    const drained = gw.drain();
    const res = await pending;
    const waited = Date.now() - signalled;
    // At the 0.5 s deadline, not at the model's 5 s answer.
    expect(waited).toBeGreaterThanOrEqual(450);
    expect(waited).toBeLessThan(4000);
    expect(res.status).toBe(503);
    const runId = res.headers.get('x-hermes-run-id')!;
    expect((await readJson(res)).error.message).toContain(`GET /v1/runs/${runId}`);
    await drained;
    await gw.close();

    // a gateway that restarted serves the finished run: nothing was lost with the old one
    const next = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: 'silent' }) });
    cleanups.push(() => next.close());
    const run = await waitForRunStatus(
      () => readJson(fetch(`${next.httpAddress.url}/v1/runs/${runId}`, { headers: { authorization: `Bearer ${KEY}` } })),
      'completed',
    );
    expect(run.output).toBe('echo: too slow');
  });

  it('stops taking new work while draining: new /v1 requests get 503, Telegram polling stops, replies are still delivered', async ({
    cleanups,
    expect,
  }) => {
    const fake = await startFakeTelegram();
    cleanups.push(() => fake.close());
    const model = await startFakeOpenAI();
    // Long enough that the drain is still waiting on this call when the reply below is queued.
    model.respond((req) => ({ delayMs: 6000, text: echoLast(req) }));
    cleanups.push(() => model.close());
    const env = telegramEnv(fake, {
      'agent.base_url': model.baseUrl,
      'agent.api_key': 'k',
      'api_server.key': KEY,
      'agent.cron_drain_timeout': 30,
    });
    cleanups.push(() => env.cleanup());
    const worker = await startV1Worker(env);
    cleanups.push(() => worker.close());
    const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: 'silent' }) });
    cleanups.push(() => gw.close());
    await waitFor(() => fake.polling, 15_000, 'polling');

    const inflight = ask(gw.httpAddress.url, 'in flight');
    await waitFor(() => model.pending === 1, 15_000, 'model call running');
    let drainEnded = false;
    const drained = gw.drain().finally(() => (drainEnded = true));
    await waitFor(() => !fake.polling, 10_000, 'polling stopped');

    const refused = await ask(gw.httpAddress.url, 'too late');
    expect(refused.status).toBe(503);
    expect((await readJson(refused)).error.code).toBe('server_draining');
    // Counted once the drain is seen to refuse work (it asked the poller to stop when it began): "not polling"
    // can also be the moment between two polls, which a loaded machine stretches.
    const polls = fake.pollCount;

    // a worker finishing a tick during the drain window queues a reply: it is still sent
    expect(drainEnded).toBe(false);
    const connection = new Redis(env.redisUrl, { maxRetriesPerRequest: null });
    const queue = telegramOutboundQueue(new Keys(env.prefix), connection);
    cleanups.push(async () => {
      await queue.close();
      connection.disconnect();
    });
    await enqueueTelegramOutbound(queue, {
      platform: 'telegram',
      chatId: '42',
      text: 'tick result',
      sessionId: 'telegram:42',
      occurrenceId: 'cron:j:1',
    });
    await waitFor(() => fake.sent.length === 1, 15_000, 'reply delivered during drain');
    expect(drainEnded).toBe(false);

    expect((await inflight).status).toBe(200);
    await drained;
    expect(fake.pollCount).toBe(polls);
    expect(fake.sent[0]).toMatchObject({ chat_id: '42', text: 'tick result' });
  });
});

describe.concurrent('a drain refuses new /v1 work at once', () => {
  it('while a platform is still stopping its inbound, a new /v1 request gets 503, not a run', async ({ cleanups, expect }) => {
    const { env, model } = await setup(cleanups, { 'agent.cron_drain_timeout': 30 }, 0);
    // A platform whose inbound takes its time to stop (a long poll being cut): released at the end of the test.
    let release!: () => void;
    const stopping = new Promise<void>((r) => (release = r));
    let stopAsked = false;
    const plugin: PlatformPlugin = {
      name: 'slow-stop',
      availability: 'enabled',
      load: () =>
        Promise.resolve({
          start: async () => {},
          stopInbound: () => {
            stopAsked = true;
            return stopping;
          },
          stop: async () => {},
          status: () => ({}),
        }),
    };
    const gw = await startGateway({
      config: env.config,
      redisUrl: env.redisUrl,
      log: createLogger({ level: 'silent' }),
      plugins: [plugin],
    });
    cleanups.push(() => gw.close());
    cleanups.push(() => release()); // first: the close waits for the drain, which waits for the stop
    await waitFor(() => gw.platforms().find((p) => p.name === 'slow-stop')?.state === 'ready', 15_000, 'the platform ready');
    const drained = gw.drain();
    await waitFor(() => stopAsked, 10_000, 'the inbound stop asked');
    const refused = await ask(gw.httpAddress.url, 'too late');
    expect(refused.status).toBe(503);
    expect((await readJson(refused)).error.code).toBe('server_draining');
    expect(model.requests).toHaveLength(0);
    release();
    await drained;
  });
});

describe.concurrent('closing with a Telegram send hanging', () => {
  it('close() does not wait forever on BullMQ: after outbound_stop_timeout_seconds the send is aborted, and the next gateway sends it once', async ({
    cleanups,
    expect,
  }) => {
    const fake = await startFakeTelegram();
    cleanups.push(() => fake.close());
    const env = telegramEnv(fake, { 'gateway.outbound_stop_timeout_seconds': 0.5 });
    cleanups.push(() => env.cleanup());
    let release!: () => void;
    const hang = new Promise<void>((r) => (release = r));
    cleanups.push(() => release());
    fake.beforeSend = async (_p, n) => {
      if (n === 1) await hang;
    };
    const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: 'silent' }) });
    const connection = new Redis(env.redisUrl, { maxRetriesPerRequest: null });
    const queue = telegramOutboundQueue(new Keys(env.prefix), connection);
    cleanups.push(async () => {
      await queue.close();
      connection.disconnect();
    });
    await enqueueTelegramOutbound(queue, {
      platform: 'telegram',
      chatId: '9',
      text: 'stuck reply',
      sessionId: 'telegram:9',
      occurrenceId: 'tick:h:1',
    });
    await waitFor(() => fake.sendCalls === 1, 15_000, 'send in progress');

    const started = Date.now();
    await gw.close();
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(400);
    expect(took).toBeLessThan(3000);
    expect(fake.sent).toHaveLength(0);

    fake.beforeSend = undefined;
    const next = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: 'silent' }) });
    cleanups.push(() => next.close());
    await waitFor(() => fake.sent.length === 1, 10_000, 'reply sent by the next gateway');
    await new Promise((r) => setTimeout(r, 300));
    expect(fake.sent).toEqual([expect.objectContaining({ chat_id: '9', text: 'stuck reply' })]);
  });
});
