/**
 * A session's page (`/ui/sessions/<id>`): its loop, heartbeat and goal with pause, resume and
 * stop buttons; the transcript (kept current from the session's event stream); its set-aside
 * input; the live events (the session's event stream); and a message box whose text is the session's user input (Enter sends, Shift+Enter is a new line; slash commands
 * work as in any chat).
 */
import type { SessionEvent, TranscriptMessage } from '../../scheduler/session/session-store.ts';
import type { SetAsideInput } from '../../scheduler/session/set-aside.ts';
import { isoUtc } from '../../scheduler/cron/cron-engine.ts';
import type { SessionSummary } from '../session-summaries.ts';
import { eventHtml, messageHtml } from './event-html.ts';
import { html, type Html } from './html.ts';
import { CONSOLE_PATH, errorBox, page } from './layout.ts';
import { goalCell, scheduleCell, sessionUrl } from './overview-page.ts';

/** A control button: POSTs to the session's `/<kind>/<action>` and swaps the schedule panel. */
function button(sessionId: string, kind: string, action: string, label: string): Html {
  return html`<button type="button" class="action" data-action="${kind}-${action}" hx-post="${sessionUrl(sessionId)}/${kind}/${action}" hx-target="#schedules" hx-swap="outerHTML">${label}</button>`;
}

/** The schedule panel: loop, heartbeat and goal with their buttons (and an error, when an action failed). */
export function schedulePanel(s: SessionSummary, now: number, error?: string): Html {
  const rows: Html[] = [];
  for (const kind of ['loop', 'heartbeat'] as const) {
    const state = s[kind];
    const buttons = state
      ? [
          state.record.status === 'active' ? button(s.id, kind, 'pause', 'Pause') : button(s.id, kind, 'resume', 'Resume'),
          button(s.id, kind, 'stop', 'Stop'),
        ]
      : [];
    rows.push(html`<tr data-kind="${kind}"><th>${kind}</th><td>${scheduleCell(state, now)}</td><td class="buttons">${buttons}</td></tr>`);
  }
  const g = s.goal;
  const goalButtons = g
    ? [
        g.status === 'active' ? button(s.id, 'goal', 'pause', 'Pause') : button(s.id, 'goal', 'resume', 'Resume'),
        button(s.id, 'goal', 'stop', 'Clear'),
      ]
    : [];
  rows.push(html`<tr data-kind="goal"><th>goal</th><td>${goalCell(g)}</td><td class="buttons">${goalButtons}</td></tr>`);
  return html`<section id="schedules"><table class="schedules">${rows}</table>${error ? errorBox(error) : ''}</section>`;
}

/** The message box (its answer: an empty box again, or the error). */
export function messageForm(sessionId: string, error?: string): Html {
  return html`<form id="send" class="send" hx-post="${sessionUrl(sessionId)}/messages" hx-swap="outerHTML">
<textarea name="text" rows="3" placeholder="Message, or /loop 10m …, /goal …, /stop — Enter sends, Shift+Enter is a new line" aria-label="message" required></textarea>
<button type="submit">Send</button>${error ? errorBox(error) : ''}
</form>`;
}

/**
 * The session's set-aside input (scheduler/session/set-aside.ts), newest first: when, after how many
 * tries, the last error and the input as sent; nothing when there is none.
 */
export function setAsidePanel(inputs: SetAsideInput[]): Html | string {
  if (inputs.length === 0) return '';
  const rows = inputs.map(
    (i) =>
      html`<li class="ev ev-error" data-occurrence="${i.occurrenceId}"><time datetime="${isoUtc(i.setAsideAt)}">${isoUtc(i.setAsideAt)}</time> <span class="head">set aside after ${i.attempts} tries: ${i.error}</span><pre class="text">${i.text}</pre></li>`,
  );
  return html`<section id="set-aside"><h2>Set aside</h2><p class="none">Input that failed on every try; the session went on without it (also <a href="/api/sessions/${encodeURIComponent(inputs[0]!.sessionId)}/set-aside">/api/sessions/${inputs[0]!.sessionId}/set-aside</a>).</p><ol class="events">${rows}</ol></section>`;
}

/** A page of the transcript as `SessionStore.transcriptPage` reads it. */
export interface TranscriptPage {
  start: number;
  messages: TranscriptMessage[];
  total: number;
}

/**
 * The transcript panel: the last messages, and where the older ones are. Re-sent whole over the
 * page's stream when a turn changed the transcript (console-router.ts), so a reply shows in it
 * without a reload.
 */
export function transcriptSection(sessionId: string, transcript: TranscriptPage): Html {
  const older =
    transcript.start > 0
      ? html`<p class="none">${transcript.start} older messages: <a href="/api/sessions/${encodeURIComponent(sessionId)}/transcript?before=${transcript.start}">/api/sessions/${sessionId}/transcript</a></p>`
      : '';
  return html`<section id="transcript"><h2>Transcript</h2>${older}${transcript.messages.length === 0 ? html`<p class="none">No messages yet.</p>` : html`<ol class="events transcript">${transcript.messages.map((m, i) => messageHtml(m, transcript.start + i))}</ol>`}</section>`;
}

/** What tells one transcript page from another: a new message, or a compaction that rewrote it. */
export function transcriptMark(t: TranscriptPage): string {
  const last = t.messages.at(-1);
  return `${t.start}:${t.total}:${last ? `${last.at}:${last.role}:${last.content.length}` : ''}`;
}

/** The whole page; the live list starts after `lastEventId`; `scheduleForm` sets a loop or heartbeat (schedule-form.ts). */
export function sessionPage(
  s: SessionSummary,
  transcript: TranscriptPage,
  recent: SessionEvent[],
  lastEventId: string,
  now: number,
  setAside: SetAsideInput[] = [],
  scheduleForm?: Html,
): Html {
  // The transcript's mark: the stream re-sends the panel when the transcript no longer matches it.
  const stream = `${sessionUrl(s.id)}/stream?after=${encodeURIComponent(lastEventId)}&transcript=${encodeURIComponent(transcriptMark(transcript))}`;
  return page(
    `Session ${s.id}`,
    html`<h1>Session <code>${s.id}</code></h1>
<div hx-ext="sse" sse-connect="${stream}">
<div sse-swap="schedules" hx-target="#schedules" hx-swap="outerHTML">${schedulePanel(s, now)}</div>
${scheduleForm ?? ''}
<div sse-swap="transcript" hx-target="#transcript" hx-swap="outerHTML">${transcriptSection(s.id, transcript)}</div>
${setAsidePanel(setAside)}
<section><h2>Events</h2><ol class="events live" id="events" sse-swap="event" hx-swap="beforeend">${recent.map(eventHtml)}</ol></section>
</div>
${messageForm(s.id)}
<p class="hint"><a href="${CONSOLE_PATH}">← Overview</a></p>`,
  );
}
