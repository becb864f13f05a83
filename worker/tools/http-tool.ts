/**
 * `http_get` to the hosts in `tools.http.allow`.
 *
 * Rules: only `http:` and `https:` URLs whose host is listed (`name` any
 * port, `name:port` that port, the scheme's default port filled in when the
 * URL has none; IPv6 bracketed or bare: `parseAllowEntry`); redirects are followed by hand (at most `MAX_REDIRECTS`) and each
 * hop is checked against the same list, so a listed host cannot redirect the
 * agent to an unlisted one (e.g. 127.0.0.1); the body is read only up to the
 * result cap and the connection is then dropped.
 *
 * Address rule (worker/tools/http-tool-policy.ts): a URL whose host is a listed
 * IP address connects to it; a listed name is resolved once through the
 * guarded lookup (worker/runtime/guarded-lookup.ts), every address checked, and the
 * socket connects to the checked address, so a name that resolves (or is
 * re-pointed by rebinding) to loopback or link-local metadata is refused.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { httpGetRefusedReason } from './http-tool-policy.ts';
import { isIpLiteral } from '../../scheduler/delivery/webhook-policy.ts';
import { ToolError } from '../../scheduler/errors/tool-error.ts';
import { guardedLookup, RefusedAddressError, type Resolver } from '../runtime/guarded-lookup.ts';
import { stringArg, type AgentTool } from './tool.ts';

/** Redirect hops `http_get` follows (each one checked). */
export const MAX_REDIRECTS = 5;

/** One `tools.http.allow` entry: a host as the URL parser writes it (IPv6 in brackets), and a port or any. */
export interface AllowEntry {
  host: string;
  port?: number;
}

/**
 * Read one allow entry: `name`, `name:port`, an IPv4 address with or without
 * a port, an IPv6 address bracketed (`[::1]`, `[::1]:8080`) or bare (`::1`,
 * any port; bracket it to name one). The host goes through the same URL
 * parser as the URLs it is matched against, so case, IDN, IPv4 spellings
 * (`127.1`) and IPv6 spellings (`0:0:0:0:0:0:0:1`) compare as the URL's do.
 * @returns undefined for an entry that is no host (it matches nothing)
 */
export function parseAllowEntry(entry: string): AllowEntry | undefined {
  const e = entry.trim();
  const bracketed = /^(\[[^\]]+\])(?::(\d{1,5}))?$/.exec(e);
  const bareIpv6 = !bracketed && (e.match(/:/g) ?? []).length > 1;
  const named = /^([^:]+)(?::(\d{1,5}))?$/.exec(e);
  const host = bracketed ? bracketed[1] : bareIpv6 ? `[${e}]` : named?.[1];
  const port = bracketed ? bracketed[2] : bareIpv6 ? undefined : named?.[2];
  if (host === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(`http://${host}/`);
  } catch {
    return undefined;
  }
  // Anything but a bare host (a user, a path, a port inside the host part) is not an entry.
  if (
    parsed.username !== '' ||
    parsed.password !== '' ||
    parsed.port !== '' ||
    parsed.pathname !== '/' ||
    parsed.search !== '' ||
    parsed.hash !== ''
  ) {
    return undefined;
  }
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) return undefined;
  return { host: parsed.hostname, ...(port !== undefined ? { port: Number(port) } : {}) };
}

/** The port a URL connects to: its own, else its scheme's default (443 for https, 80 for http). */
function effectivePort(url: URL): number {
  if (url.port !== '') return Number(url.port);
  return url.protocol === 'https:' ? 443 : 80;
}

/**
 * True when `url`'s host is on the allow list: an entry without a port
 * matches any port, `host:port` only that port — the default port included
 * (`host:443` allows `https://host/…`, `host:80` allows `http://host/…`).
 */
