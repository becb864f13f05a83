/**
 * The SSE frames of every event stream (`encodeSse`): a line ends at CR LF, LF or a lone CR for an
 * EventSource, so text holding any of them stays data of its own event — no forged `id:` or `event:`.
 */
import { describe, expect, it } from 'vitest';
import { encodeSse } from '../gateway/http/sse.ts';

/** The fields of each event in `frame`, parsed as the EventSource specification says (any line end). */
function parseStream(frame: string): Array<Record<string, string>> {
  const events: Array<Record<string, string>> = [];
  let current: Record<string, string> = {};
  for (const line of frame.split(/\r\n|\r|\n/)) {
    if (line === '') {
      if (Object.keys(current).length > 0) events.push(current);
      current = {};
      continue;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    current[field] = field === 'data' && current.data !== undefined ? `${current.data}\n${value}` : value;
  }
  return events;
}

describe('encodeSse', () => {
  it('a reply holding bare CRs stays one event with its own id and type: no forged event, id or type', () => {
    const text = 'innocent reply\r\rid: 9999999999999-0\revent: schedules\rdata: ALL SCHEDULES STOPPED (spoofed)\r\r';
    const events = parseStream(encodeSse({ id: '1-0', event: 'reply', data: text }).toString('utf8'));
    expect(events).toEqual([{ id: '1-0', event: 'reply', data: text.split('\r').join('\n') }]);
  });

  it('CR LF and LF in data are line ends too; an id or type with a line break loses it', () => {
    const events = parseStream(encodeSse({ id: '2-0\nevent: x', event: 'notice\r\nid: 7', data: 'a\r\nb\nc' }).toString('utf8'));
    expect(events).toEqual([{ id: '2-0event: x', event: 'noticeid: 7', data: 'a\nb\nc' }]);
  });
});
