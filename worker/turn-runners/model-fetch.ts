/**
 * The `fetch` under a model target's client: undici's `request` (the HTTP client Node's own `fetch` is built on,
 * without the Fetch standard's request and body machinery), its answer handed back as a `Response`. Why: a worker sends a model call per agent turn from one thread, and at the top of the hour
 * thousands at once; Node's `fetch` costs about a third more CPU a call (docs/BENCHMARKS.md, "Top of the hour").
 *
 * What it keeps of `fetch`: the method, headers and body as the client gives them (a string or bytes: the
 * Chat Completions client sends JSON), the abort signal (a request or a body being read fails with an
 * `AbortError`), redirects followed (up to 20, as `fetch` does), an answer's body streamed as it arrives.
 */
import { Readable } from 'node:stream';
import { Agent, interceptors, request, type Dispatcher } from 'undici';

let dispatcher: Dispatcher | undefined;

/**
 * The model calls' connection pools (one per origin, connections kept alive: undici's defaults, as Node's `fetch`
 * has them) with redirects followed. Its own, not the process's global dispatcher: that one belongs to the
 * `undici` inside Node, of another major version.
 */
function redirecting(): Dispatcher {
  return (dispatcher ??= new Agent().compose(interceptors.redirect({ maxRedirections: 20 })));
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
const NO_BODY = new Set([101, 103, 204, 205, 304]);

/** A `fetch` over undici's `request` (see the header). */
export const modelFetch: typeof fetch = async (input, init) => {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  const body = init?.body;
  if (body != null && typeof body !== 'string' && !(body instanceof Uint8Array) && !(body instanceof ArrayBuffer))
    return await fetch(input, init); // a stream or form: the standard's own handling
  const answer = await request(url, {
    method: init?.method ?? 'GET',
    headers: plainHeaders(init?.headers),
    body: body instanceof ArrayBuffer ? new Uint8Array(body) : (body ?? undefined),
    signal: init?.signal ?? undefined,
    dispatcher: redirecting(),
  });
  const headers = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else if (value !== undefined) headers.append(name, value);
  }
  if (NO_BODY.has(answer.statusCode)) {
    answer.body.resume();
    return new Response(null, { status: answer.statusCode, headers });
  }
  return new Response(Readable.toWeb(answer.body) as ReadableStream<Uint8Array>, { status: answer.statusCode, headers });
};
