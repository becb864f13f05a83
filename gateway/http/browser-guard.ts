/**
 * What a web page in the operator's browser may not do to the gateway.
 *
 * - **DNS rebinding.** Without a key (`api_server.insecure_no_auth`) the gateway
 *   listens on loopback only and is open there; a page whose own name is re-pointed at 127.0.0.1
 *   would reach it with its own name in `Host`. So without a key, a request
 *   is served only when its `Host` is a loopback name or address
 *   (`localhost`, `127.x.x.x`, `[::1]`).
 * - **Cross-site requests.** A page can send a "simple" POST anywhere
 *   (`/api/cron/jobs/:ref/run`, a pause, a stop) without a preflight, and the
 *   browser adds cached Basic credentials of the dashboard. Browsers name the
 *   page in `Origin`; the gateway serves no cross-origin callers (it sends no
 *   CORS headers), so a request whose `Origin` is not the gateway itself is
 *   refused, with a key or without. Clients that are not browsers (curl, the
 *   OpenAI SDKs, `hermes`) send no `Origin` and are not affected.
 *
 * Both answer 403 before the key, the body or any route is looked at. The
 * health endpoints are mounted before this guard (a probe through a proxy
 * names the proxy's host).
 */
import type { Request, RequestHandler } from 'express';
import { isLoopbackHost } from './auth.ts';
import { errorBody } from './errors.ts';

/**
 * The host name and port of a `Host` header value (`127.0.0.1:8642` → `127.0.0.1`, `8642`;
 * `[::1]:80` → `::1`, `80`); `undefined` for anything that is not `name[:port]` or `[v6][:port]`.
 */
export function parseHost(hostHeader: string): { name: string; port: string | undefined } | undefined {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:[\]/@]+))(?::(\d{1,5}))?$/.exec(hostHeader.trim());
  return m ? { name: (m[1] ?? m[2])!, port: m[3] } : undefined;
}

/**
 * Whether a `Host` name can only mean this machine: a loopback address in any spelling
 * (`127.0.0.1`, `::1`, `::ffff:7f00:1`), or `localhost` and its subdomains with or without the
 * final dot (RFC 6761: browsers resolve them to loopback themselves, never through DNS, so a
 * rebinding page cannot be one).
 */
function loopbackName(name: string): boolean {
  const n = name.toLowerCase().replace(/\.$/, '');
  return n.endsWith('.localhost') || isLoopbackHost(n);
}

/**
 * Why the guard refuses `req` (rules above), or `undefined` when it passes.
 * @param key - the API key; without it (`insecure_no_auth`) the `Host` rule applies too
 */
export function browserRefusal(req: Request, key: string | undefined): { message: string; code: string } | undefined {
  const host = req.get('host') ?? '';
  const parsed = parseHost(host);
  if (!key && !(parsed && loopbackName(parsed.name))) {
    return {
      message: `Without a key (api_server.insecure_no_auth) the gateway answers only requests addressed to a loopback name (127.0.0.1, localhost), not "${host}".`,
      code: 'host_not_allowed',
    };
  }
  const origin = req.get('origin');
  if (origin !== undefined && !sameOrigin(origin, host)) {
    return {
      message: 'Cross-origin requests are refused: the gateway serves no web pages but its own dashboard.',
      code: 'cross_origin_refused',
    };
  }
  return undefined;
}

/**
 * The guard (rules above): 403 with `Connection: close`.
 * @param key - the API key; without it (`insecure_no_auth`) the `Host` rule applies too
 */
export function browserGuard(key: string | undefined): RequestHandler {
  return (req, res, next) => {
    const refusal = browserRefusal(req, key);
    if (!refusal) return next();
    res
      .status(403)
      .set('Connection', 'close')
      .json(errorBody(refusal.message, 'invalid_request_error', refusal.code));
  };
}

const DEFAULT_PORTS: Record<string, string> = { 'http:': '80', 'https:': '443' };

/**
 * Whether a browser's `Origin` (`http://host:port`, or `null`) names the host the request was
 * sent to. Ports compare with the scheme's default filled in (`Origin: https://gw.example`
 * matches `Host: gw.example:443` from a proxy).
 */
function sameOrigin(origin: string, hostHeader: string): boolean {
  const host = parseHost(hostHeader);
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false; // `null` (a sandboxed frame, a file: page) or garbage
  }
  const scheme = DEFAULT_PORTS[url.protocol];
  if (!host || scheme === undefined) return false;
  const originName = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return originName === host.name.toLowerCase() && (url.port || scheme) === (host.port ?? scheme);
}
