/**
 * The console's charts as inline SVG drawn on the server (no chart library, no script): tick
 * lateness over time and its histogram, turns and failures per hour. Only SVG attributes, no
 * `style`, so the Content-Security-Policy needs no inline styles.
 */
import { isoUtc } from '../../scheduler/cron/cron-engine.ts';
import { duration } from './format.ts';
import { html, type Html } from './html.ts';

/** When a tick or cron run started and how late, ms. */
export interface LatenessPoint {
  at: number;
  latenessMs: number;
  kind: string;
}

/** Turns that ended in one hour, and how many of them failed. */
export interface HourCount {
  hourStart: number;
  turns: number;
  failures: number;
}

const W = 480;
const H = 160;
const PAD = 28;

/** Upper edges of the lateness histogram's buckets, ms (the last is open). */
export const LATENESS_BUCKETS_MS = [50, 250, 1_000, 5_000, 30_000, Infinity];

function frame(title: string, label: string, body: Html): Html {
  return html`<figure class="chart"><figcaption>${title}</figcaption><svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${label}">
<line x1="${PAD}" y1="${H - PAD}" x2="${W - 4}" y2="${H - PAD}" stroke="#888"/><line x1="${PAD}" y1="4" x2="${PAD}" y2="${H - PAD}" stroke="#888"/>${body}</svg></figure>`;
}

/** Lateness of each tick and cron run over the window ending `now` (dots; y is the lateness). */
export function latenessOverTime(points: LatenessPoint[], now: number, windowMs: number): Html {
  const inWindow = points.filter((p) => p.at > now - windowMs);
  const max = Math.max(1, ...inWindow.map((p) => p.latenessMs));
  const x = (t: number) => PAD + ((t - (now - windowMs)) / windowMs) * (W - PAD - 8);
  const y = (v: number) => H - PAD - (Math.max(0, v) / max) * (H - PAD - 8);
  const dots = inWindow.map(
    (p) =>
      html`<circle cx="${x(p.at).toFixed(1)}" cy="${y(p.latenessMs).toFixed(1)}" r="3" class="dot-${p.kind === 'cron' ? 'cron' : 'tick'}"><title>${p.kind} ${isoUtc(p.at)}: ${duration(p.latenessMs)} late</title></circle>`,
  );
  const axis = html`<text x="${PAD + 2}" y="12" class="axis">${duration(max)}</text><text x="${PAD}" y="${H - 8}" class="axis">${Math.round(windowMs / 3_600_000)} h ago</text><text x="${W - 30}" y="${H - 8}" class="axis">now</text>`;
  const empty = inWindow.length === 0 ? html`<text x="${W / 2 - 40}" y="${H / 2}" class="axis">no ticks yet</text>` : '';
  return frame('Lateness over time', `${inWindow.length} ticks and cron runs, up to ${duration(max)} late`, html`${axis}${dots}${empty}`);
}

/** How many ticks and cron runs fell in each lateness bucket. */
export function latenessHistogram(points: LatenessPoint[]): Html {
  const counts = LATENESS_BUCKETS_MS.map(() => 0);
  for (const p of points) counts[LATENESS_BUCKETS_MS.findIndex((edge) => p.latenessMs < edge)]!++;
  const max = Math.max(1, ...counts);
  const bw = (W - PAD - 8) / counts.length;
  const bars = counts.map((c, i) => {
    const h = (c / max) * (H - PAD - 16);
    const label = i === counts.length - 1 ? `≥${duration(LATENESS_BUCKETS_MS[i - 1]!)}` : `<${duration(LATENESS_BUCKETS_MS[i]!)}`;
    const bx = PAD + i * bw + 4;
    return html`<rect x="${bx.toFixed(1)}" y="${(H - PAD - h).toFixed(1)}" width="${(bw - 8).toFixed(1)}" height="${h.toFixed(1)}" class="bar"><title>${label}: ${c}</title></rect><text x="${bx.toFixed(1)}" y="${H - 12}" class="axis">${label}</text><text x="${bx.toFixed(1)}" y="${(H - PAD - h - 3).toFixed(1)}" class="axis">${c}</text>`;
  });
  return frame('Lateness histogram', counts.map((c, i) => `${c} under ${LATENESS_BUCKETS_MS[i]} ms`).join(', '), html`${bars}`);
}

/** Turns per hour (bars) with the failed ones on top in another colour. */
export function turnsPerHour(hours: HourCount[]): Html {
  const max = Math.max(1, ...hours.map((h) => h.turns));
  const bw = (W - PAD - 8) / Math.max(1, hours.length);
  const bars = hours.map((hc, i) => {
    const bx = PAD + i * bw + 1;
    const ht = (hc.turns / max) * (H - PAD - 16);
    const hf = (hc.failures / max) * (H - PAD - 16);
    const hour = isoUtc(hc.hourStart).slice(11, 13);
    const tick = i % 6 === 0 ? html`<text x="${bx.toFixed(1)}" y="${H - 12}" class="axis">${hour}h</text>` : '';
    return html`<rect x="${bx.toFixed(1)}" y="${(H - PAD - ht).toFixed(1)}" width="${(bw - 2).toFixed(1)}" height="${ht.toFixed(1)}" class="bar"><title>${hour}:00 UTC: ${hc.turns} turns, ${hc.failures} failed</title></rect><rect x="${bx.toFixed(1)}" y="${(H - PAD - hf).toFixed(1)}" width="${(bw - 2).toFixed(1)}" height="${hf.toFixed(1)}" class="bar-failed"/>${tick}`;
  });
  const total = hours.reduce((a, h) => a + h.turns, 0);
  const failed = hours.reduce((a, h) => a + h.failures, 0);
  return frame(
    'Turns and failures per hour (UTC)',
    `${total} turns, ${failed} failed`,
    html`<text x="${PAD + 2}" y="12" class="axis">${max}</text>${bars}`,
  );
}
