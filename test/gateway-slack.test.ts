/**
 * The Slack platform (docs/GATEWAY.md "Slack") over the real parts: the gateway's
 * Slack adapter with the real `@slack/web-api` and `@slack/socket-mode` clients
 * against a local server speaking Slack's Web API and Socket Mode protocols
 * (support/fake-slack.ts), Slack's signed Events API requests sent to
 * `POST /slack/events`, real Redis and BullMQ, a worker process and a model
 * (support/fake-openai.ts).
 *
 * Each test has its own fake Slack, model, Redis prefix, gateway and worker
 * (stack()), so the tests run side by side: they spend their time waiting for
 * a turn, a tick or a Retry-After.
 */
import { describe } from 'vitest';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import type { PlatformPlugin } from '../gateway/plugins/platform-plugin.ts';
import { renderMrkdwn } from '../gateway/slack/render-mrkdwn.ts';
import { createLogger } from '../scheduler/logger.ts';
import { inboxJobId } from '../scheduler/session/inbox.ts';
import { WorkerProcess } from '../worker/worker-process.ts';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import {
  dmEvent,
  signedRequest,
  slackSignature,
  slashCommandForm,
  startFakeSlack,
  SLACK_ALLOWED_USER,
  SLACK_APP_TOKEN,
  SLACK_BOT_TOKEN,
  SLACK_SIGNING_SECRET,
  type FakeSlack,
} from './support/fake-slack.ts';
import { startFakeTelegram } from './support/fake-telegram.ts';
import { readInbox, ALLOWED_USER, BOT_TOKEN } from './support/telegram-env.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { homeKeyAuth, readJson, waitFor } from './support/http.ts';
import { sleep } from './support/wait-for.ts';
import { it, type CleanUp } from './support/cleanup.ts';

interface Stack {
  env: TestEnv;
  slack: FakeSlack;
  model: FakeOpenAI;
  gw: Gateway;
  worker?: WorkerProcess;
  events: string;
}

/** This test's own fake Slack and model, a gateway, and (unless `worker: false`) a worker; all stopped when the test ends. */
async function stack(
  cleanups: CleanUp[],
  options: { worker?: boolean; overrides?: Record<string, unknown>; plugins?: PlatformPlugin[] } = {},
): Promise<Stack> {
  const slack = await startFakeSlack();
  cleanups.push(() => slack.close());
  const model = await startFakeOpenAI();
  model.respond(() => 'all green');
  cleanups.push(() => model.close());
  const env = testEnv({
    'api_server.port': 0,
    'slack.bot_token': SLACK_BOT_TOKEN,
    'slack.signing_secret': SLACK_SIGNING_SECRET,
    'slack.allowed_users': SLACK_ALLOWED_USER,
    'slack.api_url': slack.apiUrl,
    'agent.base_url': model.baseUrl,
    'agent.api_key': 'k',
    'gateway.watcher_interval_seconds': 0.05,
    'gateway.reconnect_backoff_seconds': '0.1,0.2,0.4',
    ...options.overrides,
  });
  cleanups.push(() => env.cleanup());
  const log = createLogger({ level: 'silent' });
  let worker: WorkerProcess | undefined;
  if (options.worker !== false) {
    worker = await WorkerProcess.start({ config: env.config, redisUrl: env.redisUrl, log });
    cleanups.push(() => worker!.drain());
  }
  const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log, plugins: options.plugins });
  cleanups.push(() => gw.close());
  await waitFor(() => gw.platforms().find((p) => p.name === 'slack')?.state === 'ready', 10_000, 'slack ready');
  return { env, slack, model, gw, worker, events: `${gw.httpAddress.url}/slack/events` };
}

