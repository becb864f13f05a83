/**
 * A Telegram bot that feels like one: at start it deletes a leftover webhook
 * and registers its command menu; a photo or voice message gets "text only for
 * now" instead of silence; a stored message shows "typing…" until the reply
 * to that chat is sent. Real grammY against the local Bot API server.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { startGateway } from '../gateway/gateway-process.ts';
import { BOT_COMMANDS } from '../gateway/telegram/bot-setup.ts';
import { renderMarkdown, splitFormatted } from '../gateway/telegram/render-markdown.ts';
import { REFUSAL_TEXT, TEXT_ONLY_TEXT } from '../gateway/telegram/inbound.ts';
import { createLogger } from '../scheduler/logger.ts';
import { enqueueTelegramOutbound, outboundJobId, telegramOutboundQueue } from '../scheduler/delivery/outbound.ts';
import type { FakeTelegram } from './support/fake-telegram.ts';
import { useTelegramHarness } from './support/telegram-harness.ts';
import { ALLOWED_USER, readInbox, telegramEnv } from './support/telegram-env.ts';
import { clients, waitFor } from './support/stack.ts';

const harness = useTelegramHarness();
const { cleanups } = harness;
let fake: FakeTelegram;
beforeEach(() => {
  fake = harness.fake;
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
    const typing = () =>
      fake.calls.filter((c) => c.method === 'sendChatAction' && c.body.chat_id === String(ALLOWED_USER) && c.body.action === 'typing')
        .length;
    await waitFor(() => (typing() >= 3 ? true : undefined), 10_000, 'typing refreshed');

    const c = clients(env);
    cleanups.push(() => c.close());
    const queue = telegramOutboundQueue(c.keys, c.redis);
    cleanups.push(() => queue.close());
    await enqueueTelegramOutbound(queue, {
      platform: 'telegram',
      chatId: String(ALLOWED_USER),
      text: 'sunny',
      sessionId: seen.seen[0]!.sessionId,
      occurrenceId: 'answer-1',
    });
    await waitFor(() => (fake.sent.some((m) => m.text === 'sunny') ? true : undefined), 15_000, 'the reply sent');
    // The indicator ends when the gateway has Telegram's answer (the job completes right after); an
    // indicator already on its way may still land, so count only after those have settled.
    await waitFor(
      async () => ((await queue.getJob(outboundJobId('answer-1')))?.finishedOn ? true : undefined),
      15_000,
      'the reply job done',
    );
    await new Promise((r) => setTimeout(r, 1000));
    const after = typing();
    // Ten more refresh periods: no further indicator (a negative: it can only be observed over time).
    await new Promise((r) => setTimeout(r, 1000));
    expect(typing()).toBe(after);
  });
});

describe('Markdown replies', () => {
  it('render as Telegram entities with the text otherwise as written; plain replies are sent unchanged', () => {
    const r = renderMarkdown(
      '# Deploy\n\nThe **api** is _live_, see `curl -s x` and [the log](https://ci.example/1) ~~soon~~.\n\n- one **two**\n- three\n\n```sh\nmake test\n```\nend\n',
    );
    expect(r.text).toBe('Deploy\n\nThe api is live, see curl -s x and the log soon.\n\n- one two\n- three\n\nmake test\nend\n');
    const spans = r.entities.map((e) => [e.type, r.text.slice(e.offset, e.offset + e.length)]);
    expect(spans).toEqual([
      ['bold', 'Deploy'],
      ['bold', 'api'],
      ['italic', 'live'],
      ['code', 'curl -s x'],
      ['text_link', 'the log'],
      ['strikethrough', 'soon'],
      ['bold', 'two'],
      ['pre', 'make test'],
    ]);
    expect(r.entities.find((e) => e.type === 'text_link')).toMatchObject({ url: 'https://ci.example/1' });
    expect(r.entities.find((e) => e.type === 'pre')).toMatchObject({ language: 'sh' });
    for (const plain of [
      'Usage: /loop [every] [interval] <prompt> [--times N]\n  /loop 10m check',
      'cron 0 9 * * 1-5, loops.max_ticks and a_b_c',
      `${'word '.repeat(199)}end\n`.repeat(3),
    ]) {
      expect(renderMarkdown(plain)).toEqual({ text: plain, entities: [] });
    }
  });

  it('split at 4096 with every entity whole in its part (one spanning the cut is closed and reopened)', () => {
    const r = renderMarkdown(`intro **${'x '.repeat(3000)}y** and \`code\``);
    const parts = splitFormatted(r);
    expect(parts.map((p) => p.text.length)).toEqual([4096, r.text.length - 4096]);
    expect(parts.map((p) => p.text).join('')).toBe(r.text);
    for (const p of parts) for (const e of p.entities) expect(e.offset + e.length).toBeLessThanOrEqual(p.text.length);
    expect(parts[0]!.entities).toEqual([{ type: 'bold', offset: 6, length: 4090 }]);
    expect(parts[1]!.entities.map((e) => e.type)).toEqual(['bold', 'code']);
    expect(parts[1]!.entities[0]).toMatchObject({ offset: 0 });
  });

  it('are sent with entities; when Telegram refuses the formatting the same text goes out plain', async () => {
    const { env } = await start();
    const c = clients(env);
    cleanups.push(() => c.close());
    const queue = telegramOutboundQueue(c.keys, c.redis);
    cleanups.push(() => queue.close());
    await enqueueTelegramOutbound(queue, {
      platform: 'telegram',
      chatId: '51',
      text: 'Build is **green**',
      sessionId: 's',
      occurrenceId: 'md-1',
    });
    await waitFor(() => (fake.sent.length === 1 ? true : undefined), 15_000, 'the formatted reply');
    expect(fake.sent[0]).toMatchObject({ text: 'Build is green', entities: [{ type: 'bold', offset: 9, length: 5 }] });

    fake.refuseEntitiesNext(1);
    await enqueueTelegramOutbound(queue, {
      platform: 'telegram',
      chatId: '52',
      text: 'Build is **red**',
      sessionId: 's',
      occurrenceId: 'md-2',
    });
    await waitFor(() => (fake.sent.length === 2 ? true : undefined), 15_000, 'the plain fallback');
    expect(fake.sent[1]!.text).toBe('Build is red');
    expect(fake.sent[1]!.entities).toBeUndefined();
  });
});
