/**
 * Webhook delivery never reaches internal addresses (scheduler/delivery/webhook-policy.ts,
 * worker/runtime/webhook-sender.ts): refused when a job is created (400 from `/api`,
 * exit 2 from the CLI) and again at send time after DNS resolution; redirects
 * are not followed; `delivery.webhook_allow` opens named hosts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertWebhookTarget, parseWebhookAllow } from '../scheduler/delivery/webhook-policy.ts';
import { ScheduleInputError } from '../scheduler/errors/schedule-input-error.ts';
import { loadConfig } from '../scheduler/config/config.ts';
import { ConfigError } from '../scheduler/errors/config-error.ts';
import { runCronCli } from './support/cron-cli.ts';
import { openTestCron, startCronWorker } from './support/cron-worker.ts';
import { testEnv } from './support/env.ts';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import { waitFor } from './support/wait-for.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { startCronApiGateway } from './support/cron-api-gateway.ts';
import { startWebhookReceiver } from './support/http.ts';

const cli = { origin: { surface: 'cli' as const }, trusted: true };

let model: FakeOpenAI;
beforeAll(async () => {
  model = await startFakeOpenAI();
});
afterAll(async () => {
  await model.close();
});

const cleanups = cleanupAfterEach();

/** A local webhook receiver (test/support/http.ts). */
const receiver = (answer?: Parameters<typeof startWebhookReceiver>[1]) => startWebhookReceiver(cleanups, answer);

const INTERNAL = [
  'http://127.0.0.1:6379/',
  'http://169.254.169.254/latest/meta-data/',
  'http://10.0.0.5/hook',
  'http://172.16.3.4/hook',
  'http://192.168.1.1/hook',
  'http://100.64.0.1/hook',
  'http://0.0.0.0/',
  'http://[::1]:8080/',
  'http://[::ffff:127.0.0.1]/',
  'http://[::ffff:169.254.169.254]/',
  'http://[fd00::1]/',
  'http://[fe80::1]/',
  'http://[::127.0.0.1]/', // IPv4-compatible IPv6 (::/96, deprecated): ipaddr.js calls it unicast
  'http://[::a9fe:a9fe]/', // 169.254.169.254, IPv4-compatible
  'http://[::2:0:0:1]/', // rest of ::/8, IETF reserved
  'http://[64:ff9b:1::7f00:1]/', // local-use NAT64 embedding 127.0.0.1
  'http://[fec0::1]/', // deprecated site-local
  'http://[200::1]/', // outside 2000::/3, not assigned for unicast
  'http://2130706433/', // 127.0.0.1 in decimal
  'http://0x7f.1/', // 127.0.0.1 in hex shorthand
  'http://localhost:8080/',
  'http://api.localhost/',
  'http://metadata/computeMetadata/v1/',
  'http://redis.internal:6379/',
];

describe('webhook targets at creation', () => {
  it.each(INTERNAL)('refuses %s', (target) => {
    expect(() => assertWebhookTarget(target, parseWebhookAllow([]))).toThrow(ScheduleInputError);
    expect(() => assertWebhookTarget(target, parseWebhookAllow([]))).toThrow(/delivery\.webhook_allow/);
  });

  it('accepts public hosts and addresses, and what the allow-list opens', () => {
    const none = parseWebhookAllow([]);
    for (const ok of ['https://hooks.example.com/x', 'http://93.184.216.34/hook', 'https://[2606:4700::1111]/']) {
      expect(() => assertWebhookTarget(ok, none)).not.toThrow();
    }
    const allow = parseWebhookAllow(['127.0.0.1', 'Hooks.Internal', '10.1.0.0/16', '::1']);
    for (const ok of ['http://127.0.0.1:9000/', 'http://hooks.internal/x', 'http://10.1.2.3/', 'http://[::1]/']) {
      expect(() => assertWebhookTarget(ok, allow)).not.toThrow();
    }
    expect(() => assertWebhookTarget('http://10.2.0.1/', allow)).toThrow(/private/);
    expect(() => assertWebhookTarget('http://other.internal/', allow)).toThrow(/local host/);
  });

  it('a bad allow-list entry stops the process with a message naming the key', () => {
    expect(() => loadConfig({ env: { HERMES_HOME: '/nonexistent', HERMES_DELIVERY_WEBHOOK_ALLOW: 'ok.example,10.0.0.0/99' } })).toThrow(
      ConfigError,
    );
    expect(() => loadConfig({ env: { HERMES_HOME: '/nonexistent', HERMES_DELIVERY_WEBHOOK_ALLOW: 'ok.example,10.0.0.0/99' } })).toThrow(
      /delivery\.webhook_allow.*HERMES_DELIVERY_WEBHOOK_ALLOW/,
    );
  });

  it('the CLI exits 2 and writes nothing; edit refuses it too', async () => {
    const { env, api } = openTestCron(cleanups, { 'cron.min_interval_seconds': 1 });
    const bad = await runCronCli(env.config, ['add', 'every 1h', 'report', '--deliver', 'local,http://169.254.169.254/latest/meta-data/']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/Webhook target http:\/\/169\.254\.169\.254 is a linkLocal address/);
    expect(await api.service.list({ all: true })).toEqual([]);
    const job = await api.service.add({ schedule: 'every 1h', prompt: 'report', name: 'r' }, cli);
    const edit = await runCronCli(env.config, ['edit', 'r', '--deliver', 'http://127.0.0.1:6379/']);
    expect(edit.code).toBe(2);
    expect(edit.stderr).toMatch(/Webhook target http:\/\/127\.0\.0\.1:6379 is a loopback address/);
    expect((await api.store.get(job.id))!.deliver).toEqual(['local']);
  });

  it('/api answers 400 and writes nothing', async () => {
    const env = testEnv({ 'api_server.port': 0, 'api_server.key': 'k-123456' });
    cleanups.push(() => env.cleanup());
    const { cron, call } = await startCronApiGateway(cleanups, env, 'k-123456');
    const post = (deliver: string) => call('POST', '/api/cron/jobs', { schedule: 'every 1h', prompt: 'report', deliver });
    for (const target of ['http://127.0.0.1:6379/', 'http://169.254.169.254/', 'http://[::1]/']) {
      const res = await post(target);
      expect(res.status).toBe(400);
      expect(res.body.error.message).toMatch(/address: internal addresses are refused/);
    }
    expect((await cron.list({ limit: 500 }, { all: true })).data).toEqual([]);
    expect((await post('https://hooks.example.com/x')).status).toBe(201);
  });
});

