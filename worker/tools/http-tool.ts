/**
 * `http_get` to the hosts in `tools.http.allow`.
 *
 * Rules: only `http:` and `https:` URLs whose host is listed (`hostAllowed`,
 * `scheduler/tools/tool-reach.ts`: `name` any port, `name:port` that port);
 * redirects are followed by hand (at most `MAX_REDIRECTS`) and each
 * hop is checked against the same list, so a listed host cannot redirect the
 * agent to an unlisted one (e.g. 127.0.0.1); the body is read to its end
 * (within the call's timeout) into the call's output, which keeps its head and
 * its tail (`./tool-output.ts`).
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
import { hostAllowed } from '../../scheduler/tools/tool-reach.ts';
import { isIpLiteral } from '../../scheduler/delivery/webhook-policy.ts';
import { ToolError } from '../../scheduler/errors/tool-error.ts';
import { guardedLookup, RefusedAddressError, type Resolver } from '../runtime/guarded-lookup.ts';
import { stringArg, type AgentTool } from './tool.ts';

/** Redirect hops `http_get` follows (each one checked). */
export const MAX_REDIRECTS = 5;

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
    idempotent: true, // it only reads
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
        ctx.output.push(`HTTP ${status} ${res.statusMessage ?? ''}\ncontent-type: ${res.headers['content-type'] ?? ''}\n\n`);
        for await (const chunk of res) ctx.output.push(chunk as Buffer);
        return ctx.output;
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
