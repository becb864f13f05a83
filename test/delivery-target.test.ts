/**
 * Delivery targets (scheduler/delivery/delivery-target.ts): the one parser and
 * formatter of `local`, `origin`, `telegram:<chat>[:<thread>]` and webhook URLs.
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
import { telegramSessionId } from '../gateway/telegram/inbound.ts';

describe('delivery target parse and format', () => {
  it.each<[string, DeliveryTarget]>([
    ['local', { kind: 'local' }],
    ['origin', { kind: 'origin' }],
    ['telegram:123456789', { kind: 'telegram', chatId: '123456789' }],
    ['telegram:-42', { kind: 'telegram', chatId: '-42' }],
    ['telegram:-1001234567890', { kind: 'telegram', chatId: '-1001234567890' }],
    ['telegram:-1001234567890:17', { kind: 'telegram', chatId: '-1001234567890', threadId: '17' }],
    ['telegram:@hermes_news', { kind: 'telegram', chatId: '@hermes_news' }],
    ['telegram:@hermes_news:3', { kind: 'telegram', chatId: '@hermes_news', threadId: '3' }],
    ['https://hooks.example.test/cron?key=a:b', { kind: 'webhook', url: 'https://hooks.example.test/cron?key=a:b' }],
    ['HTTP://example.test:8080/x', { kind: 'webhook', url: 'HTTP://example.test:8080/x' }],
  ])('%s round-trips', (text, target) => {
    expect(parseDeliveryTarget(text)).toEqual(target);
    expect(formatDeliveryTarget(target)).toBe(text);
    expect(parseDeliveryTarget(formatDeliveryTarget(target))).toEqual(target);
  });

  it('ignores surrounding blanks', () => {
    expect(parseDeliveryTarget('  telegram:-1001234567890:5 ')).toEqual({ kind: 'telegram', chatId: '-1001234567890', threadId: '5' });
  });

  it.each([
    ['telegram:', /Invalid delivery target "telegram:"/],
    ['telegram:abc', /Invalid delivery target "telegram:abc"/],
    ['telegram:--100', /Invalid delivery target "telegram:--100"/],
    ['telegram:-100123:', /Invalid delivery target "telegram:-100123:"/],
    ['telegram:-100123:topic', /Invalid delivery target "telegram:-100123:topic"/],
    ['telegram:-100123:1:2', /Invalid delivery target "telegram:-100123:1:2"/],
    ['telegram:@abc', /Invalid delivery target "telegram:@abc"/],
    ['slack:c123', /Invalid delivery target "slack:c123"/],
    ['slack:C0123ABCD:', /Invalid delivery target "slack:C0123ABCD:"/],
    ['slack:C0123ABCD:thread', /Invalid delivery target "slack:C0123ABCD:thread"/],
    ['discard:C123', /Unknown delivery target "discard:C123"/],
    ['ftp://example.test', /Unknown delivery target "ftp:\/\/example.test"/],
    ['', /Unknown delivery target ""/],
  ])('refuses %j with a ScheduleInputError naming the field and the value', (text, message) => {
    let caught: unknown;
    try {
      parseDeliveryTarget(text, 'deliver');
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ScheduleInputError);
    expect((caught as ScheduleInputError).field).toBe('deliver');
    expect((caught as Error).message).toMatch(message);
  });

  it('names the field it is given', () => {
    expect(() => parseDeliveryTarget('pigeon', 'notify_to')).toThrow(expect.objectContaining({ field: 'notify_to' }));
  });
});

describe('routes and targets', () => {
  it('a Telegram route and its target convert both ways, with and without a topic', () => {
    const routes = [
      { platform: 'telegram', chatId: '-1001234567890', threadId: '17' },
      { platform: 'telegram', chatId: '987' },
    ];
    for (const route of routes) {
      const target = targetOfRoute(route)!;
      expect(target.kind).toBe('telegram');
      expect(routeOfTarget(target)).toEqual(route);
    }
    expect(formatDeliveryTarget(targetOfRoute(routes[0]!)!)).toBe('telegram:-1001234567890:17');
  });

  it('a route of a platform without a target form has no target', () => {
    expect(targetOfRoute({ platform: 'irc', chatId: '#ops' })).toBeUndefined();
  });

  it('slack:<channel>[:<thread_ts>] parses, formats back, and is a Slack route', () => {
    expect(parseDeliveryTarget('slack:C0123ABCD')).toEqual({ kind: 'slack', chatId: 'C0123ABCD' });
    const threaded = parseDeliveryTarget(' slack:D0123ABCD:1712345678.123456 ');
    expect(threaded).toEqual({ kind: 'slack', chatId: 'D0123ABCD', threadId: '1712345678.123456' });
    expect(formatDeliveryTarget(threaded)).toBe('slack:D0123ABCD:1712345678.123456');
    const route = { platform: 'slack', chatId: 'C0123ABCD', threadId: '1712345678.123456' };
    expect(routeOfTarget(targetOfRoute(route)!)).toEqual(route);
    expect(formatDeliveryTarget(targetOfRoute(route)!)).toBe('slack:C0123ABCD:1712345678.123456');
  });
});

describe('every surface uses the one parser', () => {
  it('cron --deliver: a comma list in canonical form, de-duplicated', () => {
    expect(parseDeliver(' telegram:-1001234567890:17 , local,telegram:-1001234567890:17')).toEqual(['telegram:-1001234567890:17', 'local']);
    expect(parseDeliver('slack:C0123ABCD:1712345678.123456,local')).toEqual(['slack:C0123ABCD:1712345678.123456', 'local']);
  });

  it('loop --deliver: a Telegram target becomes the origin route; local is no route; others are refused', () => {
    expect(originFromDeliver('telegram:-1001234567890:17')).toEqual({
      surface: 'cli',
      route: { platform: 'telegram', chatId: '-1001234567890', threadId: '17' },
    });
    expect(originFromDeliver('local')).toEqual({ surface: 'cli' });
    expect(() => originFromDeliver('origin')).toThrow(/Invalid --deliver "origin"/);
    expect(() => originFromDeliver('https://example.test/hook')).toThrow(ScheduleInputError);
  });

  it("a Telegram session id is spelled like the chat's target", () => {
    expect(telegramSessionId('-1001234567890', '17')).toBe('telegram:-1001234567890:17');
    expect(parseDeliveryTarget(telegramSessionId('-1001234567890'))).toEqual({ kind: 'telegram', chatId: '-1001234567890' });
  });
});