describe('webhook delivery at send time', () => {
  it('a name that resolves to a loopback address is refused after DNS; nothing reaches it', async () => {
    const hook = await receiver();
    // Created while the operator allowed `localhost`; the worker's config no longer does.
    const { env: creating, api } = openTestCron(cleanups, { 'agent.base_url': model.baseUrl, 'delivery.webhook_allow': ['localhost'] });
    const job = await api.service.add(
      { schedule: 'every 1h', prompt: 'report', deliver: `http://localhost:${hook.port}/hook`, paused: true },
      cli,
    );
    const workerEnv = testEnv({ 'agent.base_url': model.baseUrl, 'redis.prefix': creating.prefix });
    cleanups.push(() => workerEnv.cleanup());
    const worker = await startCronWorker(workerEnv.config);
    cleanups.push(() => worker.close());
    await api.service.runNow(job.id, { origin: { surface: 'cli' }, trusted: true });
    const run = await waitFor(
      async () => (await api.store.runs(job.id, 5))[0]?.deliveries.find((d) => d.status !== 'pending'),
      15_000,
      'the delivery outcome',
    );
    expect(run).toMatchObject({ status: 'failed', error: expect.stringMatching(/^refused: localhost resolves to a loopback address/) });
    expect(hook.hits).toEqual([]);
  }, 30_000);

  it('an IP-literal target stored earlier is refused at send time; the allow-list opens it', async () => {
    const hook = await receiver();
    const { env: creating, api } = openTestCron(cleanups, { 'agent.base_url': model.baseUrl, 'delivery.webhook_allow': ['127.0.0.1'] });
    const job = await api.service.add(
      { schedule: 'every 1h', prompt: 'report', deliver: `http://127.0.0.1:${hook.port}/hook`, paused: true },
      cli,
    );

    const strict = testEnv({ 'agent.base_url': model.baseUrl, 'redis.prefix': creating.prefix });
    cleanups.push(() => strict.cleanup());
    const w1 = await startCronWorker(strict.config);
    await api.service.runNow(job.id, { origin: { surface: 'cli' }, trusted: true });
    const refused = await waitFor(
      async () => (await api.store.runs(job.id, 5))[0]?.deliveries.find((d) => d.status !== 'pending'),
      15_000,
      'refusal',
    );
    await w1.close();
    expect(refused).toMatchObject({ status: 'failed', error: 'refused: 127.0.0.1 is a loopback address' });
    expect(hook.hits).toEqual([]);

    const w2 = await startCronWorker(creating.config);
    cleanups.push(() => w2.close());
    await api.service.runNow(job.id, { origin: { surface: 'cli' }, trusted: true });
    const delivered = await waitFor(
      async () => {
        const runs = await api.store.runs(job.id, 5);
        return runs.length >= 2 ? runs.map((r) => r.deliveries[0]).find((d) => d?.status === 'delivered') : undefined;
      },
      15_000,
      'delivery',
    );
    expect(delivered).toMatchObject({ evidence: 'HTTP 204' });
    expect(hook.hits).toEqual(['/hook']);
  }, 30_000);

  it('a redirect is not followed, not even to an allowed host', async () => {
    const inner = await receiver();
    const outer = await receiver(() => ({ status: 302, headers: { location: `http://127.0.0.1:${inner.port}/metadata` } }));
    const { env, api } = openTestCron(cleanups, { 'agent.base_url': model.baseUrl, 'delivery.webhook_allow': ['127.0.0.1'] });
    const worker = await startCronWorker(env.config);
    cleanups.push(() => worker.close());
    const job = await api.service.add(
      { schedule: 'every 1h', prompt: 'report', deliver: `http://127.0.0.1:${outer.port}/hook`, paused: true },
      cli,
    );
    await api.service.runNow(job.id, { origin: { surface: 'cli' }, trusted: true });
    const d = await waitFor(
      async () => (await api.store.runs(job.id, 5))[0]?.deliveries.find((x) => x.status !== 'pending'),
      15_000,
      'the delivery outcome',
    );
    expect(d).toMatchObject({ status: 'failed', error: 'HTTP 302 (redirects are not followed)' });
    expect(outer.hits).toEqual(['/hook']);
    expect(inner.hits).toEqual([]);
  }, 30_000);
});
