/**
 * `http_get` to the hosts in `tools.http.allow`.
 *
 * Rules: only `http:` and `https:` URLs whose host (`name` or `name:port`)
 * is listed; redirects are followed by hand (at most `MAX_REDIRECTS`) and each
 * hop is checked against the same list, so a listed host cannot redirect the
 * agent to an unlisted one (e.g. 127.0.0.1); the body is read only up to the
 * result cap and the connection is then dropped.
 */
import { ToolError } from '../../scheduler/errors/tool-error.ts';
import { stringArg, type AgentTool } from './tool.ts';

/** Redirect hops `http_get` follows (each one checked). */
export const MAX_REDIRECTS = 5;

/** True when `url`'s host is on the allow list (`host` matches any port, `host:port` only that port). */
export function hostAllowed(url: URL, allow: string[]): boolean {
  const host = url.hostname.toLowerCase();
  const withPort = url.host.toLowerCase();
  return allow.some((a) => {
    const entry = a.toLowerCase();
    return entry === withPort || entry === host;
  });
}

/** The `http_get` tool over `allow` (host names, optionally with a port). */
export function httpTool(allow: string[]): AgentTool {
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
        const res = await fetch(url, { redirect: 'manual', signal: ctx.signal, headers: { 'user-agent': 'hermes-agent' } });
        const location = res.headers.get('location');
        if (res.status >= 300 && res.status < 400 && location) {
          await res.body?.cancel();
          if (hop >= MAX_REDIRECTS) throw new ToolError(`More than ${MAX_REDIRECTS} redirects.`, { kind: 'failed', tool: name });
          url = new URL(location, url);
          continue;
        }
        const body = await readCapped(res, ctx.maxResultBytes + 1);
        return `HTTP ${res.status} ${res.statusText}\ncontent-type: ${res.headers.get('content-type') ?? ''}\n\n${body}`;
      }
    },
  };
}

/** Read at most `maxBytes` of the body, then drop the rest. */
async function readCapped(res: Response, maxBytes: number): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.byteLength;
    if (size >= maxBytes) {
      await reader.cancel();
      break;
    }
  }
  return Buffer.concat(chunks).subarray(0, maxBytes).toString('utf8');
}
