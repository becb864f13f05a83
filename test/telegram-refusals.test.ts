/**
 * Refusals to Telegram users outside the allow-list (gateway/outbound/refusals.ts):
 * at most one per user and chat per `telegram.refusal_interval_seconds`, kept
 * in Redis (so across gateway restarts), and never ahead of allowed users'
 * replies. Before: 40 spam messages queued 40 refusals ahead of the owner's
 * reply in a group (≈ 3 s each at Telegram's group rate).
 *
 * A stand-in worker answers every inbox message like a real one would
 * (an outbound reply to the message's chat), so the owner's reply travels
 * the same outbound queue as the refusals.
 */
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { beforeEach, describe, expect, it } from 'vitest';
import { REFUSAL_TEXT } from '../gateway/telegram/inbound.ts';
import { botIdOf } from '../gateway/telegram/telegram-adapter.ts';
import { enqueueTelegramOutbound, telegramOutboundQueue, type TelegramOutboundData } from '../scheduler/delivery/outbound.ts';
import type { InboxJobData } from '../scheduler/session/inbox.ts';
import { Keys, QUEUES } from '../scheduler/store/keys.ts';
import type { TestEnv } from './support/env.ts';
import type { FakeTelegram } from './support/fake-telegram.ts';
import { useTelegramHarness } from './support/telegram-harness.ts';
import { waitFor } from './support/wait-for.ts';
import { ALLOWED_USER, BOT_TOKEN, memoryLogger, telegramEnv } from './support/telegram-env.ts';

const harness = useTelegramHarness();
const { cleanups, gateway } = harness;
let fake: FakeTelegram;
beforeEach(() => {
  fake = harness.fake;
});

const GROUP = -1001777;
const SPAMMER = 666;

function setup(): TestEnv {
  const env = telegramEnv(fake);
  cleanups.push(() => env.cleanup());
  return env;
}

/** Answers every inbox message with `reply to <text>` in its chat, like a worker's turn would. */
async function standInWorker(env: TestEnv): Promise<{ outbound: Queue<TelegramOutboundData>; redis: Redis }> {
  const redis = new Redis(env.redisUrl, { maxRetriesPerRequest: null });
  const outbound = telegramOutboundQueue(new Keys(env.prefix), redis);
  const worker = new Worker<InboxJobData>(
    QUEUES.inbox,
    async (job) => {
      const chatId = String((job.data.origin as { route?: { chatId?: string } }).route?.chatId);
      await enqueueTelegramOutbound(outbound, {
        platform: 'telegram',
        chatId,
        text: `reply to ${job.data.text}`,
        sessionId: job.data.sessionId,
        occurrenceId: `reply:${job.data.messageId}`,
      });
    },
    { connection: redis, prefix: env.prefix, concurrency: 1 },
  );
  await worker.waitUntilReady();
  cleanups.push(async () => {
    await worker.close();
    await outbound.close();
    redis.disconnect();
  });
  return { outbound, redis };
}

/** Outbound jobs not yet finished. */
const unfinished = (q: Queue) => q.getJobCountByTypes('waiting', 'prioritized', 'active', 'delayed');

