/**
 * Security headers of every answer of the gateway (`helmet`), health and refusals included:
 *
 * - no framing anywhere: `X-Frame-Options: DENY` and `frame-ancestors 'none'`, so no other page can
 *   frame the queue dashboard or the console and trick a click on retry, clean or remove;
 * - `X-Content-Type-Options: nosniff`, `Cross-Origin-Opener-Policy` and `Cross-Origin-Resource-Policy`
 *   `same-origin`, `Origin-Agent-Cluster`, no DNS prefetch, `X-Permitted-Cross-Domain-Policies: none`;
 * - `Referrer-Policy: same-origin`, not helmet's `no-referrer`: under `no-referrer` a browser sends
 *   `Origin: null` with the pages' own POSTs, which the browser guard refuses as cross-site;
 * - no `Strict-Transport-Security`: the gateway speaks plain HTTP; a TLS proxy in front decides HSTS;
 * - a Content-Security-Policy per kind of answer: the API's JSON and text allow nothing
 *   (`API_CSP`); the console (`/ui`) and the queue dashboard (`/admin/queues`) set their own
 *   (`pagePolicy`), which replaces it on their answers.
 *
 * `X-Powered-By` is never sent (`app.disable('x-powered-by')` in server.ts; helmet removes it too).
 */
import helmet from 'helmet';
import type { RequestHandler } from 'express';

/** CSP directives: a name and its sources. */
export type CspDirectives = Record<string, string[]>;

/** The API's answers (JSON, text, event streams): no content of any kind, no framing. */
export const API_CSP: CspDirectives = {
  'default-src': ["'none'"],
  'base-uri': ["'none'"],
  'form-action': ["'none'"],
  'frame-ancestors': ["'none'"],
};

/**
 * The queue dashboard (bull-board's React page): its scripts, styles and API calls from the gateway
 * itself; inline styles (its loading screen and components use `style` attributes); `base-uri
 * 'self'` for its `<base href>`. Its Google Fonts stylesheet is not allowed (the page falls back to
 * the browser's fonts), so opening it tells no third party about the gateway.
 */
export const DASHBOARD_CSP: CspDirectives = {
  'default-src': ["'self'"],
  'script-src': ["'self'"],
  'style-src': ["'self'", "'unsafe-inline'"],
  'img-src': ["'self'", 'data:'],
  'font-src': ["'self'", 'data:'],
  'connect-src': ["'self'"],
  'object-src': ["'none'"],
  'base-uri': ["'self'"],
  'form-action': ["'self'"],
  'frame-ancestors': ["'none'"],
};

/** The headers above, for every answer (mount first). */
export function securityHeaders(): RequestHandler {
  return helmet({
    contentSecurityPolicy: { useDefaults: false, directives: API_CSP },
    strictTransportSecurity: false,
    referrerPolicy: { policy: 'same-origin' },
    xFrameOptions: { action: 'deny' },
  }) as RequestHandler;
}

/** The Content-Security-Policy of a page surface (the console, the dashboard), replacing `API_CSP` on its answers. */
export function pagePolicy(directives: CspDirectives): RequestHandler {
  return helmet.contentSecurityPolicy({ useDefaults: false, directives }) as RequestHandler;
}
