/**
 * Which addresses the `http_get` tool may connect to, once the URL's host is
 * on `tools.http.allow` (the host rule is in worker/tools/http-tool.ts).
 *
 * Rule (checked at connect time on every address the name resolves to, the
 * connection going to the checked address: worker/runtime/guarded-lookup.ts):
 *   - an allow entry that is itself an IP address (`127.0.0.1`,
 *     `169.254.169.254`) is the operator naming that exact address: a URL on
 *     it connects with no address check;
 *   - an allowed host name may resolve to public and private addresses:
 *     ipaddr.js `unicast`, `private` (RFC 1918), `uniqueLocal` (fc00::/7) and
 *     `carrierGradeNat` (100.64/10). Operators legitimately watch an internal
 *     CI host by name;
 *   - everything else is refused for a name: loopback, link-local (169.254/16
 *     and fe80::/10, where cloud metadata lives), unspecified, multicast,
 *     broadcast, reserved, and the IPv6 forms that embed an IPv4 address
 *     (IPv4-compatible, NAT64, 6to4, Teredo). So a listed name that resolves,
 *     or is re-pointed by DNS rebinding, to 127.0.0.1 or 169.254.169.254 is
 *     not fetched;
 *   - the one name exception: `localhost` listed explicitly may resolve to
 *     loopback (it is loopback by definition, RFC 6761); link-local and the
 *     rest stay refused for it.
 *
 * Pure: no I/O. Address classes are ipaddr.js's, narrowed as in
 * scheduler/delivery/webhook-policy.ts (`addressRange`).
 */
import ipaddr from 'ipaddr.js';
import { addressRange } from '../../scheduler/delivery/webhook-policy.ts';

/** Ranges an allowed host name may resolve to. */
const NAME_MAY_RESOLVE_TO: ReadonlySet<string> = new Set(['unicast', 'private', 'uniqueLocal', 'carrierGradeNat']);

/**
 * Whether `http_get` may connect to `address`, resolved for the allowed name `host`.
 * @param address - a resolved IP address
 * @param host - the URL's host name (lower case), already on `tools.http.allow`
 * @returns undefined when allowed, else the address class (e.g. `loopback`, `linkLocal`)
 */
export function httpGetRefusedReason(address: string, host: string): string | undefined {
  if (!ipaddr.isValid(address)) return 'not an IP address';
  const range = addressRange(ipaddr.process(address));
  if (NAME_MAY_RESOLVE_TO.has(range)) return undefined;
  if (range === 'loopback' && host.toLowerCase().replace(/\.$/, '') === 'localhost') return undefined;
  return range;
}
