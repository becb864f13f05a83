/**
 * How one model call travels: the `openai` client's own retries (its
 * `maxRetries`: 408, 409, 429, 5xx and connection errors, `Retry-After`
 * honoured), with the waits between attempts made here so that they end with
 * the turn, and the errors after the last attempt sorted for the runner
 * (fall back to another model? compact and try again?).
 *
 * The client sleeps between attempts on a timer no AbortSignal reaches (checked
 * on openai 6.x: `retryRequest` awaits a plain `setTimeout`, then sees the
 * abort only before the next attempt), and it honours any `Retry-After`,
 * however long. So the `fetch` it is given (`retryingFetch`) takes over the
 * wait of every answer it is going to retry: it waits itself, cut by the
 * call's signal, then hands the answer back saying "retry now"
 * (`retry-after-ms: 0`); an answer whose wait would end after the turn's
 * deadline is handed back as final (`x-should-retry: false`), so a fallback
 * model can answer in time instead. After a connection error the client's own
 * backoff (at most 8 s) still runs on its timer; the runner does not wait for
 * it (`untilAborted`), and the client sends nothing more once the signal is
 * aborted.
 *
 * Refusals for length are sorted here too: the `fetch` reads the body of every answer that is not
 * ok and hands it to `readRefusal` (../context/refusal-shapes.ts), so a refusal is understood in
 * whatever words and wherever in the body its server put it — and is never retried, even when a
 * server answers it with a 5xx. The call then ends with a `ContextRefusal` for the runner.
 */
import { APIConnectionError, APIError, type ClientOptions } from 'openai';
import { readRefusal, type RefusalReading } from '../context/refusal-shapes.ts';

/** The client's backoff when an answer names no wait (openai 6.x `calculateDefaultRetryTimeoutMillis`). */
export function defaultRetryWaitMs(retryCount: number): number {
  const seconds = Math.min(0.5 * 2 ** retryCount, 8);
  return seconds * (1 - Math.random() * 0.25) * 1000;
}

/** The wait an answer asks for (`retry-after-ms`, then `retry-after` in seconds or as a date), or undefined. */
export function askedWaitMs(headers: Headers, now = Date.now()): number | undefined {
  const ms = parseFloat(headers.get('retry-after-ms') ?? '');
  if (!Number.isNaN(ms) && ms > 0) return ms;
  const after = headers.get('retry-after');
  if (!after) return undefined;
  const seconds = parseFloat(after);
  if (!Number.isNaN(seconds)) return seconds * 1000;
  const date = Date.parse(after);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Whether the client retries an answer (openai 6.x `shouldRetry`). */
export function clientRetries(res: Response): boolean {
  const header = res.headers.get('x-should-retry');
  if (header === 'true') return true;
  if (header === 'false') return false;
  return res.status === 408 || res.status === 409 || res.status === 429 || res.status >= 500;
}

/** A wait that ends early, rejecting with the signal's reason, when `signal` aborts. */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    };
    const timer = setTimeout(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
      Math.max(0, ms),
    );
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** `promise`, or a rejection with the signal's reason as soon as `signal` aborts (the promise's own end is then ignored). */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  promise.catch(() => {});
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

/** One model call's transport settings. */
export interface CallTransport {
  /** The client's `maxRetries`. */
  maxRetries: number;
  /** When the turn must be over (epoch ms): no wait is started that would end after it. */
  deadlineAt: number;
  /** The call's signal (the turn's): cuts a wait. */
  signal: AbortSignal;
  /** Called for each transient answer (429, 5xx, connection error, …) the client is going to retry. */
  onRetry: () => void;
  /** Called with a refusal for length (the answer is then final). */
  onRefusal?: (refusal: ContextRefusal) => void;
}

/** Where a call's `CallTransport` rides in the `init` of its requests (`callFetchOptions`). */
const CALL_TRANSPORT = Symbol('hermes.callTransport');

/** A call's transport settings and the attempts its requests made so far. */
interface CallState extends CallTransport {
  attempts: number;
}

/**
 * The `fetchOptions` of one call (the client's per-request option, which it passes to its `fetch` as part of
 * each attempt's `init`): they carry the call's transport settings to `retryingFetch`, so one client and
 * its `fetch` serve every call of a model target.
 */
export function callFetchOptions(t: CallTransport): CallFetchOptions {
  const state: CallState = { ...t, attempts: 0 };
  return { [CALL_TRANSPORT]: state } as CallFetchOptions;
}

