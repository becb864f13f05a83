/** Small HTTP helpers for gateway tests (plain fetch over loopback). */

/** One parsed server-sent event. */
export interface SseFrame {
  id?: string;
  event?: string;
  data: string;
}

/** Parse a complete SSE body into frames (comments dropped). */
export function parseSse(text: string): SseFrame[] {
  const frames: SseFrame[] = [];
  for (const block of text.split(/\n\n/)) {
    const frame: SseFrame = { data: '' };
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':') || line === '') continue;
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
      if (field === 'id') frame.id = value;
      else if (field === 'event') frame.event = value;
      else if (field === 'data') data.push(value);
    }
    if (data.length > 0 || frame.event) {
      frame.data = data.join('\n');
      frames.push(frame);
    }
  }
  return frames;
}

/**
 * Read an SSE response until `until` returns true for a frame, or the stream ends.
 * Aborts the request afterwards.
 */
export async function readSseUntil(
  res: Response,
  until: (f: SseFrame) => boolean,
  controller?: AbortController,
): Promise<SseFrame[]> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  const frames: SseFrame[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, cut + 2);
        buf = buf.slice(cut + 2);
        for (const f of parseSse(block)) {
          frames.push(f);
          if (until(f)) return frames;
        }
      }
    }
  } finally {
    controller?.abort();
    reader.releaseLock();
  }
  return frames;
}

export { waitFor } from './wait-for.ts';

/** The JSON body of a response (awaits the response first when given a promise). */
export async function readJson(res: Response | Promise<Response>): Promise<any> {
  return (await res).json();
}
