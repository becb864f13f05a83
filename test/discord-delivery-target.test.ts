/**
 * Discord delivery targets (scheduler/delivery/delivery-target.ts): `discord:<channel>[:<thread>]`
 * through the one parser, on every surface that takes a target, and the pure parts of the
 * Discord relay (mentions, application command text, parts at 2,000 characters), and the
 * Discord line of the `hermes up` banner.
 */
import { describe, expect, it } from 'vitest';
import {
  formatDeliveryTarget,
  parseDeliveryTarget,
  routeOfTarget,
  targetOfRoute,
  type DeliveryTarget,
} from '../scheduler/delivery/delivery-target.ts';
import { ScheduleInputError } from '../scheduler/errors/schedule-input-error.ts';
import { parseDeliver } from '../scheduler/cron/cron-job.ts';
import { originFromDeliver } from '../cli/commands/loop.ts';
import { shellOnlyReply } from '../scheduler/session/chat-command.ts';
import { discordSessionId, textForBot } from '../gateway/discord/inbound.ts';
import { commandText } from '../gateway/discord/application-commands.ts';
import { targetOfChannel } from '../gateway/discord/channel-route.ts';
import { DISCORD_MESSAGE_LIMIT } from '../gateway/discord/discord-send.ts';
import { splitMessage } from '../gateway/telegram/split-message.ts';
import { upBanner } from '../cli/up-banner.ts';
import { loadConfig } from '../scheduler/config/config.ts';

describe('discord:<channel>[:<thread>]', () => {
  it.each<[string, DeliveryTarget]>([
    ['discord:1234567890123456789', { kind: 'discord', chatId: '1234567890123456789' }],
    [
      'discord:1234567890123456789:1234567890123456790',
      { kind: 'discord', chatId: '1234567890123456789', threadId: '1234567890123456790' },
    ],
  ])('%s round-trips', (text, target) => {
    expect(parseDeliveryTarget(text)).toEqual(target);
    expect(formatDeliveryTarget(target)).toBe(text);
  });

  it.each(['discord:', 'discord:abc', 'discord:123:', 'discord:1:2:3', 'discord:-5', 'discord:123456789012345678901'])(
    'refuses %j naming the field',
    (text) => {
      expect(() => parseDeliveryTarget(text, 'deliver')).toThrow(ScheduleInputError);
      expect(() => parseDeliveryTarget(text, 'deliver')).toThrow(/use discord:<channel id>\[:<thread id>\]/);
    },
  );

  it('a Discord route and its target convert both ways; the session id is spelled like the target', () => {
    const route = { platform: 'discord', chatId: '111', threadId: '222' };
    const target = targetOfRoute(route)!;
    expect(target).toEqual({ kind: 'discord', chatId: '111', threadId: '222' });
    expect(routeOfTarget(target)).toEqual(route);
    expect(discordSessionId({ kind: 'discord', chatId: '111', threadId: '222' })).toBe('discord:111:222');
  });

  it('cron --deliver and loop --deliver accept it; a shell-only flag names it in its answer', () => {
    expect(parseDeliver('discord:111:222, local,discord:111:222')).toEqual(['discord:111:222', 'local']);
    expect(originFromDeliver('discord:111')).toEqual({ surface: 'cli', route: { platform: 'discord', chatId: '111' } });
    expect(shellOnlyReply('loop', '--run', 'discord:111')).toContain('--deliver discord:111');
  });
});

describe('Discord inbound text', () => {
  it('a guild message is for the bot only when it mentions it; the mention is removed', () => {
    const bot = '1000000000000000001';
    expect(textForBot({ content: 'hello all', guild_id: '9', mentions: [] }, bot)).toBeUndefined();
    expect(textForBot({ content: `<@${bot}> /loop 10m check`, guild_id: '9', mentions: [] }, bot)).toBe('/loop 10m check');
    expect(textForBot({ content: `hey <@!${bot}> there`, guild_id: '9', mentions: [] }, bot)).toBe('hey   there');
    expect(textForBot({ content: '/status', mentions: [] }, bot)).toBe('/status');
  });

  it('an application command becomes the text a user would type', () => {
    const data = (name: string, options: Array<{ name: string; type: number; value: string }> = []) =>
      ({ data: { id: '1', name, type: 1, options } }) as never;
    expect(commandText(data('loop', [{ name: 'args', type: 3, value: ' 10m check the build ' }]))).toBe('/loop 10m check the build');
    expect(commandText(data('status'))).toBe('/status');
    expect(commandText(data('rm'))).toBeUndefined();
  });

  it('a thread channel is routed to its parent and itself', () => {
    expect(targetOfChannel({ id: '2', type: 11, parent_id: '1' })).toEqual({ kind: 'discord', chatId: '1', threadId: '2' });
    expect(targetOfChannel({ id: '2', type: 0 })).toEqual({ kind: 'discord', chatId: '2' });
  });

  it('a 4,500-character reply of 100-character lines is 3 parts cut after a line', () => {
    const text = `${'y'.repeat(99)}\n`.repeat(45);
    const parts = splitMessage(text, DISCORD_MESSAGE_LIMIT);
    expect(parts.map((p) => p.length)).toEqual([2000, 2000, 500]);
    expect(parts.join('')).toBe(text);
  });
});

describe('the hermes up banner', () => {
  const config = (env: Record<string, string>) => loadConfig({ env: { HERMES_HOME: '/home/ada/.hermes', ...env } });
  const facts = { redis: 'r', apiUrl: 'http://127.0.0.1:8642', auth: { mode: 'key', source: 'config' } } as const;

  it('names Discord only when a bot token is set, with its state (and why it failed) and its allow-list', () => {
    expect(upBanner(config({}), facts).some((l) => l.includes('Discord'))).toBe(false);
    expect(upBanner(config({ DISCORD_BOT_TOKEN: 'x' }), facts)).toContain(
      '  Discord   starting, but nobody may use it: DISCORD_ALLOWED_USERS is empty',
    );
    expect(upBanner(config({ DISCORD_BOT_TOKEN: 'x' }), { ...facts, platforms: { discord: { state: 'ready' } } })).toContain(
      '  Discord   on, but nobody may use it: DISCORD_ALLOWED_USERS is empty',
    );
    const lastError = "Could not connect to Discord's API at http://127.0.0.1:9/api (DISCORD_API_URL): connection refused (ECONNREFUSED).";
    expect(
      upBanner(config({ DISCORD_BOT_TOKEN: 'x', DISCORD_ALLOWED_USERS: '1,2' }), {
        ...facts,
        platforms: { discord: { state: 'adapter_unavailable', lastError } },
      }),
    ).toContain(`  Discord   failed (${lastError}) · 2 allowed users (DISCORD_ALLOWED_USERS)`);
  });
});
