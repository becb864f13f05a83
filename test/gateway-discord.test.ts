/**
 * Discord relay of the gateway (docs/GATEWAY.md "Discord") with the real
 * `@discordjs/ws` and `@discordjs/rest` clients against a local Discord
 * (gateway WebSocket and REST, test/support/fake-discord.ts), real Redis and
 * BullMQ, and — where a turn runs — an in-process worker and the local model
 * server.
 *
 * Each test has its own local Discord, Redis prefix, gateway and (where a
 * turn runs) worker, so most run side by side: they spend their time waiting
 * for the gateway's connection, a turn or a Retry-After. The two that count
 * reconnects exactly run alone, last.
 */
import { Redis } from 'ioredis';
import type { Queue } from 'bullmq';
import { describe } from 'vitest';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { REFUSAL_TEXT } from '../gateway/discord/inbound.ts';
import { createLogger } from '../scheduler/logger.ts';
import { Keys } from '../scheduler/store/keys.ts';
import { enqueueOutbound, outboundQueue as openOutboundQueue, type OutboundData } from '../scheduler/delivery/outbound.ts';
import { WorkerProcess } from '../worker/worker-process.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import { DISCORD_ALLOWED_USER, DISCORD_BOT_ID, DISCORD_BOT_TOKEN, startFakeDiscord } from './support/fake-discord.ts';
import { readInbox, type InboxReader } from './support/telegram-env.ts';
import { openCronService } from './support/cron-worker.ts';
import { sleep, waitFor } from './support/wait-for.ts';
import { it, type CleanUp } from './support/cleanup.ts';

/** This test's own local Discord, and helpers that start the rest of its stack against it; all stopped when the test ends. */
async function discordStack(cleanups: CleanUp[]) {
  const fake = await startFakeDiscord();
  cleanups.push(() => fake.close());

  function setup(overrides: Record<string, unknown> = {}): TestEnv {
    const env = testEnv({
      'api_server.port': 0,
      'discord.bot_token': DISCORD_BOT_TOKEN,
      'discord.allowed_users': DISCORD_ALLOWED_USER,
      'discord.api_url': fake.apiRoot,
      'gateway.poll_lease_ttl_seconds': 1,
      'gateway.watcher_interval_seconds': 0.05,
      'gateway.reconnect_backoff_seconds': '0.1,0.2,0.4',
      ...overrides,
    });
    cleanups.push(() => env.cleanup());
    return env;
  }

  async function gateway(env: TestEnv): Promise<Gateway> {
    const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }) });
    cleanups.push(() => gw.close());
    return gw;
  }

  async function worker(env: TestEnv): Promise<WorkerProcess> {
    const w = await WorkerProcess.start({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }) });
    cleanups.push(() => w.drain());
    return w;
  }

  async function model(reply: string): Promise<FakeOpenAI> {
    const m = await startFakeOpenAI();
    m.respond(() => reply);
    cleanups.push(() => m.close());
    return m;
  }

  async function inbox(env: TestEnv): Promise<InboxReader> {
    const r = await readInbox(env);
    cleanups.push(() => r.close());
    return r;
  }

  function outboundQueue(env: TestEnv): Queue<OutboundData> {
    const connection = new Redis(env.redisUrl, { maxRetriesPerRequest: null });
    const q = openOutboundQueue('discord', new Keys(env.prefix), connection);
    cleanups.push(async () => {
      await q.close();
      connection.disconnect();
    });
    return q;
  }

  return { fake, setup, gateway, worker, model, inbox, outboundQueue };
}

const dmChannel = `4${DISCORD_ALLOWED_USER.slice(1)}`;

