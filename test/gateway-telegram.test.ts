/**
 * Telegram relay of the gateway (docs/DESIGN.md §8; field reports F7, F8) with the real
 * grammY client against a local server speaking the Bot API, real Redis and
 * BullMQ. Crash cases run the gateway that dies as a child process and SIGKILL
 * it; the gateway that comes after it runs in-process.
 *
 * Each test has its own local Telegram server, Redis prefix and gateways, so the
 * inbound and outbound tests run side by side: they spend their time waiting for a
 * gateway to start, a poll or a retry. The poll-lease test (last in the file) runs
 * alone, after them: its 2 s lease must be renewed in time.
 */
import { QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { describe } from 'vitest';
import { REFUSAL_TEXT } from '../gateway/telegram/inbound.ts';
import { botIdOf } from '../gateway/telegram/telegram-adapter.ts';
import { Keys, QUEUES } from '../scheduler/store/keys.ts';
import { enqueueTelegramOutbound, outboundJobId, type TelegramOutboundData } from '../scheduler/delivery/outbound.ts';
import { spawnGateway, type ChildGateway } from './support/child-gateway.ts';
import type { CleanUp } from './support/cleanup.ts';
import { childGateway as child, gateway, it, outboundQueue } from './support/telegram-harness.ts';
import { PRODUCT_LOCK, type TestEnv } from './support/env.ts';
import type { FakeTelegram } from './support/fake-telegram.ts';
import { waitFor } from './support/http.ts';
import { ALLOWED_USER, BOT_TOKEN, memoryLogger, readInbox, telegramEnv, type InboxReader } from './support/telegram-env.ts';

function setup(cleanups: CleanUp[], fake: FakeTelegram, overrides: Record<string, unknown> = {}): TestEnv {
  const env = telegramEnv(fake, overrides);
  cleanups.push(() => env.cleanup());
  return env;
}

async function inbox(cleanups: CleanUp[], env: TestEnv): Promise<InboxReader> {
  const r = await readInbox(env);
  cleanups.push(() => r.close());
  return r;
}

describe.concurrent('inbound (docs/DESIGN.md §8)', () => {
  it('F7: 5 messages sent while the gateway is down reach the agent after it starts, once each, in order', async ({
    cleanups,
    fake,
    expect,
  }) => {
    const env = setup(cleanups, fake);
    const texts = ['one', 'two', '/loop 1m check the build', 'four', 'five'];
    const ids = texts.map((text) => fake.pushMessage({ fromId: ALLOWED_USER, text }));
    const reader = await inbox(cleanups, env);
    const gw = await gateway(cleanups, env);
    await waitFor(() => reader.seen.length >= 5, 10_000, '5 inbox jobs');
    expect(reader.seen.map((d) => d.text)).toEqual(texts);
    expect(reader.seen.map((d) => d.messageId)).toEqual(ids.map((id) => `tg-${id}`));
    expect(reader.seen[0]).toMatchObject({
      type: 'user-input',
      sessionId: `telegram:${ALLOWED_USER}`,
      origin: { surface: 'telegram', route: { platform: 'telegram', chatId: String(ALLOWED_USER) } },
    });
    // confirmed to Telegram only after storage: the next poll carried the offset past the batch
    await waitFor(() => fake.confirmedOffset === ids.at(-1)! + 1, 5000, 'offset confirmed');
    await gw.close();

    // a restarted gateway relays nothing twice
    const again = await gateway(cleanups, env);
    await waitFor(() => again.platforms()[0]?.adapter?.polling === true, 5000, 'second gateway polling');
    await new Promise((r) => setTimeout(r, 300));
    expect(await reader.count()).toBe(5);
    expect(reader.seen).toHaveLength(5);
  });

  it('relays slash commands verbatim, strips @botname, drops commands for other bots (F16), and keys forum topics as their own session', async ({
    cleanups,
    fake,
    expect,
  }) => {
    const env = setup(cleanups, fake);
    const reader = await inbox(cleanups, env);
    await gateway(cleanups, env);
    fake.pushMessage({ fromId: ALLOWED_USER, text: '/loop 1m check the deploy --times 3' });
    fake.pushMessage({ fromId: ALLOWED_USER, chatId: -1001234, threadId: 7, text: '/status@hermes_test_bot' });
    fake.pushMessage({ fromId: ALLOWED_USER, text: '/goal@other_bot ship it' });
    fake.pushMessage({ fromId: ALLOWED_USER, text: 'after it' });
    await waitFor(() => reader.seen.length >= 3, 10_000, '3 inbox jobs');
    expect(reader.seen[0]).toMatchObject({ text: '/loop 1m check the deploy --times 3', sessionId: `telegram:${ALLOWED_USER}` });
    expect(reader.seen[1]).toMatchObject({
      text: '/status',
      sessionId: 'telegram:-1001234:7',
      origin: { route: { platform: 'telegram', chatId: '-1001234', threadId: '7' } },
    });
    expect(reader.seen[2]!.text).toBe('after it');
    expect(reader.seen).toHaveLength(3);
  });

  it('a non-allow-listed user never reaches a worker, gets one short refusal, and the text is not logged', async ({
    cleanups,
    fake,
    expect,
  }) => {
    const env = setup(cleanups, fake);
    const reader = await inbox(cleanups, env);
    const { log, lines } = memoryLogger();
    await gateway(cleanups, env, log);
    const secret = 'my bank password is hunter2';
    const stranger = 999;
    const updateId = fake.pushMessage({ fromId: stranger, text: secret });
    await waitFor(() => fake.sent.some((m) => m.chat_id === String(stranger)), 10_000, 'refusal sent');
    fake.pushMessage({ fromId: ALLOWED_USER, text: 'hello' });
    await waitFor(() => reader.seen.length >= 1, 10_000, 'allowed message');
    await waitFor(() => fake.confirmedOffset > updateId, 5000, 'offset past the refused update');
    expect(reader.seen.map((d) => d.text)).toEqual(['hello']);
    expect(await reader.count()).toBe(1);
    expect(fake.sent.filter((m) => m.chat_id === String(stranger))).toEqual([expect.objectContaining({ text: REFUSAL_TEXT })]);
    const refusal = lines.find((l) => String(l.msg).includes('not in TELEGRAM_ALLOWED_USERS'));
    expect(refusal).toMatchObject({ level: 40, userId: stranger, updateId });
    const all = JSON.stringify(lines);
    expect(all).not.toContain('hunter2');
    expect(all).not.toContain(BOT_TOKEN.split(':')[1]);
  });

  it('answers a message over agent.max_prompt_chars with the limit instead of relaying it', async ({ cleanups, fake, expect }) => {
    const env = setup(cleanups, fake, { 'agent.max_prompt_chars': 50 });
    const reader = await inbox(cleanups, env);
    await gateway(cleanups, env);
    fake.pushMessage({ fromId: ALLOWED_USER, text: 'x'.repeat(51) });
    await waitFor(() => fake.sent.length === 1, 10_000, 'rejection reply');
    expect(fake.sent[0]!.text).toMatch(/limit is 50/);
    expect(await reader.count()).toBe(0);
  });

  it('a 409 Conflict from another getUpdates on the token is retried with backoff, not a crash', async ({ cleanups, fake, expect }) => {
    const env = setup(cleanups, fake);
    const reader = await inbox(cleanups, env);
    const gw = await gateway(cleanups, env);
    await waitFor(() => fake.polling, 5000, 'gateway long poll');
    // a rogue client on the same token: the fake terminates the gateway's poll with 409, then the gateway's retry terminates the rogue's
    const { Api } = await import('grammy');
    const rogue = new Api(BOT_TOKEN, { apiRoot: fake.apiRoot });
    const rogueResult = rogue.getUpdates({ timeout: 1 }).then(
      () => 'answered',
      (e: { error_code?: number }) => e.error_code,
    );
    await waitFor(() => fake.conflicts >= 1, 5000, 'a 409');
    await rogueResult;
    fake.pushMessage({ fromId: ALLOWED_USER, text: 'after the conflict' });
    await waitFor(() => reader.seen.length === 1, 10_000, 'message after conflict');
    expect(reader.seen[0]!.text).toBe('after the conflict');
    expect(gw.platforms()[0]).toMatchObject({ name: 'telegram', state: 'ready' });
  });

  it('inbound survives a gateway crash between receive and confirm', async ({ cleanups, fake, expect }) => {
    const env = setup(cleanups, fake);
    const texts = Array.from({ length: 30 }, (_, i) => `msg ${i}`);
    const ids = texts.map((text) => fake.pushMessage({ fromId: ALLOWED_USER, text }));
    let victim: ChildGateway | undefined;
    let killed = false;
    let confirmedAtCrash = -1;
    fake.onUpdatesServed = () => {
      // the batch is on its way to the gateway: kill it before it can confirm the offset
      if (victim && !killed) {
        killed = true;
        victim.kill('SIGKILL');
        confirmedAtCrash = fake.confirmedOffset;
      }
    };
    victim = await spawnGateway(env.childEnv);
    cleanups.push(() => victim.kill('SIGKILL'));
    if (!killed) await waitFor(() => killed, 15_000, 'first batch served');
    await victim.exited;
    fake.onUpdatesServed = undefined;
    expect(confirmedAtCrash).toBeLessThanOrEqual(ids[0]!);
    expect(fake.pending).toHaveLength(30);
    // The kill may land before, during or after storage. Dropping the stored offset makes the
    // restarted gateway see every update again, as after a crash before the offset was written:
    // the inbox job ids (tg-<update_id>) must dedupe whatever was stored already.
    const redis = new Redis(env.redisUrl);
    cleanups.push(() => redis.disconnect());
    await redis.del(new Keys(env.prefix).telegramOffset(botIdOf(BOT_TOKEN)));

    const reader = await inbox(cleanups, env);
    await gateway(cleanups, env);
    await waitFor(() => reader.seen.length >= 30, 15_000, '30 inbox jobs');
    await waitFor(() => fake.pending.length === 0, 5000, 'batch confirmed');
    await new Promise((r) => setTimeout(r, 300));
    expect(reader.seen.map((d) => d.text)).toEqual(texts);
    expect(await reader.count()).toBe(30);
    expect(fake.deliveries.get(ids[0]!)).toBe(2);
  });
});

describe.concurrent('outbound (docs/DESIGN.md §8)', () => {
  it('splits a long reply at 4096 characters, records the message ids as evidence, and sends an occurrence once', async ({
    cleanups,
    fake,
    expect,
  }) => {
    const env = setup(cleanups, fake);
    await gateway(cleanups, env);
    const queue = outboundQueue(cleanups, env);
    const events = new QueueEvents(QUEUES.outboundTelegram, { connection: { url: env.redisUrl }, prefix: env.prefix });
    cleanups.push(() => events.close());
    const paragraph = `${'word '.repeat(199)}end\n`;
    const text = paragraph.repeat(9);
    const data: TelegramOutboundData = {
      platform: 'telegram',
      chatId: String(ALLOWED_USER),
      text,
      sessionId: `telegram:${ALLOWED_USER}`,
      occurrenceId: 'loop:abc:1',
    };
    await enqueueTelegramOutbound(queue, data);
    await enqueueTelegramOutbound(queue, data);
    const job = (await queue.getJob(outboundJobId('loop:abc:1')))!;
    const result = (await job.waitUntilFinished(events, 10_000)) as { messageIds: number[] };
    expect(fake.sent.length).toBe(3);
    expect(fake.sent.every((m) => m.text.length <= 4096)).toBe(true);
    expect(fake.sent.map((m) => m.text).join('')).toBe(text);
    expect(result.messageIds).toEqual(fake.sent.map((m) => m.message_id));
    const redis = new Redis(env.redisUrl);
    cleanups.push(() => redis.disconnect());
    expect(await redis.hgetall(new Keys(env.prefix).outboundSent('loop:abc:1'))).toEqual({
      0: String(fake.sent[0]!.message_id),
      1: String(fake.sent[1]!.message_id),
      2: String(fake.sent[2]!.message_id),
      seq: expect.stringMatching(/^\d+$/),
    });
    // queued again after it was sent: still once
    await enqueueTelegramOutbound(queue, data);
    await new Promise((r) => setTimeout(r, 300));
    expect(fake.sent.length).toBe(3);
  });

  it('honours a 429 retry_after and still sends once', async ({ cleanups, fake, expect }) => {
    const env = setup(cleanups, fake);
    await gateway(cleanups, env);
    const queue = outboundQueue(cleanups, env);
    fake.rateLimitNext(1, 1);
    const started = Date.now();
    await enqueueTelegramOutbound(queue, {
      platform: 'telegram',
      chatId: '5',
      threadId: '3',
      text: 'rate limited',
      sessionId: 'telegram:5:3',
      occurrenceId: 'cron:j1:1',
    });
    await waitFor(() => fake.sent.length === 1, 10_000, 'sent after retry_after');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(fake.rateLimited).toBe(1);
    expect(fake.sent).toEqual([expect.objectContaining({ chat_id: '5', message_thread_id: 3, text: 'rate limited' })]);
  });

  it('a reply is sent once across a gateway crash in the middle of a multi-part send', async ({ cleanups, fake, expect }) => {
    const env = setup(cleanups, fake, PRODUCT_LOCK);
    const queue = outboundQueue(cleanups, env);
    let release!: () => void;
    const hold = new Promise<void>((r) => (release = r));
    fake.beforeSend = async (_payload, n) => {
      if (n === 2) await hold; // part 2 of the first attempt never gets an answer
    };
    const first = await child(cleanups, env);
    const text = ['A'.repeat(4000), 'B'.repeat(4000), 'C'.repeat(100)].join('\n');
    await enqueueTelegramOutbound(queue, { platform: 'telegram', chatId: '77', text, sessionId: 'telegram:77', occurrenceId: 'tick:x:1' });
    // part 1 is sent and its message id recorded; part 2 hangs in Telegram: crash now
    const redis = new Redis(env.redisUrl);
    cleanups.push(() => redis.disconnect());
    const evidence = new Keys(env.prefix).outboundSent('tick:x:1');
    await waitFor(async () => /^\d+$/.test((await redis.hget(evidence, '0')) ?? ''), 10_000, 'part 1 recorded');
    expect(fake.sent).toHaveLength(1);
    first.kill('SIGKILL');
    await first.exited;
    fake.beforeSend = undefined;
    await gateway(cleanups, env);
    await waitFor(() => fake.sent.length >= 3, 20_000, 'remaining parts sent');
    await new Promise((r) => setTimeout(r, 300));
    expect(fake.sent.map((m) => m.text[0])).toEqual(['A', 'B', 'C']);
    const recorded = await redis.hgetall(evidence);
    expect([0, 1, 2].map((i) => recorded[String(i)])).toEqual(fake.sent.map((m) => String(m.message_id)));
    // The dead gateway's held request is answered only now, into a closed connection: not a send.
    release();
    await new Promise((r) => setTimeout(r, 100));
    expect(fake.sent).toHaveLength(3);
  });
});

describe.concurrent('splitMessage (Telegram 4096-character limit)', () => {
  it('keeps short texts whole and drops whitespace-only ones', async ({ expect }) => {
    const { splitMessage } = await import('../gateway/telegram/split-message.ts');
    expect(splitMessage('hello')).toEqual(['hello']);
    expect(splitMessage('x'.repeat(4096))).toEqual(['x'.repeat(4096)]);
    expect(splitMessage('  \n ')).toEqual([]);
  });

  it('cuts hard without whitespace and never splits a surrogate pair', async ({ expect }) => {
    const { splitMessage } = await import('../gateway/telegram/split-message.ts');
    const parts = splitMessage('y'.repeat(10_000));
    expect(parts.map((p) => p.length)).toEqual([4096, 4096, 1808]);
    const emoji = `${'z'.repeat(4095)}😀tail`;
    const cut = splitMessage(emoji);
    expect(cut[0]).toBe('z'.repeat(4095));
    expect(cut[1]).toBe('😀tail');
    expect(cut.join('')).toBe(emoji);
  });

  it('prefers a line break, then a space, in the second half of the window, and keeps it at the end of the part', async ({ expect }) => {
    const { splitMessage } = await import('../gateway/telegram/split-message.ts');
    const text = `${'a'.repeat(3000)}\n${'b'.repeat(500)} ${'c'.repeat(2000)}`;
    expect(splitMessage(text)).toEqual([`${'a'.repeat(3000)}\n`, `${'b'.repeat(500)} ${'c'.repeat(2000)}`]);
    const spaced = `${'d'.repeat(3000)} ${'e'.repeat(3000)}`;
    expect(splitMessage(spaced)).toEqual([`${'d'.repeat(3000)} `, 'e'.repeat(3000)]);
    expect(splitMessage(text).join('')).toBe(text);
    // A part that would be whitespace only is not sent (Telegram refuses it).
    expect(splitMessage(`${'f'.repeat(4096)}\n`)).toEqual(['f'.repeat(4096)]);
  });
});

describe('one poller per bot token (F8)', () => {
  it('two gateways with one token: no crash, exactly one polls; kill it and the other takes over', async ({ cleanups, fake, expect }) => {
    const env = setup(cleanups, fake, { 'gateway.poll_lease_ttl_seconds': 2 });
    const reader = await inbox(cleanups, env);
    const redis = new Redis(env.redisUrl);
    cleanups.push(() => redis.disconnect());
    const leaseKey = new Keys(env.prefix).telegramPollLease(botIdOf(BOT_TOKEN));
    // The leader is a process (it is killed below); the second gateway starts once the lease is taken.
    const leader = await child(cleanups, env);
    await waitFor(async () => (await redis.get(leaseKey)) === leader.instanceId, 10_000, 'the first gateway holds the lease');
    const standby = await gateway(cleanups, env);
    expect(standby.instanceId).not.toBe(leader.instanceId);
    await waitFor(() => standby.platforms()[0]?.state === 'ready', 10_000, "the second gateway's Telegram adapter started");

    fake.pushMessage({ fromId: ALLOWED_USER, text: 'to the leader' });
    await waitFor(() => reader.seen.length === 1, 10_000, 'first message');
    // Over a whole lease lifetime (2 s: renewals, standby retries every ttl/3) nobody else polls: no 409, same holder.
    const conflictsBefore = fake.conflicts;
    await new Promise((r) => setTimeout(r, 2500));
    expect(fake.conflicts).toBe(conflictsBefore);
    expect(await redis.get(leaseKey)).toBe(leader.instanceId);
    expect(standby.platforms()[0]?.adapter?.polling).toBe(false);

    leader.kill('SIGKILL');
    await leader.exited;
    fake.pushMessage({ fromId: ALLOWED_USER, text: 'to the standby' });
    await waitFor(() => reader.seen.length === 2, 15_000, 'message after takeover');
    expect(await redis.get(leaseKey)).toBe(standby.instanceId);
    expect(standby.platforms()[0]).toMatchObject({ name: 'telegram', state: 'ready' });
    expect(reader.seen.map((d) => d.text)).toEqual(['to the leader', 'to the standby']);
  });
});
