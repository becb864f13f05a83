/**
 * What Telegram receives for a forum's General topic and for a long reply
 * (field reports F26, F28): the General topic (thread 1) is addressed without a
 * thread id, which is the only way the Bot API accepts; the parts of a long
 * reply concatenated are the reply, character for character.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import type { Api } from 'grammy';
import { pino } from 'pino';
import { beforeEach, describe, expect, it } from 'vitest';
import { GENERAL_TOPIC_ID, threadParams } from '../gateway/telegram/forum-topic.ts';
import { renderMarkdown, splitFormatted } from '../gateway/telegram/render-markdown.ts';
import { splitMessage, TELEGRAM_MESSAGE_LIMIT } from '../gateway/telegram/split-message.ts';
import { TypingIndicator } from '../gateway/telegram/typing.ts';
import { runCronCli } from './support/cron-cli.ts';
import { openCronService, startCronWorker } from './support/cron-worker.ts';
import type { TestEnv } from './support/env.ts';
import type { FakeTelegram } from './support/fake-telegram.ts';
import { useTelegramHarness } from './support/telegram-harness.ts';
import { telegramEnv } from './support/telegram-env.ts';
import { waitFor } from './support/wait-for.ts';

const harness = useTelegramHarness();
const { cleanups, gateway } = harness;
let fake: FakeTelegram;
beforeEach(() => {
  fake = harness.fake;
});

function setup(): TestEnv {
  const env = telegramEnv(fake, { 'cron.min_interval_seconds': 1, 'gateway.outbound_order_recheck_ms': 200 });
  cleanups.push(() => env.cleanup());
  return env;
}

/** A gateway, a cron worker and the cron CLI on `env`. */
async function stack(env: TestEnv) {
  await gateway(env);
  const worker = await startCronWorker(env.config);
  cleanups.push(() => worker.close());
  const api = openCronService(env.config);
  cleanups.push(() => api.close());
  const cli = (...args: string[]) => runCronCli(env.config, args);
  /** Run job `name` now and wait until every delivery has an outcome. */
  const runAndSettle = async (name: string) => {
    const job = await api.service.get(name);
    expect((await cli('run', name)).code).toBe(0);
    return waitFor(
      async () => {
        const [r] = await api.store.runs(job.id, 1);
        return r && r.deliveries.every((d) => d.status === 'sent' || d.status === 'failed') ? r : null;
      },
      20_000,
      `the deliveries of ${name}`,
    );
  };
  return { cli, runAndSettle };
}

/** A reply of `length` characters: lines of words of varied lengths (so cuts fall on line breaks). */
function longReply(length: number): string {
  const lines: string[] = [];
  let n = 0;
  let size = 0;
  while (size < length) {
    const line = `line ${n} ${'word '.repeat(n % 17)}${'x'.repeat((n * 7) % 40)}`;
    lines.push(line);
    size += line.length + 1;
    n++;
  }
  return lines.join('\n').slice(0, length).trimEnd();
}

