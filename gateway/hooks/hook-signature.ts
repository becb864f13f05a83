/**
 * The signatures of `POST /hooks/<name>` (docs/GATEWAY.md "Webhooks"), checked over the body's bytes
 * exactly as received, before anything reads them:
 *
 * - `github`: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`, the delivery id in
 *   `X-GitHub-Delivery` (required). GitHub signs no timestamp: a delivery is refused again only by its id.
 * - `hermes`: `X-Hermes-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` (several
 *   `v1=` allowed, one must match, so a sender can rotate its secret), `t` at most
 *   {@link HERMES_TOLERANCE_SECONDS} from now either way; the delivery id in `X-Hermes-Delivery`, else
 *   the matching signature itself (the same signed request sent again is then the same delivery).
 *
 * Digests are compared with `crypto.timingSafeEqual`. Pure: no I/O; the secret is in no result.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { HOOK_SIGNATURES } from '../../scheduler/config/config.ts';

/** How far a `hermes` signature's timestamp may be from now, seconds (5 minutes, Stripe's and Slack's rule). */
export const HERMES_TOLERANCE_SECONDS = 300;

/** Longest delivery id taken (GitHub's are 36-character GUIDs). */
const MAX_DELIVERY_ID_CHARS = 200;

/** Request headers as node gives them (lower-case names). */
export type Headers = Record<string, string | string[] | undefined>;

/** A verified request: its delivery id and event name (empty when the sender named none). */
export interface SignedDelivery {
  ok: true;
  deliveryId: string;
  event: string;
}

/** A refused request and why, in words safe to log (no secret, no digest). */
export interface RefusedSignature {
  ok: false;
  reason: string;
}

/** One header's value (the first, when repeated). */
export function headerValue(headers: Headers, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * Check the signature of a request to a hook signed with `scheme`.
 * @param body - the body's bytes as received
 * @param nowMs - epoch ms (the `hermes` timestamp is compared with it)
 */
export function verifyHookSignature(
  scheme: (typeof HOOK_SIGNATURES)[number],
  secret: string,
  body: Buffer,
  headers: Headers,
  nowMs: number,
): SignedDelivery | RefusedSignature {
  return scheme === 'github' ? verifyGithub(secret, body, headers) : verifyHermes(secret, body, headers, nowMs);
}

function verifyGithub(secret: string, body: Buffer, headers: Headers): SignedDelivery | RefusedSignature {
  const m = /^sha256=([0-9a-f]{64})$/i.exec(headerValue(headers, 'x-hub-signature-256')?.trim() ?? '');
  if (!m) return { ok: false, reason: 'X-Hub-Signature-256 missing or not sha256=<64 hex digits>' };
  if (!digestMatches(createHmac('sha256', secret).update(body).digest(), m[1]!)) return { ok: false, reason: 'signature does not match' };
  const deliveryId = headerValue(headers, 'x-github-delivery')?.trim() ?? '';
  if (deliveryId === '' || deliveryId.length > MAX_DELIVERY_ID_CHARS)
    return { ok: false, reason: `X-GitHub-Delivery missing or longer than ${MAX_DELIVERY_ID_CHARS} characters` };
  return { ok: true, deliveryId, event: headerValue(headers, 'x-github-event')?.trim() ?? '' };
}

function verifyHermes(secret: string, body: Buffer, headers: Headers, nowMs: number): SignedDelivery | RefusedSignature {
  const header = headerValue(headers, 'x-hermes-signature') ?? '';
  let t: string | undefined;
  const v1: string[] = [];
  for (const part of header.split(',')) {
    const [k, v] = part.trim().split('=', 2);
    if (k === 't') t = v;
    else if (k === 'v1' && v !== undefined && /^[0-9a-f]{64}$/i.test(v)) v1.push(v);
  }
  if (t === undefined || !/^\d{1,12}$/.test(t) || v1.length === 0)
    return { ok: false, reason: 'X-Hermes-Signature missing or not t=<unix seconds>,v1=<64 hex digits>' };
  if (Math.abs(Number(t) - Math.floor(nowMs / 1000)) > HERMES_TOLERANCE_SECONDS)
    return { ok: false, reason: `timestamp more than ${HERMES_TOLERANCE_SECONDS} s from now` };
  const expected = createHmac('sha256', secret).update(`${t}.`).update(body).digest();
  const matched = v1.find((v) => digestMatches(expected, v));
  if (matched === undefined) return { ok: false, reason: 'signature does not match' };
  const given = headerValue(headers, 'x-hermes-delivery')?.trim() ?? '';
  if (given.length > MAX_DELIVERY_ID_CHARS)
    return { ok: false, reason: `X-Hermes-Delivery longer than ${MAX_DELIVERY_ID_CHARS} characters` };
  return {
    ok: true,
    deliveryId: given !== '' ? given : `v1=${matched.toLowerCase()}`,
    event: headerValue(headers, 'x-hermes-event')?.trim() ?? '',
  };
}

/** Constant-time comparison of a digest with a hex text of the same length (checked by the callers' patterns). */
function digestMatches(expected: Buffer, hex: string): boolean {
  const given = Buffer.from(hex, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The `X-Hermes-Signature` of `body` at `tSeconds` (for senders and tests). */
export function hermesSignature(secret: string, body: string | Buffer, tSeconds: number): string {
  return `t=${tSeconds},v1=${createHmac('sha256', secret).update(`${tSeconds}.`).update(body).digest('hex')}`;
}

/** The `X-Hub-Signature-256` GitHub sends for `body` (for tests and senders that sign like GitHub). */
export function githubSignature(secret: string, body: string | Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}