export function hostAllowed(url: URL, allow: readonly string[]): boolean {
  const host = url.hostname.toLowerCase();
  const port = effectivePort(url);
  return allow.some((a) => {
    const entry = parseAllowEntry(a);
    return entry !== undefined && entry.host === host && (entry.port === undefined || entry.port === port);
  });
}

/**
 * The `http_get` tool over `allow` (host names or IP addresses, optionally with a port).
 * @param options.resolve - the DNS resolver behind the guarded lookup (`dns.lookup`; tests give a fake DNS)
 */
export function httpTool(allow: string[], options: { resolve?: Resolver } = {}): AgentTool {
  const name = 'http_get';
  return {
    name,
    description: `HTTP GET a URL and return its status and body as it is now. Allowed hosts: ${allow.join(', ')}.`,
    parameters: {
      type: 'object',
      properties: { url: { type: 'string', description: 'http(s) URL on an allowed host' } },
      required: ['url'],
      additionalProperties: false,
    },
    groups: [name, 'http'],
    async call(args, ctx) {
      let url: URL;
      try {
        url = new URL(stringArg(args, 'url', name));
      } catch (err) {
        if (err instanceof ToolError) throw err;
        throw new ToolError(`Not a URL: ${String(args.url)}`, { kind: 'refused', tool: name });
      }
      for (let hop = 0; ; hop++) {
        if (url.protocol !== 'http:' && url.protocol !== 'https:') {
          throw new ToolError(`Refused: only http and https URLs (${url.protocol}).`, { kind: 'refused', tool: name });
        }
        if (!hostAllowed(url, allow)) {
          const what = hop === 0 ? 'is not an allowed host' : 'is not an allowed host (reached by a redirect)';
          throw new ToolError(`Refused: ${url.host} ${what}.`, { kind: 'refused', tool: name });
        }
        const res = await get(url, ctx.signal, options.resolve);
        const status = res.statusCode ?? 0;
        const location = res.headers.location;
        if (status >= 300 && status < 400 && location) {
          res.destroy();
          if (hop >= MAX_REDIRECTS) throw new ToolError(`More than ${MAX_REDIRECTS} redirects.`, { kind: 'failed', tool: name });
          url = new URL(location, url);
          continue;
        }
        const body = await readCapped(res, ctx.maxResultBytes + 1);
        return `HTTP ${status} ${res.statusMessage ?? ''}\ncontent-type: ${res.headers['content-type'] ?? ''}\n\n${body}`;
      }
    },
  };
}

/**
 * One GET, connecting under the address rule: a listed IP literal directly, a
 * name through the guarded lookup. Resolves with the response head.
 * @throws ToolError `refused` when the name resolves to a refused address
 */
async function get(url: URL, signal: AbortSignal, resolve: Resolver | undefined): Promise<IncomingMessage> {
  const host = url.hostname.toLowerCase().replace(/^\[|\]$/g, '');
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return await new Promise<IncomingMessage>((done, fail) => {
    const req = request(
      url,
      {
        method: 'GET',
        signal,
        headers: { 'user-agent': 'hermes-agent' },
        ...(isIpLiteral(host) ? {} : { lookup: guardedLookup((address) => httpGetRefusedReason(address, host), resolve) }),
      },
      done,
    );
    req.on('error', (err) => {
      if (err instanceof RefusedAddressError)
        fail(
          new ToolError(
            `Refused: ${err.message}; a listed name may not lead to loopback, link-local or other special addresses (list the IP itself to allow it).`,
            { kind: 'refused', tool: 'http_get' },
          ),
        );
      else fail(err);
    });
    req.end();
  });
}

/** Read at most `maxBytes` of the body, then drop the connection. */
async function readCapped(res: IncomingMessage, maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res) {
    chunks.push(chunk as Buffer);
    size += (chunk as Buffer).byteLength;
    if (size >= maxBytes) break; // leaving the loop destroys the stream
  }
  res.destroy();
  return Buffer.concat(chunks).subarray(0, maxBytes).toString('utf8');
}
