/**
 * Prometheus metrics: a worker's `/metrics` at `worker.metrics_port` and the
 * gateway's `/metrics`, behind the API key unless `metrics.public`, with the
 * metrics docs/OPERATIONS.md names (lateness histogram, turns, durations,
 * deferrals by reason, queue job counts, workers alive, HTTP requests).
 */
import { describe, expect, it } from 'vitest';
import { startGateway } from '../gateway/gateway-process.ts';
import { createLogger } from '../scheduler/logger.ts';
import { enqueueTelegramOutbound } from '../scheduler/delivery/outbound.ts';
import { testEnv } from './support/env.ts';
import { startFakeTelegram } from './support/fake-telegram.ts';
import { telegramEnv } from './support/telegram-env.ts';
import { clients, events, startWorker, startWorkerStack, waitFor, waitForEvents } from './support/stack.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { enqueueInput } from '../scheduler/session/inbox.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const KEY = 'metrics-key-123456';
const cleanups = cleanupAfterEach();

/** The value of one series line (`name{labels} value`), or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('worker /metrics', () => {
  it('serves tick lateness as a histogram, turns, durations, deferrals, queue counts and workers alive; behind the key', async () => {
    const { c, worker: w } = await startWorkerStack(cleanups, { 'worker.metrics_port': 0, 'api_server.key': KEY });
    const url = `${w.metricsServer!.url}/metrics`;

    // A held session lock makes the first tick wait: it is deferred as "session-busy".
    const held = await w.deps.lock.acquire('m', 'test-holder');
    await c.schedules.set(
      'm',
      'loop',
      { prompt: 'p', intervalSeconds: 1, times: 2, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: { kind: 'command', command: 'echo tick', timeoutSeconds: 5 },
      },
    );
    await waitFor(() => sampleOf(w, 'hermes_ticks_deferred_total{reason="session-busy"}'), 10_000, 'a deferral');
    await held!.release();
    await waitForEvents(c, 'm', 'reply', 2);

    expect((await fetch(url)).status).toBe(401);
    expect((await fetch(url, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    const res = await fetch(url, { headers: { authorization: `Bearer ${KEY}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    expect(text).toContain('# TYPE hermes_tick_lateness_seconds histogram');
    expect(sample(text, 'hermes_tick_lateness_seconds_count{kind="loop"}')).toBe(2);
    expect(sample(text, 'hermes_tick_lateness_seconds_bucket{le="+Inf",kind="loop"}')).toBe(2);
    expect(sample(text, 'hermes_turns_total{kind="loop",outcome="ok"}')).toBe(2);
    expect(sample(text, 'hermes_turn_duration_seconds_count{kind="loop"}')).toBe(2);
    expect(sample(text, 'hermes_ticks_deferred_total{reason="session-busy"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'hermes_workers_alive')).toBe(1);
    expect(text).toMatch(/^hermes_queue_jobs\{queue="ticks",state="completed"\} \d+$/m);
    expect(text).toMatch(/^hermes_queue_jobs\{queue="outbound-telegram",state="waiting"\} 0$/m);
    expect(text).toContain('hermes_process_resident_memory_bytes');
    expect((await fetch(`${w.metricsServer!.url}/other`, { headers: { authorization: `Bearer ${KEY}` } })).status).toBe(404);
  });

  it('counts goal continuation turns as kind goal, by outcome', async () => {
    const model = await startFakeOpenAI();
    let judged = 0;
    // Two continuation turns: the judge says continue once, then done.
    model.respond((req) =>
      req.messages[0]?.content.startsWith('You judge')
        ? ++judged < 2
          ? '{"verdict":"continue","reason":"more"}'
          : '{"verdict":"done","reason":"done"}'
        : 'step',
    );
    cleanups.push(() => model.close());
    const { c, worker: w } = await startWorkerStack(cleanups, { 'agent.base_url': model.baseUrl, 'agent.api_key': 'k' });
    await enqueueInput(
      { redis: c.redis, keys: c.keys, queues: c.queues, maxChars: 10_000 },
      { sessionId: 'g', text: '/goal ship it', messageId: 'm1', origin: { surface: 'chat' } },
    );
    await waitFor(
      async () => ((await events(c, 'g', 'notice')).some((e) => e.data.text === 'Goal achieved: ship it') ? true : undefined),
      15_000,
      'the goal achieved',
    );
    expect(await sampleOf(w, 'hermes_turns_total{kind="goal",outcome="ok"}')).toBe(2);
    expect(await sampleOf(w, 'hermes_turn_duration_seconds_count{kind="goal"}')).toBe(2);
  });

  it('is open with metrics.public, and off without worker.metrics_port', async () => {
    const env = testEnv({ 'worker.metrics_port': 0, 'api_server.key': KEY, 'metrics.public': true });
    cleanups.push(() => env.cleanup());
    const w = await startWorker(env);
    cleanups.push(() => w.drain());
    const res = await fetch(`${w.metricsServer!.url}/metrics`);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('# TYPE hermes_turns_total counter');

    const plain = testEnv();
    cleanups.push(() => plain.cleanup());
    const w2 = await startWorker(plain);
    cleanups.push(() => w2.drain());
    expect(w2.metricsServer).toBeUndefined();
  });
});

/** A series of a worker's registry, read in-process. */
async function sampleOf(w: { metrics: { registry: { metrics(): Promise<string> } } }, series: string): Promise<number | undefined> {
  return sample(await w.metrics.registry.metrics(), series);
}

