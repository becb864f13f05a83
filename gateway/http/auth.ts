/**
 * `Authorization: Bearer <key>` for `/v1`, `/api` and `/metrics` (docs/DESIGN.md §8). The key is
 * `API_SERVER_KEY`, else the home's key file (scheduler/config/api-key.ts).
 *
 * - The key is compared in constant time (SHA-256 of both sides, then
 *   `timingSafeEqual`, so neither the content nor the length leaks).
 * - Only the `Authorization` header counts: a key in the query string or a cookie is not read.
 * - Without a key (the operator's `api_server.insecure_no_auth`) the server is open, which is only
 *   allowed on a loopback address: `assertBindAllowed` refuses any other bind.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import ipaddr from 'ipaddr.js';
import type { RequestHandler } from 'express';
import { ConfigError } from '../../scheduler/errors/config-error.ts';
import { errorBody } from './errors.ts';

/**
 * True for `localhost` and a loopback address in any spelling ipaddr.js reads: `127.0.0.0/8`
 * (`127.1` too), `::1`, IPv4-mapped `::ffff:127.x` / `::ffff:7f00:1`; brackets allowed.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '');
  if (h === 'localhost') return true;
  return ipaddr.isValid(h) && ipaddr.process(h).range() === 'loopback';
}

/**
 * Refuse to serve a non-loopback address without a key.
 * @throws ConfigError naming `api_server.insecure_no_auth`
 */
export function assertBindAllowed(host: string, key: string | undefined): void {
  if (!isLoopbackHost(host) && !key) {
    throw new ConfigError(
      `Refusing to bind the API server to ${host} without a key: api_server.insecure_no_auth is for loopback only. ` +
        'Drop it (the home key or API_SERVER_KEY is then required), or bind to 127.0.0.1.',
      { key: 'api_server.insecure_no_auth' },
    );
  }
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** What a request without the key is told: how to send it and where it is. */
export const MISSING_KEY =
  "Missing API key: send Authorization: Bearer <key> (API_SERVER_KEY, or the key `hermes key` prints on the gateway's host).";

/** Constant-time comparison of a presented key with the configured one. */
export function keyMatches(presented: string, expected: string): boolean {
  return timingSafeEqual(digest(presented), digest(expected));
}

/** Whether `req` presents the configured key (`Authorization: Bearer <key>`); false when no key is configured. */
export function presentsKey(authorization: string | undefined, key: string | undefined): boolean {
  if (!key) return false;
  const m = /^Bearer\s+(.+)$/i.exec((authorization ?? '').trim());
  return m !== null && keyMatches(m[1]!.trim(), key);
}

/**
 * Middleware requiring the bearer key; a no-op without a key (`insecure_no_auth`, loopback only).
 * Missing or wrong keys get a 401 with an OpenAI-style body; the presented value is never logged.
 *
 * It runs before the body parser (server.ts), so a refused request's body is never read or
 * parsed; the 401 carries `Connection: close` and the connection is closed after it, so the
 * unread body is not drained either.
 */
export function bearerAuth(key: string | undefined): RequestHandler {
  return (req, res, next) => {
    if (!key) return next();
    const header = req.get('authorization') ?? '';
    const m = /^Bearer\s+(.+)$/i.exec(header.trim());
    const refuse = (message: string, code: string) => {
      res
        .status(401)
        .set({ 'WWW-Authenticate': 'Bearer', Connection: 'close' })
        .json(errorBody(message, 'authentication_error', code));
    };
    if (!m) return refuse(MISSING_KEY, 'missing_api_key');
    if (!keyMatches(m[1]!.trim(), key)) return refuse('Incorrect API key.', 'invalid_api_key');
    next();
  };
}
