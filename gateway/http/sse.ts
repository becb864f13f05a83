/**
 * Server-sent events over an express response: headers, `id:`/`event:`/`data:`
 * frames, a keep-alive comment, and the client's disconnect as an AbortSignal.
 */
import type { Request, Response } from 'express';

/** An open event stream. */
export interface SseStream {
  /** Aborted when the client disconnects or `close()` is called. */
  readonly signal: AbortSignal;
  /** Send one event; `data` is JSON-encoded unless it is a string. */
  send(event: { id?: string; event?: string; data: unknown }): void;
  /** End the stream (idempotent). */
  close(): void;
}

/** Keep-alive comment interval: proxies drop idle connections after ~60 s. */
export const SSE_KEEPALIVE_MS = 15_000;

/** The `Last-Event-ID` header, or `fallback`. */
export function lastEventId(req: Request, fallback: string): string {
  const v = req.get('last-event-id');
  return v && v.trim() !== '' ? v.trim() : fallback;
}

/** Start an SSE answer (status 200) and return the stream. */
export function openSse(req: Request, res: Response, onClose?: () => void): SseStream {
  const controller = new AbortController();
  res.status(200).set({
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-cache, no-transform',
    Connection: 'keep-alive',
    'X-Accel-Buffering': 'no',
  });
  res.flushHeaders();
  const keepAlive = setInterval(() => {
    if (!res.writableEnded) res.write(': keep-alive\n\n');
  }, SSE_KEEPALIVE_MS);
  keepAlive.unref();
  let closed = false;
  const finish = () => {
    if (closed) return;
    closed = true;
    clearInterval(keepAlive);
    controller.abort();
    onClose?.();
  };
  res.on('close', finish);
  req.on('aborted', finish);
  return {
    signal: controller.signal,
    send({ id, event, data }) {
      if (closed || res.writableEnded) return;
      let frame = '';
      if (id !== undefined) frame += `id: ${id}\n`;
      if (event !== undefined) frame += `event: ${event}\n`;
      const text = typeof data === 'string' ? data : JSON.stringify(data);
      for (const line of text.split('\n')) frame += `data: ${line}\n`;
      res.write(`${frame}\n`);
    },
    close() {
      if (!res.writableEnded) res.end();
      finish();
    },
  };
}
