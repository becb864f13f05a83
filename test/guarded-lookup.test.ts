/**
 * The SSRF guard's lookup (worker/runtime/guarded-lookup.ts) and `http_get`'s address rule
 * (worker/tools/http-tool-policy.ts) on a resolver the test answers: every address is checked, not
 * the first; an empty answer and a resolver error fail; `localhost` is the one name that may be
 * loopback, and only spelled so. Through real connections: tool-sandbox.test.ts.
 */
import type { LookupAddress } from 'node:dns';
import { describe, expect, it } from 'vitest';
import { guardedLookup, RefusedAddressError, type Resolver } from '../worker/runtime/guarded-lookup.ts';
import { httpGetRefusedReason } from '../worker/tools/http-tool-policy.ts';

const answering =
  (result: LookupAddress[] | Error): Resolver =>
  (_host, _options, callback) =>
    result instanceof Error ? callback(result, []) : callback(null, result);

/** What the guarded lookup calls back with, for `all` or one address. */
function lookUp(resolver: Resolver, all: boolean, host = 'api.example.com') {
  const lookup = guardedLookup((a) => httpGetRefusedReason(a, host), resolver);
  return new Promise<{ err: NodeJS.ErrnoException | null; address: unknown; family?: number }>((resolve) =>
    lookup(host, { all }, (err, address, family) => resolve({ err, address, family })),
  );
}

const v4 = (address: string): LookupAddress => ({ address, family: 4 });

describe('guardedLookup', () => {
  it('a public answer passes: the first address with its family, or every address when all are asked for', async () => {
    const answers = [v4('93.184.216.34'), { address: '2606:2800:220:1::1', family: 6 }];
    expect(await lookUp(answering(answers), false)).toEqual({ err: null, address: '93.184.216.34', family: 4 });
    expect(await lookUp(answering(answers), true)).toEqual({ err: null, address: answers, family: undefined });
  });

  it('one internal address among public ones refuses the name, wherever it is in the answer', async () => {
    for (const answers of [
      [v4('93.184.216.34'), v4('127.0.0.1')],
      [v4('127.0.0.1'), v4('93.184.216.34')],
      [v4('93.184.216.34'), v4('169.254.169.254')],
    ]) {
      const { err } = await lookUp(answering(answers), false);
      expect(err).toBeInstanceOf(RefusedAddressError);
      expect(err!.name).toBe('RefusedAddressError');
      expect(err!.message).toMatch(/^api\.example\.com resolves to a (loopback|linkLocal) address \((127\.0\.0\.1|169\.254\.169\.254)\)$/);
    }
  });

  it("an empty answer is ENOTFOUND; the resolver's own error is passed on as it came", async () => {
    const empty = await lookUp(answering([]), false);
    expect(empty.err).toMatchObject({ code: 'ENOTFOUND', message: 'api.example.com has no address' });
    expect(empty.address).toBe('');
    const failure = Object.assign(new Error('getaddrinfo EAI_AGAIN'), { code: 'EAI_AGAIN' });
    const failed = await lookUp(answering(failure), true);
    expect(failed.err).toBe(failure);
    expect(failed.address).toBe('');
  });
});

describe('httpGetRefusedReason', () => {
  it('a listed name may resolve to public, private, unique-local and carrier-grade NAT addresses', () => {
    for (const address of ['93.184.216.34', '10.0.0.5', 'fd00::5', '100.64.0.1'])
      expect(httpGetRefusedReason(address, 'api.example.com')).toBeUndefined();
  });

  it('loopback only for the name localhost (with or without its final dot); not for a name that merely spells it with a dot inside', () => {
    expect(httpGetRefusedReason('127.0.0.1', 'localhost')).toBeUndefined();
    expect(httpGetRefusedReason('::1', 'LOCALHOST.')).toBeUndefined();
    expect(httpGetRefusedReason('127.0.0.1', 'local.host')).toBe('loopback');
    expect(httpGetRefusedReason('127.0.0.1', 'localhost.example.com')).toBe('loopback');
    expect(httpGetRefusedReason('169.254.169.254', 'localhost')).toBe('linkLocal');
    expect(httpGetRefusedReason('not-an-address', 'api.example.com')).toBe('not an IP address');
  });
});