describe('gateway /metrics', () => {
  it('answers 401 without the key and counts requests by route pattern and status', async () => {
    const env = testEnv({ 'api_server.port': 0, 'api_server.key': KEY });
    cleanups.push(() => env.cleanup());
    const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }) });
    cleanups.push(() => gw.close());
    const base = gw.httpAddress.url;
    const auth = { authorization: `Bearer ${KEY}` };
    expect((await fetch(`${base}/health/live`)).status).toBe(200); // no worker runs here: /health (ready) would be 503
    expect((await fetch(`${base}/api/schedules/nobody/loop`, { headers: auth })).status).toBe(404);
    expect((await fetch(`${base}/api/schedules/somebody-else/loop`, { headers: auth })).status).toBe(404);
    expect((await fetch(`${base}/no/such/path/123`)).status).toBe(404);
    const refused = await fetch(`${base}/metrics`);
    expect(refused.status).toBe(401);
    const res = await fetch(`${base}/metrics`, { headers: auth });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain('# TYPE hermes_tick_lateness_seconds histogram');
    expect(text).toContain('# TYPE hermes_telegram_sends_total counter');
    expect(sample(text, 'hermes_http_requests_total{route="/health/live",status="200"}')).toBe(1);
    // One series for both ids: the label is the route pattern, not the path.
    expect(text).toMatch(/^hermes_http_requests_total\{route="\/api\/schedules\/:session\/:kind",status="404"\} 2$/m);
    expect(sample(text, 'hermes_http_requests_total{route="unmatched",status="404"}')).toBe(1);
    expect(sample(text, 'hermes_http_requests_total{route="/metrics",status="401"}')).toBe(1);
    expect(sample(text, 'hermes_workers_alive')).toBe(0);
  });

  it('is open with metrics.public', async () => {
    const env = testEnv({ 'api_server.port': 0, 'api_server.key': KEY, 'metrics.public': true });
    cleanups.push(() => env.cleanup());
    const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }) });
    cleanups.push(() => gw.close());
    expect((await fetch(`${gw.httpAddress.url}/metrics`)).status).toBe(200);
    expect((await fetch(`${gw.httpAddress.url}/api/schedules`)).status).toBe(401);
  });
});

describe('hermes_telegram_sends_total', () => {
  it("counts the outbound sender's sendMessage calls by outcome", async () => {
    const fake = await startFakeTelegram();
    cleanups.push(() => fake.close());
    const env = telegramEnv(fake, { 'api_server.key': KEY });
    cleanups.push(() => env.cleanup());
    const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }) });
    cleanups.push(() => gw.close());
    fake.refuseChat('403', 403, 'Forbidden: bot was blocked by the user');
    const c = clients(env);
    cleanups.push(() => c.close());
    const { telegramOutboundQueue } = await import('../scheduler/delivery/outbound.ts');
    const queue = telegramOutboundQueue(c.keys, c.redis);
    cleanups.push(() => queue.close());
    await enqueueTelegramOutbound(queue, { platform: 'telegram', chatId: '77', text: 'hello', sessionId: 's', occurrenceId: 'o1' });
    await enqueueTelegramOutbound(queue, { platform: 'telegram', chatId: '403', text: 'hello', sessionId: 's', occurrenceId: 'o2' });
    await waitFor(
      async () => {
        const text = await gw.metrics.registry.metrics();
        return (
          sample(text, 'hermes_telegram_sends_total{outcome="sent"}') === 1 &&
          sample(text, 'hermes_telegram_sends_total{outcome="refused"}') === 1
        );
      },
      15_000,
      'both sends counted',
    );
    expect(fake.sent.map((m) => String(m.chat_id))).toEqual(['77']);
  });
});
