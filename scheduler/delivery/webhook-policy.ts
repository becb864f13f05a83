/**
 * Which webhook delivery targets may be reached: the rule against server-side
 * request forgery (a cron job's `--deliver http://169.254.169.254/…` or
 * `http://127.0.0.1:6379/` must never be POSTed to).
 *
 * Rule:
 *   - only `http:` and `https:` URLs;
 *   - a host named in `delivery.webhook_allow` (a host name or an IP address,
 *     matched exactly, case-insensitive) is allowed whatever it resolves to;
 *     an allow-list entry in CIDR form (`10.1.0.0/16`) allows addresses in it;
 *   - otherwise an address must be public unicast: ipaddr.js's `range()` must
 *     say `unicast` (after unwrapping IPv4-mapped IPv6), which refuses
 *     loopback, private (RFC 1918), link-local (169.254/16, fe80::/10, cloud
 *     metadata), unique-local, carrier-grade NAT, multicast, broadcast,
 *     unspecified, reserved, benchmarking, and the IPv6 forms that embed an
 *     IPv4 address (NAT64, 6to4, Teredo), since the embedded one may be private;
 *     on top of ipaddr.js, an IPv6 address it calls `unicast` but that lies
 *     outside 2000::/3 (the only block IANA assigns for global unicast) is
 *     refused: this covers the deprecated IPv4-compatible form `::a.b.c.d`
 *     (::/96, RFC 4291 §2.5.5.1; `[::127.0.0.1]` reaches loopback on some
 *     stacks) and the rest of the IETF-reserved ::/8, 0100::/8, 0200::/7…;
 *   - at creation (no DNS): an IP literal is checked as above; a name that is
 *     local by its form (`localhost`, `*.localhost`, `*.local`, `*.internal`,
 *     `*.localdomain`, `*.home.arpa`, or a single label without a dot) is refused;
 *   - at send time (worker/runtime/webhook-sender.ts) every address the name resolves
 *     to is checked, and the connection goes to a checked address (no second
 *     lookup a rebinding DNS server could answer differently); redirects are
 *     not followed.
 *
 * Pure: no I/O. The address classification is ipaddr.js's (a maintained
 * library with the IANA special-purpose registries), not ours.
 */
import ipaddr from 'ipaddr.js';
import { ScheduleInputError } from '../errors/schedule-input-error.ts';

/** The parsed `delivery.webhook_allow` list. */
export interface WebhookAllowList {
  /** Lower-case host names and normalised IP addresses allowed by name. */
  readonly hosts: ReadonlySet<string>;
  /** CIDR ranges whose addresses are allowed. */
  readonly ranges: ReadonlyArray<[ipaddr.IPv4 | ipaddr.IPv6, number]>;
}

/** Suffixes of names that are local by definition or convention. */
const LOCAL_SUFFIXES = ['.localhost', '.local', '.internal', '.localdomain', '.home.arpa'];

/** Host of a URL as compared: lower case, IPv6 brackets removed. */
function bareHost(hostname: string): string {
  return hostname.toLowerCase().replace(/^\[|\]$/g, '');
}

/** Normalised form of an IP literal, or undefined for a name. */
function ipLiteral(host: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  if (!ipaddr.isValid(host)) return undefined;
  // ipaddr.js also accepts forms like "0x7f.1"; URL parsing has normalised those already.
  return ipaddr.process(host);
}

/**
 * Parse the operator's allow-list.
 * @param entries - host names, IP addresses or CIDR ranges
 * @throws ScheduleInputError naming an entry that is none of these
 */
