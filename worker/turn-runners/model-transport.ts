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
 */
import { APIConnectionError, APIError } from 'openai';
import { windowFromError } from '../context/context-window.ts';

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
}

/**
 * The `fetch` for one call's client: see the header. The attempt number comes from the client's
 * `X-Stainless-Retry-Count` header (counted here when a client sends none).
 */
export function retryingFetch(t: CallTransport, inner: typeof fetch = fetch): typeof fetch {
  let attempts = 0;
  return async (input, init) => {
    const sent = new Headers(init?.headers);
    const retryCount = Number(sent.get('x-stainless-retry-count') ?? attempts);
    attempts += 1;
    const willRetry = retryCount < t.maxRetries;
    let res: Response;
    try {
      res = await inner(input, init);
    } catch (err) {
      if (willRetry && !t.signal.aborted) t.onRetry();
      throw err;
    }
    if (res.ok || !willRetry || !clientRetries(res)) return res;
    const wait = askedWaitMs(res.headers) ?? defaultRetryWaitMs(retryCount);
    const headers = new Headers(res.headers);
    if (Date.now() + wait >= t.deadlineAt) {
      headers.set('x-should-retry', 'false');
      return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
    }
    t.onRetry();
    await res.body?.cancel().catch(() => {});
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
 * A provider's refusal of a request over its context window (400 `context_length_exceeded`, or a
 * message naming the window), with the window when the message names one; else undefined.
 */
export function contextRefusal(err: unknown): { windowTokens?: number } | undefined {
  if (!(err instanceof APIError) || err.status === undefined || err.status >= 500 || err.status === 429) return undefined;
  const message = err.message;
  const windowTokens = windowFromError(message);
  if (err.code !== 'context_length_exceeded' && windowTokens === undefined) return undefined;
  return windowTokens === undefined ? {} : { windowTokens };
}
