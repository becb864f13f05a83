/**
 * `Authorization: Bearer <API_SERVER_KEY>` for `/v1` and `/api` (docs/DESIGN.md §8).
 *
 * - The key is compared in constant time (SHA-256 of both sides, then
 *   `timingSafeEqual`, so neither the content nor the length leaks).
 * - Without a configured key the server is open, which is only allowed on a
 *   loopback address: `assertBindAllowed` refuses any other bind.
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
 * @throws ConfigError naming `api_server.key`
 */
export function assertBindAllowed(host: string, key: string | undefined): void {
  if (!isLoopbackHost(host) && !key) {
    throw new ConfigError(
      `Refusing to bind the API server to ${host} without a key: set API_SERVER_KEY (api_server.key), or bind to 127.0.0.1.`,
      { key: 'api_server.key' },
    );
  }
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

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
 * Middleware requiring the bearer key; a no-op when no key is configured (loopback only).
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
    if (!m) return refuse('Missing API key: send Authorization: Bearer <API_SERVER_KEY>.', 'missing_api_key');
    if (!keyMatches(m[1]!.trim(), key)) return refuse('Incorrect API key.', 'invalid_api_key');
    next();
  };
}