describe.concurrent('Discord inbound', () => {
  it("a DM becomes one turn of the channel's session and the model's reply is posted to that channel", async ({ cleanups, expect }) => {
    const { fake, setup, gateway, worker, model } = await discordStack(cleanups);
    const m = await model('hello from the agent');
    const env = setup({ 'agent.base_url': m.baseUrl, 'agent.api_key': 'k' });
    await worker(env);
    await gateway(env);
    await waitFor(() => fake.live(), 10_000, 'gateway session ready');
    fake.message({ authorId: DISCORD_ALLOWED_USER, content: 'what is new?' });
    await waitFor(() => fake.posted.length >= 1, 20_000, 'reply posted');
    expect(fake.posted[0]).toMatchObject({ channel_id: dmChannel, content: 'hello from the agent' });
    expect(fake.posted[0]!.body.allowed_mentions).toEqual({ parse: [] });
    expect(m.requests).toHaveLength(1);
    expect(JSON.stringify(m.requests[0]!.body.messages)).toContain('what is new?');
    // registered at start: the five application commands
    expect(fake.commands.map((c) => c.name).sort()).toEqual(['goal', 'heartbeat', 'loop', 'status', 'stop']);
  });

  it('an event Redis refuses to store is not confirmed: the connection resumes and Discord replays it and what followed', async ({
    cleanups,
    expect,
  }) => {
    const { fake, setup, gateway, inbox } = await discordStack(cleanups);
    const env = setup();
    const reader = await inbox(env);
    await gateway(env);
    await waitFor(() => fake.live(), 10_000, 'gateway session ready');
    // The session's pending-input set holds a string: Redis answers WRONGTYPE to the store.
    const sessionId = `discord:${dmChannel}`;
    const pending = new Keys(env.prefix).forSession(sessionId).pendingInput(sessionId);
    const redis = new Redis(env.redisUrl);
    cleanups.push(() => redis.quit());
    await redis.set(pending, 'not a sorted set');
    fake.message({ authorId: DISCORD_ALLOWED_USER, content: 'refused first' });
    fake.message({ authorId: DISCORD_ALLOWED_USER, content: 'after it' });
    await waitFor(() => fake.counts.resumes >= 1, 10_000, 'resumed after the refused store');
    expect(reader.seen).toEqual([]);
    await redis.del(pending);
    await waitFor(() => reader.seen.length >= 2, 15_000, 'both stored after the replay');
    await sleep(300);
    expect(reader.seen.map((d) => d.text)).toEqual(['refused first', 'after it']);
    expect(fake.counts.identifies).toBe(1);
  });

  it('guild messages reach the agent only when they mention the bot; a thread is its own session', async ({ cleanups, expect }) => {
    const { fake, setup, gateway, inbox } = await discordStack(cleanups);
    const env = setup();
    const reader = await inbox(env);
    await gateway(env);
    await waitFor(() => fake.live(), 10_000, 'gateway session ready');
    fake.channel('5000000000000000002', 11, '5000000000000000001');
    fake.message({
      authorId: DISCORD_ALLOWED_USER,
      guildId: '3000000000000000001',
      channelId: '5000000000000000001',
      content: 'chatter between people',
    });
    fake.message({
      authorId: DISCORD_ALLOWED_USER,
      guildId: '3000000000000000001',
      channelId: '5000000000000000002',
      content: `<@${DISCORD_BOT_ID}> /status`,
      mentionsBot: true,
    });
    await waitFor(() => reader.seen.length >= 1, 10_000, 'mention stored');
    await sleep(300);
    expect(reader.seen).toHaveLength(1);
    expect(reader.seen[0]).toMatchObject({
      text: '/status',
      sessionId: 'discord:5000000000000000001:5000000000000000002',
      origin: { route: { platform: 'discord', chatId: '5000000000000000001', threadId: '5000000000000000002' } },
    });
  });

  it('a user outside DISCORD_ALLOWED_USERS never reaches a worker and gets one refusal per channel', async ({ cleanups, expect }) => {
    const { fake, setup, gateway, inbox } = await discordStack(cleanups);
    const env = setup();
    const reader = await inbox(env);
    await gateway(env);
    await waitFor(() => fake.live(), 10_000, 'gateway session ready');
    const stranger = '2999999999999999999';
    fake.message({ authorId: stranger, content: 'let me in' });
    fake.message({ authorId: stranger, content: 'please' });
    fake.command({ userId: stranger, name: 'loop', options: { args: '1m hack' } });
    fake.message({ authorId: DISCORD_ALLOWED_USER, content: 'hello' });
    await waitFor(() => reader.seen.length >= 1, 10_000, 'allowed message');
    await waitFor(() => fake.posted.length >= 1, 10_000, 'refusal');
    await sleep(500);
    expect(reader.seen.map((d) => d.text)).toEqual(['hello']);
    expect(fake.posted.map((p) => [p.channel_id, p.content])).toEqual([[`4${stranger.slice(1)}`, REFUSAL_TEXT]]);
    expect(fake.callbacks).toEqual([]);
  });
});