describe.concurrent('Slack Events API at POST /slack/events', () => {
  it("a signed DM event is stored, answered 200 within 3 s, and the model's reply is posted to that channel", async ({
    cleanups,
    expect,
  }) => {
    const s = await stack(cleanups);
    const started = Date.now();
    const res = await signedRequest(s.events, JSON.stringify(dmEvent('is the build green?', { channel: 'D0000042' })));
    expect(res.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(3000);
    await waitFor(() => s.slack.posted.length >= 1, 15_000, 'reply posted');
    expect(s.slack.posted[0]).toMatchObject({ channel: 'D0000042', text: 'all green' });
    expect(s.slack.posted[0]!.thread_ts).toBeUndefined();
    const user = s.model.requests[0]!.messages.filter((m) => m.role === 'user').at(-1);
    expect(user?.content).toContain('is the build green?');
  });

  it('acknowledges only what is stored: the event is in the inbox when the 200 arrives', async ({ cleanups, expect }) => {
    const s = await stack(cleanups, { worker: false });
    const reader = await readInbox(s.env);
    cleanups.push(() => reader.close());
    const event = dmEvent('hello', { channel: 'D0000043' });
    const res = await signedRequest(s.events, JSON.stringify(event));
    expect(res.status).toBe(200);
    expect(await reader.count()).toBe(1);
    await waitFor(() => reader.seen.length === 1, 5000, 'inbox job');
    expect(reader.seen[0]).toMatchObject({
      sessionId: 'slack:D0000043',
      text: 'hello',
      messageId: `slack-${event.event_id as string}`,
      origin: { surface: 'slack', route: { platform: 'slack', chatId: 'D0000043' } },
    });
  });

  it('a replayed event with the same event_id (X-Slack-Retry-Num) runs one turn, also after a gateway restart', async ({
    cleanups,
    expect,
  }) => {
    const s = await stack(cleanups);
    const body = JSON.stringify(dmEvent('only once please', { channel: 'D0000044' }));
    expect((await signedRequest(s.events, body)).status).toBe(200);
    expect(
      (await signedRequest(s.events, body, { headers: { 'x-slack-retry-num': '1', 'x-slack-retry-reason': 'http_timeout' } })).status,
    ).toBe(200);
    await waitFor(() => s.slack.posted.length >= 1, 15_000, 'reply posted');
    await s.gw.close();
    const again = await startGateway({ config: s.env.config, redisUrl: s.env.redisUrl, log: createLogger({ level: 'silent' }) });
    cleanups.push(() => again.close());
    await waitFor(() => again.platforms().find((p) => p.name === 'slack')?.state === 'ready', 10_000, 'slack ready again');
    expect((await signedRequest(`${again.httpAddress.url}/slack/events`, body, { headers: { 'x-slack-retry-num': '2' } })).status).toBe(
      200,
    );
    await sleep(1500); // a second turn would have been answered by now (the first took far less)
    expect(s.model.requests).toHaveLength(1);
    expect(s.slack.posted.filter((p) => p.channel === 'D0000044')).toHaveLength(1);
  });

  it('a bad, missing, stale or future-dated signature is 401 and stores nothing; url_verification is answered with its challenge', async ({
    cleanups,
    expect,
  }) => {
    const s = await stack(cleanups, { worker: false });
    const reader = await readInbox(s.env);
    cleanups.push(() => reader.close());
    const body = JSON.stringify(dmEvent('forged'));
    expect((await signedRequest(s.events, body, { secret: 'not-the-secret' })).status).toBe(401);
    expect((await signedRequest(s.events, body, { signature: 'v0=' })).status).toBe(401);
    const stale = Math.floor(Date.now() / 1000) - 6 * 60;
    expect((await signedRequest(s.events, body, { timestampSec: stale })).status).toBe(401);
    // a timestamp from the future (a leaked signed request replayed later) and one that is not whole seconds
    expect((await signedRequest(s.events, body, { timestampSec: Math.floor(Date.now() / 1000) + 365 * 86_400 })).status).toBe(401);
    expect((await signedRequest(s.events, body, { timestampSec: Math.floor(Date.now() / 1000) + 6 * 60 })).status).toBe(401);
    expect(
      (await signedRequest(s.events, body, { headers: { 'x-slack-request-timestamp': `${Math.floor(Date.now() / 1000)}.0` } })).status,
    ).toBe(401);
    // the signature covers the body: a valid signature of another body does not pass
    const ts = Math.floor(Date.now() / 1000);
    expect((await signedRequest(s.events, body, { timestampSec: ts, signature: slackSignature('{}', ts) })).status).toBe(401);
    // no bearer key is asked for on this route, even with API_SERVER_KEY set elsewhere
    const challenge = await signedRequest(s.events, JSON.stringify({ token: 'x', challenge: 'c-123', type: 'url_verification' }));
    expect(challenge.status).toBe(200);
    expect(await challenge.json()).toEqual({ challenge: 'c-123' });
    await sleep(300);
    expect(await reader.count()).toBe(0);
  });

  it('users outside SLACK_ALLOWED_USERS get one refusal per channel per hour and never reach the agent', async ({ cleanups, expect }) => {
    const s = await stack(cleanups);
    for (let i = 0; i < 3; i++)
      expect((await signedRequest(s.events, JSON.stringify(dmEvent(`hi ${i}`, { user: 'USTRANGER', channel: 'D0000045' })))).status).toBe(
        200,
      );
    await waitFor(() => s.slack.posted.length >= 1, 10_000, 'refusal');
    await sleep(1000);
    expect(s.slack.posted).toHaveLength(1);
    expect(s.slack.posted[0]!.text).toMatch(/allow-listed users/);
    expect(s.model.requests).toHaveLength(0);
  });
});

describe.concurrent('Slack commands', () => {
  it('/hermes loop 10m … sets a loop in that channel whose ticks post there', async ({ cleanups, expect }) => {
    const s = await stack(cleanups);
    const res = await signedRequest(s.events, slashCommandForm('loop 10m check the build', { channel: 'C0000046' }), {
      contentType: 'application/x-www-form-urlencoded',
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ response_type: 'ephemeral' });
    await waitFor(() => s.slack.posted.length >= 2, 20_000, 'loop confirmation and first tick');
    expect(s.slack.posted.every((p) => p.channel === 'C0000046')).toBe(true);
    expect(s.slack.posted[0]!.text).toMatch(/Loop set: every 10m/);
    expect(s.slack.posted[1]!.text).toBe('all green');
    const record = await s.worker!.deps.loops.get('slack:C0000046', 'loop');
    expect(record).toMatchObject({
      status: 'active',
      intervalSeconds: 600,
      runner: { kind: 'agent' },
      origin: { surface: 'slack', route: { platform: 'slack', chatId: 'C0000046' } },
    });
  });

  it("/loop typed in a thread sets the loop in the thread's session, and its ticks reply in the thread; --run from chat is refused", async ({
    cleanups,
    expect,
  }) => {
    const s = await stack(cleanups);
    const thread = '1712345678.000100';
    await signedRequest(s.events, JSON.stringify(dmEvent('/loop 10m watch the deploy', { channel: 'D0000047', threadTs: thread })));
    await waitFor(() => s.slack.posted.length >= 2, 20_000, 'confirmation and first tick');
    expect(s.slack.posted.map((p) => [p.channel, p.thread_ts])).toEqual([
      ['D0000047', thread],
      ['D0000047', thread],
    ]);
    expect(await s.worker!.deps.loops.get(`slack:D0000047:${thread}`, 'loop')).toMatchObject({ status: 'active' });

    await signedRequest(s.events, JSON.stringify(dmEvent("/loop 10m disk --run 'df -h'", { channel: 'D0000048' })));
    await waitFor(() => s.slack.posted.some((p) => p.channel === 'D0000048'), 15_000, 'refusal of --run');
    expect(await s.worker!.deps.loops.get('slack:D0000048', 'loop')).toBeNull();
  });
});

describe.concurrent('Slack outbound', () => {
  it('a 6,000-character reply is posted as ordered parts under the limit, nothing lost', async ({ cleanups, expect }) => {
    const s = await stack(cleanups);
    const lines = Array.from({ length: 125 }, (_, i) => `line ${String(i).padStart(3, '0')} ${'x'.repeat(40)}`);
    const reply = lines.join('\n');
    expect(reply.length).toBeGreaterThan(6000);
    s.model.respond(() => reply);
    await signedRequest(s.events, JSON.stringify(dmEvent('long please', { channel: 'D0000049' })));
    await waitFor(
      () =>
        s.slack.posted.length > 0 &&
        s.slack.posted
          .map((p) => p.text)
          .join('')
          .includes('line 124'),
      20_000,
      'all parts',
    );
    expect(s.slack.posted.length).toBeGreaterThanOrEqual(2);
    for (const p of s.slack.posted) expect(p.text.length).toBeLessThanOrEqual(4000);
    expect(s.slack.posted.map((p) => p.text).join('')).toBe(renderMrkdwn(reply));
    // cut at line boundaries: every part but the last ends with a whole line
    for (const p of s.slack.posted.slice(0, -1)) expect(p.text.endsWith('\n')).toBe(true);
  });

  it('a 429 with Retry-After: 2 is waited out: one message, sent at least 2 s after the refusal', async ({ cleanups, expect }) => {
    const s = await stack(cleanups);
    s.slack.rateLimitNext(1, 2);
    await signedRequest(s.events, JSON.stringify(dmEvent('rate me', { channel: 'D0000050' })));
    await waitFor(() => s.slack.posted.length >= 1, 20_000, 'reply after the wait');
    const posts = s.slack.calls.filter((c) => c.method === 'chat.postMessage');
    expect(posts.map((c) => c.status)).toEqual([429, 200]);
    expect(posts[1]!.at - posts[0]!.at).toBeGreaterThanOrEqual(2000);
    await sleep(500);
    expect(s.slack.posted).toHaveLength(1);
    expect(s.gw.metrics.platformSends.get()).toBeDefined();
  });

  it('markdown is rendered as Slack mrkdwn', ({ expect }) => {
    // slackify-markdown wraps emphasis in zero-width spaces, so it also works inside a word
    expect(renderMrkdwn('# Title\n\n**bold** and ~~gone~~ [docs](https://example.com) & co').replaceAll('\u200b', '')).toBe(
      '*Title*\n\n*bold* and ~gone~ <https://example.com|docs> &amp; co',
    );
    expect(renderMrkdwn('- one\n- two\n\n```\ncode\n```')).not.toContain('<!---->');
  });
});

describe.concurrent('Slack Socket Mode (SLACK_APP_TOKEN)', () => {
  it('events and /hermes arrive over the WebSocket envelope protocol, are acked after they are stored, and replies are posted', async ({
    cleanups,
    expect,
  }) => {
    const s = await stack(cleanups, { overrides: { 'slack.app_token': SLACK_APP_TOKEN, 'slack.signing_secret': undefined } });
    await waitFor(() => s.slack.sockets === 1, 10_000, 'socket connected');
    const event = dmEvent('over the socket', { channel: 'D0000051' });
    const id = s.slack.pushEnvelope('events_api', event);
    await waitFor(() => s.slack.acks.some((a) => a.envelope_id === id), 10_000, 'ack');
    // stored before the ack: its inbox job exists (looked up, not consumed: the worker must get it)
    const inbox = s.worker!.deps.queues.forSession('slack:D0000051').inbox;
    expect(await inbox.getJob(inboxJobId('slack:D0000051', `slack-${event.event_id as string}`))).toBeDefined();
    await waitFor(() => s.slack.posted.some((p) => p.channel === 'D0000051' && p.text === 'all green'), 15_000, 'reply');

    const cmd = Object.fromEntries(new URLSearchParams(slashCommandForm('loop 10m check over socket', { channel: 'C0000052' })));
    const cmdId = s.slack.pushEnvelope('slash_commands', cmd);
    await waitFor(() => s.slack.acks.some((a) => a.envelope_id === cmdId), 10_000, 'command ack');
    expect(s.slack.acks.find((a) => a.envelope_id === cmdId)?.payload).toMatchObject({ response_type: 'ephemeral' });
    await waitFor(() => s.slack.posted.filter((p) => p.channel === 'C0000052').length >= 2, 20_000, 'loop confirmation and tick');
    expect(await s.worker!.deps.loops.get('slack:C0000052', 'loop')).toMatchObject({ status: 'active', intervalSeconds: 600 });
    // HTTP events are off in Socket Mode without a signing secret
    expect((await signedRequest(s.events, JSON.stringify(dmEvent('x')))).status).toBe(404);
  });
});

describe.concurrent('one gateway, several platforms', () => {
  it('a platform whose plugin fails to load re-arms at most 3 times while Telegram and Slack keep working; /health/ready and /metrics show each state', async ({
    cleanups,
    expect,
  }) => {
    const telegram = await startFakeTelegram();
    cleanups.push(() => telegram.close());
    let brokenLoads = 0;
    const broken: PlatformPlugin = {
      name: 'broken',
      availability: 'enabled',
      async load() {
        brokenLoads++;
        throw new Error('cannot import the adapter');
      },
    };
    const s = await stack(cleanups, {
      plugins: [broken],
      overrides: {
        'telegram.bot_token': BOT_TOKEN,
        'telegram.allowed_users': String(ALLOWED_USER),
        'telegram.api_root': telegram.apiRoot,
        'gateway.poll_timeout_seconds': 1,
        'gateway.poll_lease_ttl_seconds': 1,
      },
    });
    await waitFor(() => s.gw.platforms().find((p) => p.name === 'telegram')?.state === 'ready', 10_000, 'telegram ready');
    await waitFor(
      () => s.gw.watcher.rearms('broken') === 3 && !s.gw.platforms().find((p) => p.name === 'broken')!.hanging,
      10_000,
      '3 re-arms',
    );
    await sleep(1000); // more than the whole backoff: no fourth re-arm
    expect(brokenLoads).toBe(4); // the first load and 3 re-arms
    expect(s.gw.platforms().find((p) => p.name === 'broken')!.state).toBe('adapter_unavailable');

    await signedRequest(s.events, JSON.stringify(dmEvent('slack still works', { channel: 'D0000053' })));
    telegram.pushMessage({ fromId: ALLOWED_USER, text: 'telegram still works' });
    await waitFor(() => s.slack.posted.some((p) => p.channel === 'D0000053'), 15_000, 'slack reply');
    await waitFor(() => telegram.sent.length >= 1, 15_000, 'telegram reply');

    const ready = await readJson(fetch(`${s.gw.httpAddress.url}/health/ready`, { headers: homeKeyAuth(s.env.home) }));
    expect(ready.platforms).toMatchObject({
      telegram: { state: 'ready' },
      slack: { state: 'ready', mode: 'http' },
      broken: { state: 'adapter_unavailable', rearms: 3, loads: 4 },
    });
    const metrics = await (await fetch(`${s.gw.httpAddress.url}/metrics`, { headers: homeKeyAuth(s.env.home) })).text();
    expect(metrics).toContain('hermes_platform_state{platform="slack",state="ready"} 1');
    expect(metrics).toContain('hermes_platform_state{platform="telegram",state="ready"} 1');
    expect(metrics).toContain('hermes_platform_state{platform="broken",state="adapter_unavailable"} 1');
  });
});
