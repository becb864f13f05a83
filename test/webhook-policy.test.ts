/**
 * The webhook SSRF rule (scheduler/delivery/webhook-policy.ts) at its near misses: a host that ends like
 * an allowed one, a CIDR range's first address outside it, a local-name suffix inside a public name,
 * IPv6 outside 2000::/3. The send-time check over every DNS answer: webhook-delivery.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { ScheduleInputError } from '../scheduler/errors/schedule-input-error.ts';
import {
  assertWebhookTarget,
  hostAllowListed,
  isIpLiteral,
  parseWebhookAllow,
  refusedAddressReason,
} from '../scheduler/delivery/webhook-policy.ts';

const none = parseWebhookAllow([]);

describe('delivery.webhook_allow', () => {
  it('a name matches exactly, case-insensitive, with or without the final dot; not a suffix or a prefix of it', () => {
    const allow = parseWebhookAllow([' Hooks.Example.com. ', '', '10.0.0.7', '::1']);
    expect([...allow.hosts]).toEqual(['hooks.example.com', '10.0.0.7', '::1']);
    expect(hostAllowListed('hooks.example.com', allow)).toBe(true);
    expect(hostAllowListed('HOOKS.example.COM.', allow)).toBe(true);
    expect(hostAllowListed('evilhooks.example.com', allow)).toBe(false);
    expect(hostAllowListed('hooks.example.com.evil.net', allow)).toBe(false);
    expect(hostAllowListed('example.com', allow)).toBe(false);
    // An address as the URL spells it: bracketed IPv6, IPv4-mapped IPv6 of an allowed IPv4.
    expect(hostAllowListed('[::1]', allow)).toBe(true);
    expect(hostAllowListed('[::ffff:10.0.0.7]', allow)).toBe(true);
    expect(hostAllowListed('10.0.0.8', allow)).toBe(false);
  });

  it('refuses what is no host, address or CIDR range, naming the entry', () => {
    expect(() => parseWebhookAllow(['10.0.0.0/33'])).toThrow(ScheduleInputError);
    expect(() => parseWebhookAllow(['10.0.0.0/33'])).toThrow('"10.0.0.0/33" is not a valid CIDR range');
    expect(() => parseWebhookAllow(['bad host'])).toThrow('"bad host" is not a host name, IP address or CIDR range');
    expect(() => parseWebhookAllow(['-lead.example.com'])).toThrow(ScheduleInputError);
    expect(() => parseWebhookAllow(['a..b'])).toThrow(ScheduleInputError);
    expect([...parseWebhookAllow(['a_b.example.com', 'x']).hosts]).toEqual(['a_b.example.com', 'x']);
  });

  it('a CIDR range allows its addresses, from the first to the last, and not the next ones; an IPv4-mapped range is the IPv4 one', () => {
    const allow = parseWebhookAllow(['10.1.0.0/16', '::ffff:192.168.4.0/120', 'fd00:1::/32']);
    expect(refusedAddressReason('10.1.0.0', allow)).toBeUndefined();
    expect(refusedAddressReason('10.1.255.255', allow)).toBeUndefined();
    expect(refusedAddressReason('10.2.0.0', allow)).toBe('private');
    expect(refusedAddressReason('10.0.255.255', allow)).toBe('private');
    expect(refusedAddressReason('192.168.4.9', allow)).toBeUndefined();
    expect(refusedAddressReason('192.168.5.9', allow)).toBe('private');
    expect(refusedAddressReason('fd00:1::9', allow)).toBeUndefined();
    expect(refusedAddressReason('fd00:2::9', allow)).toBe('uniqueLocal');
  });
});

describe('refusedAddressReason', () => {
  it('public unicast passes; loopback, private, link-local metadata are refused by name; not an address is said so', () => {
    expect(refusedAddressReason('8.8.8.8', none)).toBeUndefined();
    expect(refusedAddressReason('2a00:1450::1', none)).toBeUndefined();
    expect(refusedAddressReason('127.0.0.1', none)).toBe('loopback');
    expect(refusedAddressReason('::1', none)).toBe('loopback');
    expect(refusedAddressReason('::ffff:127.0.0.1', none)).toBe('loopback');
    expect(refusedAddressReason('10.0.0.1', none)).toBe('private');
    expect(refusedAddressReason('169.254.169.254', none)).toBe('linkLocal');
    expect(refusedAddressReason('example.com', none)).toBe('not an IP address');
  });

  it('IPv6 that ipaddr.js calls unicast but lies outside 2000::/3: IPv4-compatible or reserved', () => {
    expect(refusedAddressReason('::127.0.0.1', none)).toBe('loopback');
    expect(refusedAddressReason('::a01:203', none)).toBe('ipv4Compatible'); // ::10.1.2.3 in hex
    expect(refusedAddressReason('4000::1', none)).toBe('reserved');
    expect(refusedAddressReason('3fff:ffff::1', none)).toBeUndefined();
    expect(refusedAddressReason('1fff:ffff::1', none)).toBe('reserved');
  });
});

describe('assertWebhookTarget (creation, no DNS)', () => {
  const refused = (target: string, allow = none) => {
    try {
      assertWebhookTarget(target, allow);
      return undefined;
    } catch (err) {
      expect(err).toBeInstanceOf(ScheduleInputError);
      return (err as Error).message;
    }
  };

  it('only http and https URLs', () => {
    expect(refused('ftp://example.com/')).toBe('Invalid webhook URL "ftp://example.com/": only http and https.');
    expect(refused('not a url')).toBe('Invalid webhook URL "not a url".');
    expect(refused('http://example.com/hook')).toBeUndefined();
    expect(refused('https://example.com/hook')).toBeUndefined();
  });

  it('an IP literal is checked by its range; one the operator listed passes', () => {
    expect(refused('http://127.0.0.1:6379/')).toBe(
      'Webhook target http://127.0.0.1:6379 is a loopback address: internal addresses are refused; an operator can open a host with delivery.webhook_allow.',
    );
    expect(refused('http://[::1]/')).toContain('is a loopback address');
    expect(refused('http://8.8.8.8/')).toBeUndefined();
    expect(refused('http://127.0.0.1:6379/', parseWebhookAllow(['127.0.0.1']))).toBeUndefined();
    expect(refused('http://10.1.2.3/', parseWebhookAllow(['10.1.0.0/16']))).toBeUndefined();
  });

  it('a name local by its form is refused; a public name that merely contains one of those words is not', () => {
    for (const host of [
      'localhost',
      'localhost.',
      'api.localhost',
      'printer.local',
      'svc.internal',
      'box.localdomain',
      'nas.home.arpa',
      'intranet',
    ]) {
      expect(refused(`http://${host}/`), host).toContain('names a local host');
    }
    for (const host of ['mylocalhost.com', 'example.local.com', 'internal.example.com', 'notlocal.net', 'home.arpa.example.org']) {
      expect(refused(`http://${host}/`), host).toBeUndefined();
    }
    expect(refused('http://intranet/', parseWebhookAllow(['intranet']))).toBeUndefined();
  });

  it('isIpLiteral: addresses as URLs spell them, not names', () => {
    expect(isIpLiteral('10.0.0.1')).toBe(true);
    expect(isIpLiteral('[::1]')).toBe(true);
    expect(isIpLiteral('example.com')).toBe(false);
  });
});