export function parseWebhookAllow(entries: readonly string[]): WebhookAllowList {
  const hosts = new Set<string>();
  const ranges: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]> = [];
  for (const raw of entries) {
    const entry = bareHost(raw.trim());
    if (entry === '') continue;
    if (entry.includes('/')) {
      if (!ipaddr.isValidCIDR(entry))
        throw new ScheduleInputError(`delivery.webhook_allow: "${raw}" is not a valid CIDR range.`, { field: 'webhook_allow' });
      let [addr, bits] = ipaddr.parseCIDR(entry);
      if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
        addr = (addr as ipaddr.IPv6).toIPv4Address(); // addresses are compared after the same unwrapping
        bits -= 96;
      }
      ranges.push([addr, bits]);
      continue;
    }
    const ip = ipLiteral(entry);
    if (ip) hosts.add(ip.toString());
    else if (/^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?$/.test(entry)) hosts.add(entry.replace(/\.$/, ''));
    else
      throw new ScheduleInputError(`delivery.webhook_allow: "${raw}" is not a host name, IP address or CIDR range.`, {
        field: 'webhook_allow',
      });
  }
  return { hosts, ranges };
}

/** True when a URL's host (`url.hostname`) is an IP address rather than a name. */
export function isIpLiteral(hostname: string): boolean {
  return ipLiteral(bareHost(hostname)) !== undefined;
}

/** True when the URL's host is named in the allow-list (then no address check applies). */
export function hostAllowListed(hostname: string, allow: WebhookAllowList): boolean {
  const host = bareHost(hostname).replace(/\.$/, '');
  const ip = ipLiteral(host);
  return allow.hosts.has(ip ? ip.toString() : host);
}

/**
 * Whether a resolved (or literal) address may be connected to.
 * @returns undefined when allowed, else the reason (e.g. `loopback`, `private`, `linkLocal`)
 */
export function refusedAddressReason(address: string, allow: WebhookAllowList): string | undefined {
  if (!ipaddr.isValid(address)) return 'not an IP address';
  const ip = ipaddr.process(address);
  if (allow.hosts.has(ip.toString())) return undefined;
  for (const [net, bits] of allow.ranges) {
    if (net.kind() === ip.kind() && ip.match(net, bits)) return undefined;
  }
  const range = addressRange(ip);
  return range === 'unicast' ? undefined : range;
}

const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3') as [ipaddr.IPv6, number];
const IPV4_COMPATIBLE_V6 = ipaddr.parseCIDR('::/96') as [ipaddr.IPv6, number];

/**
 * ipaddr.js's range name of an address (IPv4-mapped IPv6 already unwrapped by
 * `ipaddr.process`), with IPv6 `unicast` narrowed to 2000::/3: outside it the
 * answer is `ipv4Compatible` (::/96) or `reserved`. See the rule above.
 */
export function addressRange(ip: ipaddr.IPv4 | ipaddr.IPv6): string {
  const range = ip.range();
  if (range !== 'unicast' || ip.kind() !== 'ipv6') return range;
  const v6 = ip as ipaddr.IPv6;
  if (v6.match(GLOBAL_UNICAST_V6)) return range;
  return v6.match(IPV4_COMPATIBLE_V6) ? 'ipv4Compatible' : 'reserved';
}

/**
 * The creation-time check of one webhook target (no DNS: see the rule above).
 * @throws ScheduleInputError naming the target and why it is refused
 */
export function assertWebhookTarget(target: string, allow: WebhookAllowList): void {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    throw new ScheduleInputError(`Invalid webhook URL "${target}".`, { field: 'deliver' });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ScheduleInputError(`Invalid webhook URL "${target}": only http and https.`, { field: 'deliver' });
  }
  if (hostAllowListed(url.hostname, allow)) return;
  const host = bareHost(url.hostname).replace(/\.$/, '');
  const hint = 'internal addresses are refused; an operator can open a host with delivery.webhook_allow';
  if (ipLiteral(host)) {
    const reason = refusedAddressReason(host, allow);
    if (reason) throw new ScheduleInputError(`Webhook target ${url.origin} is a ${reason} address: ${hint}.`, { field: 'deliver' });
    return;
  }
  if (host === 'localhost' || LOCAL_SUFFIXES.some((s) => host.endsWith(s)) || !host.includes('.')) {
    throw new ScheduleInputError(`Webhook target ${url.origin} names a local host: ${hint}.`, { field: 'deliver' });
  }
}