describe('refusals to users outside the allow-list (M7)', () => {
  it("40 spam messages then one from the owner in a group: one refusal, and the owner's reply is not behind 40 refusals; a restart does not refuse again", async () => {
    const env = setup();
    const { outbound, redis } = await standInWorker(env);
    const { log, lines } = memoryLogger();
    const first = await gateway(env, log);
    for (let i = 0; i < 40; i++) fake.pushMessage({ fromId: SPAMMER, chatId: GROUP, text: `spam ${i}` });
    const ownerUpdate = fake.pushMessage({ fromId: ALLOWED_USER, chatId: GROUP, text: 'deploy status?' });

    await waitFor(() => fake.sent.some((m) => m.text === 'reply to deploy status?'), 20_000, "the owner's reply");
    const toGroup = fake.sent.filter((m) => m.chat_id === String(GROUP));
    const ownerAt = toGroup.findIndex((m) => m.text === 'reply to deploy status?');
    console.log(`sends to the group before the owner's reply: ${ownerAt}`);
    expect(ownerAt).toBeLessThanOrEqual(1);
    await waitFor(() => fake.confirmedOffset > ownerUpdate, 10_000, 'every update confirmed');
    await waitFor(async () => (await unfinished(outbound)) === 0, 10_000, 'the outbound queue empty');
    expect(fake.sent.filter((m) => m.text === REFUSAL_TEXT)).toEqual([expect.objectContaining({ chat_id: String(GROUP) })]);
    // One warning (the refusal sent), the other 39 at debug; never the text.
    expect(lines.filter((l) => l.level === 40 && String(l.msg).includes('not in TELEGRAM_ALLOWED_USERS'))).toHaveLength(1);
    expect(lines.filter((l) => String(l.msg).includes('not answered again'))).toHaveLength(39);
    expect(JSON.stringify(lines)).not.toContain('spam 1');

    // The mark lives in Redis for the interval, so a restarted gateway refuses no more.
    const mark = new Keys(env.prefix).refusalMark('telegram', botIdOf(BOT_TOKEN), String(GROUP), String(SPAMMER));
    const ttl = await redis.ttl(mark);
    expect(ttl).toBeGreaterThan(3500);
    expect(ttl).toBeLessThanOrEqual(3600);
    await first.close();
    await gateway(env, log);
    const last = fake.pushMessage({ fromId: SPAMMER, chatId: GROUP, text: 'spam again' });
    await waitFor(() => fake.confirmedOffset > last, 10_000, 'the new spam confirmed');
    // The same user in another chat (its private chat with the bot) is refused there once.
    fake.pushMessage({ fromId: SPAMMER, text: 'hello?' });
    fake.pushMessage({ fromId: SPAMMER, text: 'hello??' });
    await waitFor(() => fake.sent.some((m) => m.chat_id === String(SPAMMER)), 10_000, 'the refusal in the private chat');
    await waitFor(async () => (await unfinished(outbound)) === 0, 10_000, 'the outbound queue empty');
    expect(fake.sent.filter((m) => m.text === REFUSAL_TEXT).map((m) => m.chat_id)).toEqual([String(GROUP), String(SPAMMER)]);
  }, 60_000);

  it('a refusal is dropped while the chat has replies queued, and sent once the chat is idle', async () => {
    const env = setup();
    const { outbound } = await standInWorker(env);
    // The owner's reply takes a while to send: the chat has work queued meanwhile.
    let release: (() => void) | undefined;
    const held = new Promise<void>((r) => (release = r));
    fake.beforeSend = async (payload) => {
      if (String(payload.text).startsWith('reply to')) await held;
    };
    await gateway(env);
    fake.pushMessage({ fromId: ALLOWED_USER, chatId: GROUP, text: 'slow one' });
    await waitFor(() => fake.sendCalls >= 1, 10_000, "the owner's reply being sent");
    const spam = fake.pushMessage({ fromId: SPAMMER, chatId: GROUP, text: 'me too' });
    await waitFor(() => fake.confirmedOffset > spam, 10_000, 'the spam stored');
    release!();
    await waitFor(async () => (await unfinished(outbound)) === 0, 10_000, 'the outbound queue empty');
    expect(fake.sent.map((m) => m.text)).toEqual(['reply to slow one']);

    const again = fake.pushMessage({ fromId: SPAMMER, chatId: GROUP, text: 'hello?' });
    await waitFor(() => fake.sent.some((m) => m.text === REFUSAL_TEXT), 10_000, 'the refusal once the chat is idle');
    await waitFor(() => fake.confirmedOffset > again, 10_000, 'confirmed');
    expect(fake.sent.map((m) => m.text)).toEqual(['reply to slow one', REFUSAL_TEXT]);
  }, 60_000);
});
