/**
 * How the console shows times, durations and token counts. A time still to come is a
 * `countdown` element the page's script keeps current (`static/console.js`).
 */
import { formatInZone, isoUtc } from '../../scheduler/cron/cron-engine.ts';
import { formatSeconds } from '../../scheduler/interval.ts';
import { totalTokens, type SpendTotals } from '../../scheduler/model-spend.ts';
import { html, type Html } from './html.ts';

/** `in 4m 10s` / `due now` / `3m ago`, as the page's script writes it too. */
export function relative(ms: number, now: number): string {
  const s = Math.round((ms - now) / 1000);
  if (s <= 0 && s > -2) return 'due now';
  return s > 0 ? `in ${formatSeconds(s)}` : `${formatSeconds(-s)} ago`;
}

/** A time to come, counted down live in the page: `<time data-due>` with a relative text. */
export function countdown(ms: number, now: number): Html {
  return html`<time class="countdown" datetime="${isoUtc(ms)}" data-due="${ms}" title="${isoUtc(ms)}">${relative(ms, now)}</time>`;
}

/** A time in a zone with its ISO form as a tooltip. */
export function at(ms: number, tz: string): Html {
  return html`<time datetime="${isoUtc(ms)}" title="${isoUtc(ms)}">${formatInZone(ms, tz)}</time>`;
}

/** Milliseconds as `120 ms`, `4.2 s`, `3m 10s`. */
export function duration(ms: number): string {
  if (Math.abs(ms) < 1000) return `${Math.round(ms)} ms`;
  if (Math.abs(ms) < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return formatSeconds(Math.round(ms / 1000));
}

/** Tokens spent: `1,234 tokens (5 calls, 1,024 cached)`, or `—` before the first model call. */
export function tokens(t: SpendTotals | undefined): string {
  if (!t || t.calls === 0) return '—';
  const cached = t.cachedTokens ? `, ${t.cachedTokens.toLocaleString('en-US')} cached` : '';
  return `${totalTokens(t).toLocaleString('en-US')} tokens (${t.calls} call${t.calls === 1 ? '' : 's'}${cached})`;
}
