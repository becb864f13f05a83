/**
 * POSTing a delivery to a webhook — a cron run's, a loop's or a heartbeat's — under the address rule
 * of `scheduler/delivery/webhook-policy.ts`, checked again at send time:
 *
 * - an IP-literal host is checked before connecting;
 * - a host name is resolved through a guarded `lookup` (./guarded-lookup.ts): every address it
 *   resolves to must be allowed (one internal answer refuses the name), and
 *   the socket connects to the checked address itself, so a DNS server that
 *   answers differently on a second lookup (rebinding) gains nothing;
 * - a host named in `delivery.webhook_allow` skips the address check;
 * - redirects are never followed (node:http does not follow them): a 3xx
 *   answer is a failed delivery that says so.
 *
 * Signature: with `delivery.webhook_secret` set, every POST carries
 * `X-Hermes-Signature-256: sha256=<hex HMAC-SHA256 of the body under the secret>` (GitHub's scheme), so a
 * receiver can tell a delivery from anyone else's POST; `Idempotency-Key` names the occurrence, so a
 * receiver can drop a repeat.
 */
import { createHmac } from 'node:crypto';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { hostAllowListed, isIpLiteral, refusedAddressReason, type WebhookAllowList } from '../../scheduler/delivery/webhook-policy.ts';
import { guardedLookup, RefusedAddressError } from './guarded-lookup.ts';

/** The header of the body's signature (see the top of this file). */
export const SIGNATURE_HEADER = 'x-hermes-signature-256';

/** `sha256=<hex HMAC-SHA256 of body under secret>`, the value of {@link SIGNATURE_HEADER}. */
export function webhookSignature(body: string, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** Outcome of one POST. */
export type WebhookOutcome = { ok: true; status: number } | { ok: false; status?: number; error: string };

/**
 * POST `body` (JSON) to a webhook target.
 *
 * @param target - http(s) URL, already accepted at creation
 * @param options.allow - `delivery.webhook_allow`, parsed
 * @param options.timeoutMs - the whole exchange, connect to last byte
 * @param options.secret - `delivery.webhook_secret`: the body is signed with it
 * @returns `ok` for a 2xx; otherwise the status or the reason (refused address, redirect,
 *   network error, timeout). Never throws.
 */
export async function postWebhook(
  target: string,
  body: string,
  headers: Record<string, string>,
  options: { allow: WebhookAllowList; timeoutMs: number; secret?: string },
): Promise<WebhookOutcome> {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return { ok: false, error: 'invalid URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { ok: false, error: 'refused: only http and https' };
  const listed = hostAllowListed(url.hostname, options.allow);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!listed && isIpLiteral(host)) {
    const reason = refusedAddressReason(host, options.allow);
    if (reason) return { ok: false, error: `refused: ${host} is a ${reason} address` };
  }
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return await new Promise<WebhookOutcome>((resolve) => {
    let settled = false;
    const settle = (o: WebhookOutcome) => {
      if (settled) return;
      settled = true;
      resolve(o);
    };
    const req = request(
      url,
      {
        method: 'POST',
        headers: {
          ...headers,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          ...(options.secret ? { [SIGNATURE_HEADER]: webhookSignature(body, options.secret) } : {}),
        },
        signal: AbortSignal.timeout(options.timeoutMs),
        ...(listed ? {} : { lookup: guardedLookup((address) => refusedAddressReason(address, options.allow)) }),
      },
      (res: IncomingMessage) => {
        res.resume(); // the answer's body is not used
        const status = res.statusCode ?? 0;
        res.on('end', () => {
          if (status >= 200 && status < 300) settle({ ok: true, status });
          else if (status >= 300 && status < 400) settle({ ok: false, status, error: `HTTP ${status} (redirects are not followed)` });
          else settle({ ok: false, status, error: `HTTP ${status}` });
        });
        res.on('error', (err) => settle({ ok: false, status, error: err.message }));
      },
    );
    req.on('error', (err) => {
      if (err instanceof RefusedAddressError) settle({ ok: false, error: `refused: ${err.message}` });
      else if (err.name === 'AbortError' || err.name === 'TimeoutError')
        settle({ ok: false, error: `no answer within ${options.timeoutMs / 1000}s` });
      else settle({ ok: false, error: err.message });
    });
    req.end(body);
  });
}

/** A webhook URL as events and logs show it: its origin, never its path or query (they may hold a secret). */
export function webhookOrigin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'webhook';
  }
}