/** A request's `fetchOptions`, the client's type. */
export type CallFetchOptions = NonNullable<ClientOptions['fetchOptions']>;

/**
 * The `fetch` of a model target's client, over `inner` (the request itself: `modelFetch`): see the header. A
 * request whose `init` carries no call's settings (`callFetchOptions`) is sent as it is. The attempt number comes
 * from the client's `X-Stainless-Retry-Count` header (counted here when a client sends none). Errors: `inner`'s,
 * and the signal's reason when the call is aborted during a wait.
 */
export function retryingFetch(inner: typeof fetch): typeof fetch {
  return async (input, init) => {
    const t = (init as { [CALL_TRANSPORT]?: CallState } | undefined)?.[CALL_TRANSPORT];
    if (!t) return await inner(input, init);
    const sent = init?.headers;
    const retryHeader = (sent instanceof Headers ? sent : new Headers(sent)).get('x-stainless-retry-count');
    const retryCount = Number(retryHeader ?? t.attempts);
    t.attempts += 1;
    const willRetry = retryCount < t.maxRetries;
    let res: Response;
    try {
      res = await inner(input, init);
    } catch (err) {
      if (willRetry && !t.signal.aborted) t.onRetry();
      throw err;
    }
    if (res.ok) return res;
    const text = await res.text().catch(() => '');
    const refusal = contextRefusalOf(res.status, text);
    const headers = new Headers(res.headers);
    if (refusal) {
      t.onRefusal?.(refusal);
      headers.set('x-should-retry', 'false');
      return new Response(text, { status: res.status, statusText: res.statusText, headers });
    }
    if (!willRetry || !clientRetries(res)) return new Response(text, { status: res.status, statusText: res.statusText, headers });
    const wait = askedWaitMs(res.headers) ?? defaultRetryWaitMs(retryCount);
    if (Date.now() + wait >= t.deadlineAt) {
      headers.set('x-should-retry', 'false');
      return new Response(text, { status: res.status, statusText: res.statusText, headers });
    }
    t.onRetry();
    await abortableSleep(wait, t.signal);
    headers.delete('retry-after');
    headers.set('retry-after-ms', '0');
    return new Response(null, { status: res.status, statusText: res.statusText, headers });
  };
}

/** An error after which another model may answer: rate limited, server error, not reached, timed out. */
export function isTransient(err: unknown): boolean {
  if (err instanceof APIConnectionError) return true; // APIConnectionTimeoutError too
  if (err instanceof APIError && typeof err.status === 'number') return err.status === 408 || err.status === 429 || err.status >= 500;
  return false;
}

/**
 * A provider refused a call for length (`readRefusal`): what it said and the numbers it named.
 * `message` is the status and the provider's own message, read from the body wherever the server
 * put it.
 */
export class ContextRefusal extends Error {
  constructor(
    readonly status: number,
    readonly reading: RefusalReading,
    /** The provider's message (at most `SAID_MAX_CHARS`). */
    readonly said: string,
  ) {
    super(`${status} ${said}`);
    this.name = 'ContextRefusal';
  }
}

/** Longest part of a refusal's text kept (in its message and in the learned window's record). */
const SAID_MAX_CHARS = 300;

/**
 * The refusal for length in an answer's status and body text, or undefined. A JSON body is read as
 * JSON (escapes undone, so `\u003e` reads as `>`); its message is found where OpenAI puts it
 * (`error.message`), at the top (vLLM: `message`), as a string (`error`: TGI) or inside a list
 * (Gemini: `[{"error": …}]`).
 */
export function contextRefusalOf(status: number, text: string): ContextRefusal | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const reading = readRefusal({ status, text: parsed === undefined ? text : JSON.stringify(parsed) });
  if (!reading) return undefined;
  const said = (messageIn(parsed) ?? text.trim()) || `status ${status} with no body`;
  return new ContextRefusal(status, reading, said.slice(0, SAID_MAX_CHARS));
}

/** The human message of an error body, or undefined. */
function messageIn(body: unknown): string | undefined {
  if (Array.isArray(body)) return messageIn(body[0]);
  if (!body || typeof body !== 'object') return undefined;
  const b = body as { error?: unknown; message?: unknown };
  if (typeof b.error === 'string') return b.error;
  if (b.error && typeof b.error === 'object') {
    const m = (b.error as { message?: unknown }).message;
    if (typeof m === 'string') return m;
  }
  return typeof b.message === 'string' ? b.message : undefined;
}