describe.concurrent('Discord application commands', () => {
  it('/loop as an application command sets a loop in the channel whose ticks post there', async ({ cleanups, expect }) => {
    const { fake, setup, gateway, worker, model } = await discordStack(cleanups);
    const m = await model('all green');
    const env = setup({ 'agent.base_url': m.baseUrl, 'agent.api_key': 'k' });
    const w = await worker(env);
    await gateway(env);
    await waitFor(() => fake.live(), 10_000, 'gateway session ready');
    const id = fake.command({ userId: DISCORD_ALLOWED_USER, name: 'loop', options: { args: '2s check the build' } });
    await waitFor(() => fake.posted.length >= 3, 30_000, 'confirmation and two ticks');
    expect(fake.callbacks[0]).toMatchObject({ interactionId: id, body: { type: 4, data: { content: '/loop 2s check the build' } } });
    expect(fake.posted.every((p) => p.channel_id === dmChannel)).toBe(true);
    expect(fake.posted[0]!.content).toMatch(/Loop set: every 2s/);
    expect(fake.posted.slice(1, 3).map((p) => p.content)).toEqual(['all green', 'all green']);
    const record = await w.deps.loops.get(`discord:${dmChannel}`, 'loop');
    expect(record).toMatchObject({
      status: 'active',
      intervalSeconds: 2,
      runner: { kind: 'agent' },
      origin: { surface: 'discord', route: { platform: 'discord', chatId: dmChannel } },
    });
    fake.command({ userId: DISCORD_ALLOWED_USER, name: 'stop' });
    await waitFor(async () => (await w.deps.loops.get(`discord:${dmChannel}`, 'loop'))?.status !== 'active', 10_000, 'loop stopped');
  });

  it('/loop typed in a DM sets the loop too; its first tick posts to the DM', async ({ cleanups, expect }) => {
    const { fake, setup, gateway, worker, model } = await discordStack(cleanups);
    const m = await model('deploy done');
    const env = setup({ 'agent.base_url': m.baseUrl, 'agent.api_key': 'k' });
    const w = await worker(env);
    await gateway(env);
    await waitFor(() => fake.live(), 10_000, 'gateway session ready');
    fake.message({ authorId: DISCORD_ALLOWED_USER, content: '/loop 1m check the deploy' });
    await waitFor(() => fake.posted.length >= 2, 20_000, 'confirmation and first tick');
    expect(fake.posted[0]!.content).toMatch(/Loop set: every 1m/);
    expect(fake.posted[1]).toMatchObject({ channel_id: dmChannel, content: 'deploy done' });
    expect(await w.deps.loops.get(`discord:${dmChannel}`, 'loop')).toMatchObject({ status: 'active', origin: { surface: 'discord' } });
    expect(fake.callbacks).toEqual([]);
  });

  it('a loop with a shell-only flag from Discord creates no command turn', async ({ cleanups, expect }) => {
    const { fake, setup, gateway, worker } = await discordStack(cleanups);
    const env = setup();
    const w = await worker(env);
    await gateway(env);
    await waitFor(() => fake.live(), 10_000, 'gateway session ready');
    fake.command({ userId: DISCORD_ALLOWED_USER, name: 'loop', options: { args: "1m disk --run 'rm -rf /'" } });
    await waitFor(() => fake.posted.length >= 1, 20_000, 'answer');
    expect(fake.posted[0]!.content).toMatch(/--run works only in the shell/);
    expect(await w.deps.loops.get(`discord:${dmChannel}`, 'loop')).toBeNull();
  });
});

