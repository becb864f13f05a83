/**
 * The `fetch` under a model target's client: undici's `request` (the HTTP client Node's own `fetch` is built on,
 * without the Fetch standard's request and body machinery), its answer handed back as a `Response`. Why: a worker
 * sends a model call per agent turn from one thread, and at the top of the hour thousands at once; through this
 * 2,000 of them start ~0.6 s sooner at p99 than through Node's `fetch` (the figures: docs/BENCHMARKS.md, "Top of
 * the hour").
 *
 * What it keeps of `fetch`: the method, headers and body as the client gives them (a string or bytes: the Chat
 * Completions client sends JSON; any other body goes through `fetch` itself), the abort signal (a request or a
 * body being read fails with the signal's `AbortError`), redirects followed (at most 20, then an error, as `fetch`
 * does), the status and its text, an answer's body streamed as it arrives. Answers are asked for uncompressed
 * (`accept-encoding: identity`: undici's decoder is experimental and warns on stderr, and a completion is small or
 * streamed). A status no `Response` can carry (outside 200–599) is an error, as a connection that failed.
 */
import { Agent, interceptors, request, type Dispatcher } from 'undici';

let dispatcher: Dispatcher | undefined;

/** Redirects followed (`fetch`'s limit); one more is an error. */
const MAX_REDIRECTIONS = 20;

/** The statuses the redirect interceptor follows (with a `location`). */
const REDIRECTS = new Set([300, 301, 302, 303, 307, 308]);

/**
 * The model calls' connection pools (one per origin, connections kept alive: undici's defaults, as Node's `fetch`
 * has them) with redirects followed. Its own, not the process's global dispatcher: that one
 * belongs to the `undici` inside Node, of another major version.
 */
function modelDispatcher(): Dispatcher {
  return (dispatcher ??= new Agent().compose(interceptors.redirect({ maxRedirections: MAX_REDIRECTIONS })));
}

/** Headers of any `HeadersInit` shape as a plain object. */
function plainHeaders(headers: RequestInit['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  if (!headers) return out;
  const pairs = headers instanceof Headers || Array.isArray(headers) ? headers : Object.entries(headers);
  for (const [name, value] of pairs) out[name.toLowerCase()] = typeof value === 'string' ? value : value.join(', ');
  return out;
}

/** Statuses whose answer has no body (a `Response` refuses one). */
const NO_BODY = new Set([204, 205, 304]);

/**
 * A `fetch` over undici's `request` (see the header).
 * @throws Error when an answer redirects more than 20 times or carries a status outside 200–599 (the client reads
 *   either as a connection error); the signal's `AbortError` when the request is aborted; undici's errors when the
 *   server cannot be reached or times out
 */
export const modelFetch: typeof fetch = async (input, init) => {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  const body = init?.body;
  if (body != null && typeof body !== 'string' && !(body instanceof Uint8Array) && !(body instanceof ArrayBuffer))
    return await fetch(input, init); // a stream, form or blob: the standard's own handling (its content type)
  const sent = plainHeaders(init?.headers);
  sent['accept-encoding'] ??= 'identity';
  const answer = await request(url, {
    method: init?.method ?? 'GET',
    headers: sent,
    body: body instanceof ArrayBuffer ? new Uint8Array(body) : (body ?? undefined),
    signal: init?.signal ?? undefined,
    dispatcher: modelDispatcher(),
  });
  const headers = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else if (value !== undefined) headers.append(name, value);
  }
  const status = { status: answer.statusCode, statusText: answer.statusText, headers };
  const redirectedOn = REDIRECTS.has(answer.statusCode) && answer.headers.location !== undefined;
  if (redirectedOn || answer.statusCode < 200 || answer.statusCode > 599) {
    answer.body.dump().catch(() => {}); // read off (a little) or closed: the connection is let go either way
    throw new Error(
      redirectedOn
        ? `${url} redirected more than ${MAX_REDIRECTIONS} times`
        : `${url} answered with HTTP status ${answer.statusCode}, which is no answer of HTTP's`,
    );
  }
  if (NO_BODY.has(answer.statusCode)) {
    answer.body.dump().catch(() => {});
    return new Response(null, status);
  }
  // Pulled as read, and a cancel (the client's, of an answer it retries or a stream it stops) ends the request.
  return new Response(ReadableStream.from<Uint8Array>(answer.body), status);
};