describe("F26: a forum's General topic (thread 1)", () => {
  it('deliver to telegram:-1001234567890:1 → sendMessage without message_thread_id, sent; :42 → message_thread_id 42', async () => {
    const env = setup();
    const { cli, runAndSettle } = await stack(env);
    expect(
      (
        await cli(
          'add',
          'every 1h',
          '--script',
          'echo topic report',
          '--name',
          'topics',
          '--deliver',
          'telegram:-1001234567890:1,telegram:-1001234567890:42',
        )
      ).code,
    ).toBe(0);
    const run = await runAndSettle('topics');
    expect(run.deliveries.map((d) => [d.target, d.status])).toEqual([
      ['telegram:-1001234567890:1', 'sent'],
      ['telegram:-1001234567890:42', 'sent'],
    ]);
    expect(fake.refusedSends.size).toBe(0);
    const general = fake.sent.find((m) => m.message_thread_id === undefined);
    expect(general).toMatchObject({ chat_id: '-1001234567890', text: 'topic report' });
    expect(general).not.toHaveProperty('message_thread_id');
    expect(fake.sent.filter((m) => m.message_thread_id === 42).map((m) => [m.chat_id, m.text])).toEqual([
      ['-1001234567890', 'topic report'],
    ]);
    expect(fake.sent).toHaveLength(2);
  });

  it('every call that names a topic leaves thread 1 out: send parameters and the typing indicator', async () => {
    expect(GENERAL_TOPIC_ID).toBe('1');
    expect(threadParams('1')).toEqual({});
    expect(threadParams(undefined)).toEqual({});
    expect(threadParams('42')).toEqual({ message_thread_id: 42 });
    const actions: Array<[string, Record<string, unknown>]> = [];
    const api = {
      sendChatAction: async (chat: string, _a: string, other: Record<string, unknown>) => (actions.push([chat, other]), true),
    } as unknown as Api;
    const typing = new TypingIndicator(api, { refreshMs: 60_000, maxMs: 60_000, log: pino({ level: 'silent' }) });
    typing.start('-100555', '1');
    typing.start('-100555', '9');
    typing.stop('-100555', '1');
    typing.stop('-100555', '9');
    expect(actions).toEqual([
      ['-100555', {}],
      ['-100555', { message_thread_id: 9 }],
    ]);
  });
});

describe('F28: a long reply split into parts loses nothing at the cut', () => {
  it('a 7,500-character reply with line breaks → 2 messages, each ≤ 4096, whose texts concatenated equal the reply', async () => {
    const env = setup();
    const reply = longReply(7500);
    expect(reply.length).toBeGreaterThan(7450);
    expect(reply).toContain('\n');
    const file = join(env.home, 'reply.txt');
    writeFileSync(file, reply);
    const { cli, runAndSettle } = await stack(env);
    expect((await cli('add', 'every 1h', '--script', `cat ${file}`, '--name', 'long', '--deliver', 'telegram:777')).code).toBe(0);
    const run = await runAndSettle('long');
    expect(run.deliveries).toEqual([expect.objectContaining({ target: 'telegram:777', status: 'sent' })]);
    const texts = fake.sent.filter((m) => m.chat_id === '777').map((m) => m.text);
    expect(texts).toHaveLength(2);
    for (const t of texts) expect(t.length).toBeLessThanOrEqual(4096);
    expect(texts.join('')).toBe(reply);
    expect(texts[0]!.endsWith('\n')).toBe(true); // cut at a line break, which stays with the first part
  });

  it('any text: every part ≤ the limit, and the parts concatenated are the text (plain and rendered Markdown)', () => {
    const piece = fc.oneof(
      fc.constantFrom('\n', ' ', '\n\n', '😀', '**bold** ', '`code` ', '- item\n'),
      fc.string({ minLength: 1, maxLength: 120 }),
    );
    fc.assert(
      fc.property(fc.array(piece, { minLength: 1, maxLength: 400 }), fc.integer({ min: 40, max: 600 }), (pieces, limit) => {
        // A part that would be whitespace only is not sent (Telegram refuses it): such a part needs a run of
        // whitespace of half the limit, or whitespace at the very end. Every other text comes out exactly.
        const text = pieces.join('').trimEnd();
        if (/\s{20,}/.test(text) || text.length === 0) return;
        const parts = splitMessage(text, limit);
        expect(parts.join('')).toBe(text);
        for (const p of parts) expect(p.length).toBeLessThanOrEqual(limit);
        const rendered = renderMarkdown(text);
        if (/\s{20,}|\s$/.test(rendered.text)) return;
        const formatted = splitFormatted(rendered, limit);
        expect(formatted.map((p) => p.text).join('')).toBe(rendered.text);
        for (const p of formatted) {
          expect(p.text.length).toBeLessThanOrEqual(limit);
          for (const e of p.entities) expect(e.offset + e.length).toBeLessThanOrEqual(p.text.length);
        }
      }),
      { numRuns: 300 },
    );
    expect(TELEGRAM_MESSAGE_LIMIT).toBe(4096);
  });
});
