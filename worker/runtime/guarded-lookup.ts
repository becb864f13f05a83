/**
 * A `lookup` for outgoing sockets that checks every address a name resolves
 * to before the socket connects, and hands the socket the checked address
 * itself. Used by webhook deliveries and the `http_get` tool, each with its
 * own address rule (`scheduler/delivery/webhook-policy.ts`, `worker/tools/http-tool-policy.ts`).
 *
 * Why at connect time: a name checked once and fetched later can be
 * re-pointed by its DNS server between the two (rebinding). Here there is one
 * resolution, checked, and the connection goes to what was checked. If any
 * address of the answer is refused, the whole name is refused (a name that
 * answers "public, 127.0.0.1" does not get a chance at the second one).
 */
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import type { LookupFunction } from 'node:net';

/** Says why an address may not be connected to, or undefined when it may. */
export type AddressCheck = (address: string) => string | undefined;

/** The resolver a guarded lookup asks (node's `dns.lookup` unless a test gives another). */
export type Resolver = (
  hostname: string,
  options: LookupOptions & { all: true },
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/** The error a request fails with when a resolved address is refused. */
export class RefusedAddressError extends Error {
  override readonly name = 'RefusedAddressError';
}

/**
 * A `lookup` option for `http.request`/`net.connect`.
 * @param check - the address rule; its reason goes into the error
 * @param resolve - `dns.lookup` (default)
 * @returns a lookup that fails with {@link RefusedAddressError} naming the host, the reason and the address
 */
export function guardedLookup(check: AddressCheck, resolve: Resolver = dnsLookup): LookupFunction {
  return (
    hostname: string,
    options: LookupOptions,
    callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ) => {
    resolve(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '');
      for (const a of addresses) {
        const reason = check(a.address);
        if (reason) return callback(new RefusedAddressError(`${hostname} resolves to a ${reason} address (${a.address})`), '');
      }
      if (addresses.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '');
      if (options.all) return callback(null, addresses);
      return callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}
