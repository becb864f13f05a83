/**
 * Error answers of the HTTP server in the OpenAI shape
 * (`{ "error": { "message", "type", "param", "code" } }`), so OpenAI clients
 * surface them as ordinary API errors. One mapping from the product's typed
 * errors to HTTP statuses lives here.
 */
import type { ErrorRequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import { z } from 'zod';
import { ConfigError, ScheduleInputError, StoreUnavailableError, UnknownJobError } from '../../scheduler/errors/index.ts';
import { redisRefusal } from './write-refusal.ts';
import { StreamLimitError } from '../stream-fanout.ts';

/** OpenAI error `type` values used by this server. */
export type ApiErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'not_found_error'
  | 'conflict_error'
  | 'rate_limit_error'
  | 'server_error'
  | 'service_unavailable';

/** An HTTP error answer: status plus the OpenAI-style body. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: ApiErrorType,
    readonly code: string | null = null,
    readonly param: string | null = null,
    /** Extra response headers (e.g. `Retry-After`). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

/** The OpenAI-style error body. */
export function errorBody(message: string, type: ApiErrorType, code: string | null = null, param: string | null = null) {
  return { error: { message, type, param, code } };
}

/** Answer with an error (no-op when headers were already sent). */
export function sendError(res: Response, err: HttpError): void {
  if (res.headersSent) return;
  res
    .status(err.status)
    .set(err.headers)
    .json(errorBody(err.message, err.type, err.code, err.param));
}

/** The error type that goes with an HTTP status. */
export function typeForStatus(status: number): ApiErrorType {
  if (status === 400 || status === 413 || status === 422) return 'invalid_request_error';
  if (status === 401 || status === 403) return 'authentication_error';
  if (status === 404) return 'not_found_error';
  if (status === 409) return 'conflict_error';
  if (status === 429) return 'rate_limit_error';
  if (status === 503) return 'service_unavailable';
  return 'server_error';
}

/** Seconds a client is asked to wait (`Retry-After`) while Redis is away. */
const STORE_RETRY_AFTER = '5';

/** The 503 answered while Redis is unreachable. */
export function storeUnavailableError(detail?: string): HttpError {
  return new HttpError(
    503,
    `The gateway cannot reach Redis${detail ? ` (${detail})` : ''}, so it can store and queue nothing right now; retry in a few seconds.`,
    'service_unavailable',
    'store_unavailable',
    null,
    { 'Retry-After': STORE_RETRY_AFTER },
  );
}

/**
 * The 503 answered when Redis is reachable but refuses writes (out of memory, disk full,
 * read-only replica, too few replicas, loading; write-refusal.ts).
 */
export function storeRefusedError(code: string, detail: string): HttpError {
  return new HttpError(
    503,
    `Redis refused to store this request (${code}: ${detail}), so nothing was changed; retry in a few seconds. ` +
      'The operator should check Redis (memory, disk, replication).',
    'service_unavailable',
    'store_refused_write',
    null,
    { 'Retry-After': STORE_RETRY_AFTER },
  );
}

/** True for the errors ioredis raises when Redis is away or too slow (connection lost, retries or timeout used up). */
function isRedisUnavailable(err: unknown): boolean {
  const e = err as { name?: string; message?: string; code?: string } | undefined;
  if (!e || typeof e !== 'object') return false;
  if (e.name === 'MaxRetriesPerRequestError' || e.name === 'ClusterAllFailedError') return true;
  if (e.code === 'ECONNREFUSED' || e.code === 'ECONNRESET' || e.code === 'EPIPE') return true;
  return /^(Command timed out|Connection is closed\.|Stream isn't writeable|All sentinels are unreachable|Failed to refresh slots cache)/.test(
    e.message ?? '',
  );
}

/** Map any thrown value to an `HttpError`. */
export function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof z.ZodError) {
    const issue = err.issues[0]!;
    const param = issue.path.map(String).join('.') || null;
    return new HttpError(
      400,
      `Invalid request body${param ? ` at ${param}` : ''}: ${issue.message}`,
      'invalid_request_error',
      'invalid_body',
      param,
    );
  }
  if (err instanceof UnknownJobError) return new HttpError(404, err.message, 'not_found_error', 'unknown_job', 'ref');
  if (err instanceof ScheduleInputError) return new HttpError(400, err.message, 'invalid_request_error', err.code, err.field ?? null);
  if (err instanceof ConfigError) return new HttpError(400, err.message, 'invalid_request_error', err.code, err.key ?? null);
  if (err instanceof StreamLimitError) {
    return new HttpError(429, `${err.message} Retry shortly.`, 'rate_limit_error', 'too_many_streams', null, { 'Retry-After': '5' });
  }
  // A write Redis refused (OOM, MISCONF/ENOSPC, READONLY, …) is a 503 whatever wraps it.
  const refusal = redisRefusal(err);
  if (refusal) return storeRefusedError(refusal.code, refusal.message);
  if (err instanceof StoreUnavailableError)
    return new HttpError(503, err.message, 'service_unavailable', err.code, null, { 'Retry-After': STORE_RETRY_AFTER });
  if (isRedisUnavailable(err)) return storeUnavailableError((err as Error).message.replace(/\.$/, ''));
  const e = err as { type?: string; status?: number; message?: string };
  // body-parser errors (express.json): malformed JSON, too large, wrong charset
  if (e?.type === 'entity.parse.failed') {
    return new HttpError(400, 'The request body is not valid JSON.', 'invalid_request_error', 'invalid_json');
  }
  if (e?.type === 'entity.too.large')
    return new HttpError(413, 'The request body is too large.', 'invalid_request_error', 'body_too_large');
  if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500) {
    return new HttpError(e.status, e.message ?? 'Bad request.', typeForStatus(e.status), null);
  }
  return new HttpError(500, 'Internal server error.', 'server_error', 'internal_error');
}

/** Last express middleware: every error becomes an OpenAI-style answer; 5xx are logged. */
export function errorHandler(log: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    const httpErr = toHttpError(err);
    if (httpErr.code === 'store_refused_write') refusedWrites(log, req.path, httpErr.message);
    else if (httpErr.status >= 500 && httpErr.code !== 'store_unavailable')
      log.error({ err: (err as Error)?.message, path: req.path }, 'request failed');
    sendError(res, httpErr);
  };
}

/** At most one warning per this window about writes Redis refused, ms. */
const REFUSED_WRITE_LOG_INTERVAL_MS = 10_000;
let refusedLoggedAt = -Infinity;
let refusedSuppressed = 0;

/** Warn about a refused write, rate-limited (an outage refuses every request). */
function refusedWrites(log: Logger, path: string, message: string): void {
  const now = Date.now();
  if (now - refusedLoggedAt < REFUSED_WRITE_LOG_INTERVAL_MS) {
    refusedSuppressed++;
    return;
  }
  refusedLoggedAt = now;
  log.warn(
    { path, err: message, ...(refusedSuppressed > 0 ? { suppressed: refusedSuppressed } : {}) },
    'Redis refuses writes: requests are answered 503',
  );
  refusedSuppressed = 0;
}
