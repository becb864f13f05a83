/**
 * How `hermes chat` prints session events: one line per event header, the
 * reply text indented below it.
 */
import { cachedNote } from '../scheduler/model-spend.ts';
import type { SessionEvent } from '../scheduler/session/session-store.ts';

function clock(ms: number): string {
  return new Date(ms).toISOString().slice(11, 19);
}

/** Epoch ms of a Redis stream id. */
export function eventTime(id: string): number {
  return Number(id.split('-')[0]);
}

/** `, worker pid 123` from the event's `pid`, or nothing when the event has none (never "pid ?"). */
function workerPid(d: Record<string, unknown>): string {
  return typeof d.pid === 'number' || (typeof d.pid === 'string' && d.pid !== '') ? `, worker pid ${d.pid}` : '';
}

/** Render one event (the chat client prints it through `terminal-text.ts`); `undefined` for events a user need not see. */
export function formatEvent(event: SessionEvent): string | undefined {
  const d = event.data;
  const at = clock(eventTime(event.id));
  const indent = (text: unknown) =>
    String(text ?? '')
      .split('\n')
      .map((l) => `    ${l}`)
      .join('\n');
  switch (event.type) {
    case 'tick.started':
      // Claimed ahead of its due time (worker/loop/claim-ahead.ts): its turn starts at the due time.
      if (d.claimedAhead === true)
        return `[${at}] ⏰ ${d.kind} tick #${d.tick} claimed, starts at its due time ${clock(Number(d.dueAt))}${workerPid(d)}`;
      return `[${at}] ⏰ ${d.kind} tick #${d.tick} started (due ${clock(Number(d.dueAt))}, late ${d.latenessMs} ms${workerPid(d)})`;
    case 'reply': {
      const runner = d.runner === 'command' ? 'command' : 'agent';
      const who =
        d.source === 'message'
          ? 'agent'
          : d.source === 'goal'
            ? `agent · goal turn #${d.tick}`
            : d.source === 'cron'
              ? cronRunLabel(d)
              : `${runner} · ${d.kind ?? d.source} tick #${d.tick}`;
      const outcome = d.outcome && d.outcome !== 'continue' ? ` → ${d.outcome}${d.reason ? `: ${d.reason}` : ''}` : '';
      const quiet = d.silent ? ' · silent, not sent' : '';
      return `[${at}] ${who}${workerPid(d) ? ` (${workerPid(d).slice(2)})` : ''}${spendText(d.spend)}${quiet}${outcome}\n${indent(d.text === '' ? '(empty reply)' : d.text)}`;
    }
    case 'tick.unchanged':
      return `[${at}] ${d.kind} tick #${d.tick}: watch unchanged, no model call`;
    case 'context.compacted':
      return (
        `[${at}] context compacted for ${d.model}: ${Number(d.beforeTokens).toLocaleString('en-US')} → ${Number(d.afterTokens).toLocaleString('en-US')} tokens` +
        ` (${[d.elided ? `${d.elided} tool results stubbed` : '', d.summarised ? `${d.summarised} messages ${d.summaryError ? 'elided (summary failed)' : 'summarised'}` : '', d.cut ? `${d.cut} cut` : '', d.dropped ? `${d.dropped} dropped` : ''].filter(Boolean).join(', ')})`
      );
    case 'model.called':
      return undefined; // summed on the turn's reply line
    case 'model.refused':
      return `[${at}] ${d.model} refused the request for length (${d.provider}, ${d.status}): window now ${Number(d.windowTokens).toLocaleString('en-US')} tokens (${d.how === 'stated' ? 'as it said' : 'halved'}); sent again, smaller`;
    case 'model.skipped':
      return undefined; // its breaker's opening was told once
    case 'model.breaker':
      return d.state === 'open'
        ? `[${at}] circuit breaker of ${d.model} opened after ${d.failures} failed calls in a row: calls skip it until ${clock(Number(d.probeAt))}, then one probes it`
        : `[${at}] circuit breaker of ${d.model} closed: it answers again`;
    case 'tick.failed':
      return `[${at}] ✗ ${d.kind} tick #${d.tick} failed: ${d.error}`;
    case 'notice':
      return `[${at}] ${d.text}`;
    case 'input.set_aside':
      // The chat's notice, and for the operator what failed (worker/chat/input-failure.ts).
      return `[${at}] ✗ ${d.text}\n${indent(`error: ${String(d.error)}`)}`;
    case 'error':
      return `[${at}] error: ${d.text}`;
    case 'delivery':
      // A reply that reached its chat needs no line; one that did not is shown with the reason.
      if (d.status === 'sent') return undefined;
      // A webhook names its address (`target`, its origin only); a platform its chat.
      return `[${at}] ✗ reply not sent to ${typeof d.target === 'string' ? d.target : `${d.platform}:${d.chatId}`}: ${d.error} (${d.willRetry ? `attempt ${d.attempts}, will retry` : 'not retried'})`;
    case 'user':
      return `[${at}] you: ${d.text}`;
    case 'tool.called':
      return undefined; // shown once, with its outcome, on tool.result
    case 'tool.result':
      return formatToolLine(at, d);
    default:
      return `[${at}] ${event.type}: ${JSON.stringify(d)}`;
  }
}

/**
 * A cron run's output on the job's stream `cron:<id>` (its `local` target): `cron disk · script run
 * (schedule)`. Cron runs are no ticks and have no tick number; events written before they carried
 * `name` and `runner` show the job id and "run".
 */
function cronRunLabel(d: Record<string, unknown>): string {
  const kind = d.runner === 'script' ? 'script run' : d.runner === 'agent' ? 'agent turn' : 'run';
  return `cron ${String(d.name ?? d.job_id ?? '')} · ${kind}${d.trigger ? ` (${String(d.trigger)})` : ''}`;
}

/** ` · 1,234 tokens in (1,024 cached), 56 out` from a reply's `spend`, or nothing. */
function spendText(spend: unknown): string {
  const s = spend as { inputTokens?: number; outputTokens?: number; cachedTokens?: number; estimated?: boolean } | undefined;
  if (!s || typeof s.inputTokens !== 'number') return '';
  const approx = s.estimated ? '~' : '';
  return ` · ${approx}${s.inputTokens.toLocaleString('en-US')} tokens in${cachedNote(s)}, ${approx}${(s.outputTokens ?? 0).toLocaleString('en-US')} out`;
}

/** Characters of a tool call's arguments shown on its line. */
export const TOOL_ARGS_SHOWN_CHARS = 60;

/** One line per tool call: name, arguments cut short, duration, then bytes or the error. */
function formatToolLine(at: string, d: Record<string, unknown>): string {
  const raw = String(d.arguments ?? '');
  const args = raw.length > TOOL_ARGS_SHOWN_CHARS ? `${raw.slice(0, TOOL_ARGS_SHOWN_CHARS - 1)}…` : raw;
  const who = d.judge ? ` (${d.judge} judge)` : '';
  const outcome = d.error ? `error: ${String(d.error)}` : `${d.bytes} bytes${d.truncated ? ' (cut)' : ''}`;
  return `[${at}] 🔧 ${d.name}${args && args !== '{}' ? ` ${args}` : ''}${who} · ${d.ms} ms · ${outcome}`;
}
