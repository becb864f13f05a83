/**
 * The nesting limit of JSON bodies (`api_server.max_json_depth`).
 *
 * `JSON.parse` reads any depth, but everything after it that walks a body
 * recursively (validation, the canonical JSON of an `Idempotency-Key`'s
 * digest, logging) would overflow the stack on a body nested 50,000 levels
 * deep: a 500 instead of an answer. So right after the body parser a body
 * deeper than the limit is refused with a 400 that names the field where it
 * goes too deep. The walk itself is iterative and stops at the first value
 * past the limit.
 */
import type { RequestHandler } from 'express';
import { HttpError } from './errors.ts';

/** Segments of a too-deep path shown in the error; the rest is elided. */
const SHOWN_SEGMENTS = 6;

/**
 * The path of the first value nested deeper than `maxDepth` levels (a top-level object or array is
 * level 1), or `undefined` when none is.
 */
export function tooDeepPath(value: unknown, maxDepth: number): Array<string | number> | undefined {
  const stack: Array<{ value: unknown; path: Array<string | number> }> = [{ value, path: [] }];
  while (stack.length > 0) {
    const { value: v, path } = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (path.length >= maxDepth) return path;
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], path: [...path, i] });
    } else {
      const entries = Object.entries(v as Record<string, unknown>);
      for (let i = entries.length - 1; i >= 0; i--) stack.push({ value: entries[i]![1], path: [...path, entries[i]![0]] });
    }
  }
  return undefined;
}

/** A path as `a.b.0.c`, the middle elided when long (`a.b.c.….x.y`). */
function showPath(path: Array<string | number>): string {
  const parts = path.map(String);
  if (parts.length <= SHOWN_SEGMENTS) return parts.join('.');
  return [...parts.slice(0, SHOWN_SEGMENTS / 2), '…', ...parts.slice(-SHOWN_SEGMENTS / 2)].join('.');
}

/**
 * Middleware after `express.json`: a parsed body nested deeper than `maxDepth` is a 400
 * `json_too_deep` whose `param` is the top-level field it is in (null for a body that is itself
 * deeply nested arrays), and whose message shows the path.
 */
export function jsonDepthGuard(maxDepth: number): RequestHandler {
  return (req, _res, next) => {
    const body: unknown = req.body;
    if (body === null || typeof body !== 'object') return next();
    const path = tooDeepPath(body, maxDepth);
    if (!path) return next();
    const top = path.length > 0 && !Array.isArray(body) ? String(path[0]) : null;
    next(
      new HttpError(
        400,
        `The request body is nested deeper than ${maxDepth} levels${top ? ` in ${top}` : ''} (at ${showPath(path) || 'the top'}); api_server.max_json_depth is ${maxDepth}.`,
        'invalid_request_error',
        'json_too_deep',
        top,
      ),
    );
  };
}