describe.concurrent('Discord outbound', () => {
  it('a 4,500-character reply is posted as 3 parts cut at line boundaries, in order, before the next reply, in its thread', async ({
    cleanups,
    expect,
  }) => {
    const { fake, setup, gateway, outboundQueue } = await discordStack(cleanups);
    const env = setup();
    await gateway(env);
    const q = outboundQueue(env);
    const line = `${'x'.repeat(98)}.\n`;
    const text = Array.from({ length: 45 }, (_, i) => line.replace('xx', String(i).padStart(2, '0'))).join('');
    expect(text).toHaveLength(4500);
    await enqueueOutbound(q, {
      platform: 'discord',
      chatId: '5000000000000000001',
      threadId: '5000000000000000002',
      text,
      sessionId: 's1',
      occurrenceId: 'o1',
    });
    await enqueueOutbound(q, {
      platform: 'discord',
      chatId: '5000000000000000001',
      threadId: '5000000000000000002',
      text: 'next',
      sessionId: 's1',
      occurrenceId: 'o2',
    });
    await waitFor(() => fake.posted.length >= 4, 15_000, '4 posts');
    expect(fake.posted.map((p) => p.content.length)).toEqual([2000, 2000, 500, 4]);
    expect(
      fake.posted
        .slice(0, 3)
        .map((p) => p.content)
        .join(''),
    ).toBe(text);
    expect(fake.posted.every((p) => p.content === 'next' || p.content.endsWith('.\n'))).toBe(true);
    expect(fake.posted.every((p) => p.channel_id === '5000000000000000002')).toBe(true);
  });

  it('a 429 is waited out for its Retry-After, then the reply is posted once', async ({ cleanups, expect }) => {
    const { fake, setup, gateway, outboundQueue } = await discordStack(cleanups);
    const env = setup();
    await gateway(env);
    const q = outboundQueue(env);
    fake.rateLimitNext(1, 1);
    await enqueueOutbound(q, { platform: 'discord', chatId: dmChannel, text: 'after the limit', sessionId: 's1', occurrenceId: 'o1' });
    await waitFor(() => fake.posted.length >= 1, 15_000, 'posted');
    await sleep(300);
    expect(fake.limitedAt).toHaveLength(1);
    expect(fake.posted).toHaveLength(1);
    expect(fake.posted[0]!.at - fake.limitedAt[0]!).toBeGreaterThanOrEqual(1000);
  });
});

describe.concurrent('Discord delivery targets', () => {
  it('a cron job with --deliver discord:<channel>:<thread> posts its reply in that thread and records the message ids', async ({
    cleanups,
    expect,
  }) => {
    const { fake, setup, gateway, worker, model } = await discordStack(cleanups);
    const m = await model('nightly report');
    const env = setup({ 'agent.base_url': m.baseUrl, 'agent.api_key': 'k', 'cron.min_interval_seconds': 1 });
    await worker(env);
    await gateway(env);
    const cron = openCronService(env.config);
    cleanups.push(() => cron.close());
    const target = 'discord:5000000000000000001:5000000000000000002';
    const job = await cron.service.add(
      { schedule: 'in 1s', prompt: 'report', deliver: target },
      { origin: { surface: 'cli' }, trusted: true },
    );
    expect(job.deliver).toEqual([target]);
    await waitFor(() => fake.posted.length >= 1, 20_000, 'cron reply posted');
    expect(fake.posted[0]).toMatchObject({ channel_id: '5000000000000000002', content: 'nightly report' });
    const delivery = await waitFor(
      async () => {
        const [run] = await cron.store.runs(job.id, 10);
        const d = run?.deliveries.find((x) => x.target === target);
        return d?.status === 'sent' ? d : undefined;
      },
      10_000,
      'delivery reported',
    );
    expect(delivery.message_ids).toEqual([fake.posted[0]!.id]);
  });
});

