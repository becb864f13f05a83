/**
 * A session's events and transcript messages as HTML (the session page and its live stream):
 * user messages, ticks with their number, tool calls (name, arguments cut short, duration, size
 * or error), replies and notices. Events nobody needs to read (`model.called`, `tool.called`, a
 * delivery that succeeded) render as nothing.
 */
import type { SessionEvent, TranscriptMessage } from '../../scheduler/session/session-store.ts';
import { isoUtc } from '../../scheduler/cron/cron-engine.ts';
import { duration } from './format.ts';
import { clip } from '../../scheduler/text/clip.ts';
import { eventWire } from '../../scheduler/session/event-wire.ts';
import { html, type Html } from './html.ts';

/** Characters of a tool call's arguments shown. */
const ARGS_SHOWN = 120;
/** Characters of a tool result shown in the transcript. */
const TOOL_RESULT_SHOWN = 400;

const stamp = (ms: number) => html`<time datetime="${isoUtc(ms)}">${isoUtc(ms).slice(11, 19)}</time>`;

function item(id: string, kind: string, ms: number, head: Html | string, body?: string): Html {
  return html`<li class="ev ev-${kind}" id="ev-${id}" data-id="${id}">${stamp(ms)} <span class="head">${head}</span>${body !== undefined ? html`<pre class="text">${body}</pre>` : ''}</li>`;
}

/** Who a reply is from: the agent, a tick with its number, a goal turn, a cron run. */
function replyLabel(d: Record<string, unknown>): string {
  if (d.source === 'message') return 'agent';
  if (d.source === 'goal') return `agent · goal turn #${String(d.tick)}`;
  if (d.source === 'cron') return `cron ${String(d.name ?? d.job_id ?? '')} · ${String(d.trigger ?? 'run')}`;
  const runner = d.runner === 'command' ? 'command' : 'agent';
  return `${runner} · ${String(d.kind ?? d.source)} tick #${String(d.tick)}`;
}

/** One event as a list item, or `undefined` for events not shown. */
export function eventHtml(e: SessionEvent): Html | undefined {
  const d = e.data;
  const ms = Number(e.id.split('-')[0]);
  switch (e.type) {
    case 'user':
      return item(e.id, 'user', ms, `you (${String(d.surface ?? 'chat')})`, String(d.text ?? ''));
    case 'tick.started':
      // Claimed ahead of its due time (worker/loop/claim-ahead.ts): its turn starts at the due time.
      if (d.claimedAhead === true)
        return item(e.id, 'tick', ms, `${String(d.kind)} tick #${String(d.tick)} claimed · starts at its due time`);
      return item(e.id, 'tick', ms, `${String(d.kind)} tick #${String(d.tick)} started · late ${duration(Number(d.latenessMs ?? 0))}`);
    case 'reply': {
      const text = String(d.text ?? '');
      const extra = [d.silent ? 'silent, not sent' : '', d.outcome && d.outcome !== 'continue' ? `→ ${String(d.outcome)}` : '']
        .filter(Boolean)
        .join(' · ');
      return item(e.id, 'reply', ms, `${replyLabel(d)}${extra ? ` · ${extra}` : ''}`, text === '' ? '(empty reply)' : text);
    }
    case 'tick.unchanged':
      return item(e.id, 'tick', ms, `${String(d.kind)} tick #${String(d.tick)}: watch unchanged, no model call`);
    case 'tick.failed':
      return item(e.id, 'error', ms, `✗ ${String(d.kind)} tick #${String(d.tick)} failed`, String(d.error ?? ''));
    case 'error':
      return item(e.id, 'error', ms, 'error', String(d.text ?? ''));
    case 'notice':
      return item(e.id, 'notice', ms, 'notice', String(d.text ?? ''));
    case 'input.set_aside':
      return item(
        e.id,
        'error',
        ms,
        `✗ input set aside after ${String(d.attempts)} tries: ${clip(String(d.error ?? ''), 200)}`,
        String(d.input ?? ''),
      );
    case 'tool.result': {
      const outcome = d.error
        ? `error: ${String(d.error)}`
        : `${duration(Number(d.ms ?? 0))} · ${Number(d.bytes ?? 0).toLocaleString('en-US')} bytes${d.truncated ? ' (cut)' : ''}`;
      return item(e.id, 'tool', ms, `🔧 ${String(d.name)}(${clip(String(d.arguments ?? ''), ARGS_SHOWN)}) · ${outcome}`);
    }
    case 'context.compacted':
      return item(e.id, 'notice', ms, `context compacted for ${String(d.model)}`);
    case 'delivery':
      return d.status === 'sent'
        ? undefined
        : item(
            e.id,
            'error',
            ms,
            `reply not sent to ${typeof d.target === 'string' ? d.target : `${String(d.platform)}:${String(d.chatId)}`}`,
            String(d.error ?? ''),
          );
    case 'model.called':
    case 'tool.called':
      return undefined;
    default:
      // Shown as a client of the API would read it (snake_case, `eventWire`).
      return item(e.id, 'notice', ms, e.type, clip(JSON.stringify(eventWire(e).data), 300));
  }
}

/** One transcript message as a list item (the page's history, before the live events). */
export function messageHtml(m: TranscriptMessage, index: number): Html {
  const id = `t${index}`;
  if (m.role === 'user')
    return item(id, 'user', m.at, `${m.source === 'message' ? 'user' : m.source} (${m.surface ?? 'unknown'})`, m.content);
  if (m.role === 'tool') return item(id, 'tool', m.at, `🔧 result of ${m.name ?? 'tool'}`, clip(m.content, TOOL_RESULT_SHOWN));
  const calls = (m.tool_calls ?? []).map((c) => `${c.name}(${clip(c.arguments, ARGS_SHOWN)})`).join(', ');
  return item(id, 'reply', m.at, calls ? `agent calls ${calls}` : `agent (${m.source})`, m.content === '' && calls ? undefined : m.content);
}
