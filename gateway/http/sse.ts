/**
 * Server-sent events over an express response: headers, `id:`/`event:`/`data:`
 * frames, a keep-alive comment, and the client's disconnect as an AbortSignal.
 *
 * Back-pressure policy: events are pushed to a stream as they are read
 * (gateway/stream-fanout.ts), so what a client does not read piles up in the
 * gateway (`res.writableLength`: Node's buffer of the response and its socket,
 * once the kernel's socket buffers are full). Past `maxBufferedBytes`
 * (`api_server.sse_max_buffered_bytes`) the client is disconnected and that is
 * logged at info, once per stream; nothing is lost to it, since a client
 * that reconnects with `Last-Event-ID` reads the rest from Redis.
 */
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import { isStreamId } from '../stream-fanout.ts';
import { HttpError } from './errors.ts';
import { eventWire } from '../../scheduler/session/event-wire.ts';
import type { SessionEvent } from '../../scheduler/session/session-store.ts';

/** One event: `data` is JSON-encoded unless it is a string. */
export interface SseEvent {
  id?: string;
  event?: string;
  data: unknown;
}

/** An open event stream. */
export interface SseStream {
  /** Aborted when the client disconnects or `close()` is called. */
  readonly signal: AbortSignal;
  /** Send one event. */
  send(event: SseEvent): void;
  /** Send a frame made by `encodeSse` (one encoding shared by every client of a stream). */
  sendFrame(frame: Buffer): void;
  /** End the stream (idempotent). */
  close(): void;
}

/** Keep-alive comment interval: proxies drop idle connections after ~60 s. */
export const SSE_KEEPALIVE_MS = 15_000;

/**
 * One event as its SSE frame (`id:`, `event:`, a `data:` line per line of the data, blank line).
 * A line ends at CR LF, LF or a lone CR, as an EventSource parses it: data is cut at all three (a
 * reply holding a bare CR cannot start a forged `id:` or `event:` line), and `id` and `event`,
 * one line each, lose any line break.
 */
export function encodeSse({ id, event, data }: SseEvent): Buffer {
  let frame = '';
  if (id !== undefined) frame += `id: ${oneLine(id)}\n`;
  if (event !== undefined) frame += `event: ${oneLine(event)}\n`;
  const text = typeof data === 'string' ? data : JSON.stringify(data);
  for (const line of text.split(SSE_LINE_END)) frame += `data: ${line}\n`;
  return Buffer.from(`${frame}\n`, 'utf8');
}

const SSE_LINE_END = /\r\n|\r|\n/;

function oneLine(value: string | number): string {
  return String(value).replace(/[\r\n]/g, '');
}

/**
 * Frames of stream entries, encoded once per entry: every client of a stream is handed the
 * same entry objects by the shared reader (gateway/stream-fanout.ts), so ten clients share one
 * Buffer per event, also while it waits unsent in their sockets.
 */
const entryFrames = new WeakMap<object, Buffer>();

/**
 * The frame of a stream entry (`id`, `type` → `event:`, `data`), cached per entry object. The data go out
 * in their wire form (`eventWire`: every key snake_case), whatever names the stream keeps in Redis.
 */
export function entryFrame(entry: SessionEvent): Buffer {
  let frame = entryFrames.get(entry);
  if (!frame) {
    const wire = eventWire(entry);
    entryFrames.set(entry, (frame = encodeSse({ id: wire.id, event: wire.type, data: wire.data })));
  }
  return frame;
}

/** The `Last-Event-ID` header, or `fallback`. */
export function lastEventId(req: Request, fallback: string): string {
  const v = req.get('last-event-id');
  return v && v.trim() !== '' ? v.trim() : fallback;
}

/**
 * The event id a stream is read after: the `Last-Event-ID` header, else `fallback`; `$` (from the stream's
 * end) only when `end` allows it.
 * @throws HttpError 400 `invalid_event_id` (param `Last-Event-ID`) for anything else
 */
export function readAfterId(req: Request, fallback: string, end: 'allowed' | 'refused' = 'refused'): string {
  const after = lastEventId(req, fallback);
  if ((after === '$' && end === 'allowed') || isStreamId(after)) return after;
  throw new HttpError(
    400,
    'Last-Event-ID must be an event id like 1700000000000-0.',
    'invalid_request_error',
    'invalid_event_id',
    'Last-Event-ID',
  );
}

/** Settings of one stream. */
export interface SseOptions {
  /** Called once when the stream ends (client gone, `close()`, or dropped for not reading). */
  onClose?: () => void;
  /** Unsent bytes allowed before the client is disconnected (`api_server.sse_max_buffered_bytes`); unset = no bound. */
  maxBufferedBytes?: number;
  /** Where a dropped client is logged (info). */
  log?: Logger;
}

/** Start an SSE answer (status 200) and return the stream. */
export function openSse(req: Request, res: Response, options: SseOptions = {}): SseStream {
  const { onClose, maxBufferedBytes, log } = options;
  const controller = new AbortController();
  res.status(200).set({
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-cache, no-transform',
    Connection: 'keep-alive',
    'X-Accel-Buffering': 'no',
  });
  res.flushHeaders();
  const keepAlive = setInterval(() => {
    if (!res.writableEnded) write(': keep-alive\n\n');
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
  /** Write, then drop a client that leaves more than the bound unread. */
  function write(text: string | Buffer): void {
    res.write(text);
    if (maxBufferedBytes === undefined || closed || res.writableLength <= maxBufferedBytes) return;
    log?.info(
      { path: req.originalUrl, bufferedBytes: res.writableLength, limit: maxBufferedBytes },
      'event stream client is not reading: disconnected (api_server.sse_max_buffered_bytes)',
    );
    res.destroy();
    finish();
  }
  return {
    signal: controller.signal,
    send(event) {
      if (closed || res.writableEnded) return;
      write(encodeSse(event));
    },
    sendFrame(frame) {
      if (closed || res.writableEnded) return;
      write(frame);
    },
    close() {
      if (!res.writableEnded) res.end();
      finish();
    },
  };
}
