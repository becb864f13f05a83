/**
 * A Telegram bot that feels like one: at start it deletes a leftover webhook
 * and registers its command menu; a photo or voice message gets "text only for
 * now" instead of silence; a stored message shows "typing…" until the reply
 * to that chat is sent. Real grammY against the local Bot API server.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startGateway } from '../gateway/gateway-process.ts';
import { BOT_COMMANDS } from '../gateway/telegram/bot-setup.ts';
import { REFUSAL_TEXT, TEXT_ONLY_TEXT } from '../gateway/telegram/inbound.ts';
import { createLogger } from '../scheduler/logger.ts';
import { enqueueTelegramOutbound, telegramOutboundQueue } from '../scheduler/outbound.ts';
import { startFakeTelegram, type FakeTelegram } from './support/fake-telegram.ts';
import { ALLOWED_USER, readInbox, telegramEnv } from './support/telegram-env.ts';
import { clients, waitFor } from './support/stack.ts';

let fake: FakeTelegram;
const cleanups: Array<() => Promise<unknown> | unknown> = [];
beforeEach(async () => {
  fake = await startFakeTelegram();
});
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
  await fake.close();
});

async function start(overrides: Record<string, unknown> = {}) {
  const env = telegramEnv(fake, overrides);
  cleanups.push(() => env.cleanup());
  const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }) });
  cleanups.push(() => gw.close());
  await waitFor(() => fake.polling || undefined, 10_000, 'polling');
  return { env, gw };
}

describe('Telegram bot set-up at start', () => {
  it('deletes a leftover webhook (keeping pending updates) and registers the command menu, before polling', async () => {
    await start();
    const methods = fake.calls.map((c) => c.method);
    expect(methods.slice(0, 2)).toEqual(['deleteWebhook', 'setMyCommands']);
    expect(fake.calls[0]!.body).toMatchObject({ drop_pending_updates: false });
    const commands = fake.calls[1]!.body.commands as Array<{ command: string; description: string }>;
    expect(commands.map((c) => c.command)).toEqual(['loop', 'heartbeat', 'goal', 'status', 'stop', 'help']);
    expect(commands).toEqual(BOT_COMMANDS);
  });
});

describe('messages without text', () => {
  it('are answered "text only for now" (allow-listed) or refused (others), and never reach the agent', async () => {
    const { env } = await start();
    const seen = await readInbox(env);
    cleanups.push(() => seen.close());
    fake.pushNonText({ fromId: ALLOWED_USER, content: { photo: [{ file_id: 'p', file_unique_id: 'u', width: 1, height: 1 }] } });
    fake.pushNonText({ fromId: 999, content: { voice: { file_id: 'v', file_unique_id: 'w', duration: 2 } } });
    await waitFor(() => (fake.sent.length === 2 ? true : undefined), 15_000, 'two answers');
    expect(fake.sent.find((m) => m.chat_id === String(ALLOWED_USER))?.text).toBe(TEXT_ONLY_TEXT);
    expect(fake.sent.find((m) => m.chat_id === '999')?.text).toBe(REFUSAL_TEXT);
    expect(await seen.count()).toBe(0);
  });
});

describe('the typing indicator', () => {
  it('shows while a stored message waits for its answer and ends when the reply is sent', async () => {
    const { env } = await start({ 'gateway.typing_refresh_seconds': 0.1 });
    const seen = await readInbox(env);
    cleanups.push(() => seen.close());
    fake.pushMessage({ fromId: ALLOWED_USER, text: 'what is the weather?' });
    await waitFor(() => (seen.seen.length === 1 ? true : undefined), 15_000, 'the message stored');
    const typing = () => fake.calls.filter((c) => c.method === 'sendChatAction' && c.body.chat_id === String(ALLOWED_USER) && c.body.action === 'typing').length;
    await waitFor(() => (typing() >= 3 ? true : undefined), 10_000, 'typing refreshed');

    const c = clients(env);
    cleanups.push(() => c.close());
    const queue = telegramOutboundQueue(c.keys, c.redis);
    cleanups.push(() => queue.close());
    await enqueueTelegramOutbound(queue, { platform: 'telegram', chatId: String(ALLOWED_USER), text: 'sunny', sessionId: seen.seen[0]!.sessionId, occurrenceId: 'answer-1' });
    await waitFor(() => (fake.sent.some((m) => m.text === 'sunny') ? true : undefined), 15_000, 'the reply sent');
    const after = typing();
    // Ten refresh periods later no further indicator was sent (a negative: it can only be observed over time).
    await new Promise((r) => setTimeout(r, 1000));
    expect(typing()).toBe(after);
  });
});