describe.concurrent('Discord token', () => {
  it('a token Discord refuses leaves Discord adapter_unavailable, opens no gateway connection, and the token is not in its status', async ({
    cleanups,
    expect,
  }) => {
    const { fake, setup, gateway } = await discordStack(cleanups);
    const env = setup({ 'discord.bot_token': 'MTAwMDAwMDAwMDAwMDAwMDAx.revoked-secret-part', 'gateway.max_plugin_load_rearms': 1 });
    const gw = await gateway(env);
    const discord = () => gw.platforms().find((p) => p.name === 'discord')!;
    await waitFor(
      () => discord().state === 'adapter_unavailable' && gw.watcher.rearms('discord') === 1 && !discord().hanging,
      10_000,
      'refused and re-armed once',
    );
    expect(discord().lastError).toBe(
      `Discord refused the bot token (DISCORD_BOT_TOKEN): ${fake.apiRoot} (DISCORD_API_URL) answered 401: Unauthorized.`,
    );
    expect(fake.counts.connections).toBe(0);
    expect(JSON.stringify(gw.platforms())).not.toContain('revoked-secret-part');
  });
});

// The 1 s connection lease is renewed every third of it. These two count connections and RESUMEs
// exactly, so they run alone: a renewal held up by other tests' gateways and workers on this event loop
// would lose the lease and add a reconnect.
describe('Discord session resume and connection lease', () => {
  it('a dropped connection resumes its session: events sent meanwhile are replayed and each is stored once', async ({
    cleanups,
    expect,
  }) => {
    const { fake, setup, gateway, inbox } = await discordStack(cleanups);
    const env = setup();
    const reader = await inbox(env);
    await gateway(env);
    await waitFor(() => fake.live(), 10_000, 'gateway session ready');
    const first = fake.message({ authorId: DISCORD_ALLOWED_USER, content: 'one' });
    await waitFor(() => reader.seen.length >= 1, 10_000, 'first message stored');

    fake.drop();
    fake.message({ authorId: DISCORD_ALLOWED_USER, content: 'two' });
    fake.message({ authorId: DISCORD_ALLOWED_USER, content: '/loop 1m check the build' });
    await waitFor(() => reader.seen.length >= 3, 15_000, 'messages sent while dropped');
    expect(fake.counts.resumes).toBe(1);
    expect(fake.counts.identifies).toBe(1);
    // an event delivered again (already stored) is not relayed twice
    fake.redispatch(first);
    fake.message({ authorId: DISCORD_ALLOWED_USER, content: 'four' });
    await waitFor(() => reader.seen.length >= 4, 10_000, 'fourth message');
    await sleep(300);
    expect(reader.seen.map((d) => d.text)).toEqual(['one', 'two', '/loop 1m check the build', 'four']);
    expect(await reader.count()).toBe(4);
    expect(reader.seen[0]).toMatchObject({
      type: 'user-input',
      sessionId: `discord:${dmChannel}`,
      messageId: `dc-${first}`,
      origin: { surface: 'discord', route: { platform: 'discord', chatId: dmChannel } },
    });
  });

  it('two gateways with one bot token keep one connection; the standby resumes the session when the first stops', async ({
    cleanups,
    expect,
  }) => {
    const { fake, setup, gateway, inbox } = await discordStack(cleanups);
    const env = setup();
    const reader = await inbox(env);
    const first = await gateway(env);
    await waitFor(() => fake.live(), 10_000, 'first gateway connected');
    const second = await gateway(env);
    const discord = (gw: Gateway) => gw.platforms().find((p) => p.name === 'discord')!;
    await waitFor(() => discord(second).state === 'ready', 10_000, 'second gateway ready');
    // three lease lifetimes: a standby that ignored the lease would have connected by now
    await sleep(3000);
    expect(fake.counts.connections).toBe(1);
    expect(fake.openConnections()).toBe(1);
    expect(discord(first).adapter).toMatchObject({ connected: true });
    expect(discord(second).adapter).toMatchObject({ connected: false });

    fake.message({ authorId: DISCORD_ALLOWED_USER, content: 'before' });
    await waitFor(() => reader.seen.length >= 1, 10_000, 'stored by the first');
    await first.close();
    fake.message({ authorId: DISCORD_ALLOWED_USER, content: 'during the handover' });
    await waitFor(() => reader.seen.length >= 2, 15_000, 'stored by the second');
    expect(discord(second).adapter).toMatchObject({ connected: true });
    expect(fake.counts).toMatchObject({ identifies: 1, resumes: 1 });
    expect(fake.openConnections()).toBe(1);
    expect(reader.seen.map((d) => d.text)).toEqual(['before', 'during the handover']);
  });
});
