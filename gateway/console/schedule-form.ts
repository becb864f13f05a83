/**
 * The session page's form that sets a loop or a heartbeat: kind, interval (empty: a loop paces
 * itself), prompt and a loop's overlap (`scheduler/loop/loop-overlap.ts`), with a live preview of the cadence — the cron form's preview (cron-page.ts
 * `previewHtml`), fed by the interval parsers the set itself uses, so the preview refuses what
 * the set would. The input is checked as `POST /api/schedules` checks it (http/schedule-spec.ts)
 * and set through the same `LoopService` on the surface `web`: an agent turn under what
 * `tools.allow_from` grants `web`, never a command turn.
 */
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { ScheduleInputError } from '../../scheduler/errors/schedule-input-error.ts';
import { formatSeconds } from '../../scheduler/interval.ts';
import { parseHeartbeatInterval } from '../../scheduler/loop/heartbeat-command.ts';
import { parseLoopInterval } from '../../scheduler/loop/loop-command.ts';
import type { LoopSpec } from '../../scheduler/loop/loop-service.ts';
import type { LoopKind } from '../../scheduler/tick/tick-kind.ts';
import { heartbeatSpec, loopSpecFromFields, withOverlap } from '../http/schedule-spec.ts';
import { previewHtml } from './cron-page.ts';
import { html, type Html } from './html.ts';
import { errorBox } from './layout.ts';
import { sessionUrl } from './overview-page.ts';

/** The overlap select's choices (`scheduler/loop/loop-overlap.ts`). */
const OVERLAP_CHOICES = [
  ['queue', 'waits, then runs (queue)'],
  ['skip', 'is skipped (skip)'],
  ['cancel_other', 'cancels the running one (cancel_other)'],
] as const;

/** Ticks shown in the preview of a fixed cadence. */
const TICKS_SHOWN = 5;

/** The form's fields as typed. */
export interface ScheduleFormValues {
  kind?: string;
  interval?: string;
  prompt?: string;
  /** A loop's `--overlap`; empty or `queue` = the default. */
  overlap?: string;
}

/** The form's fields from a query or a body. */
export function scheduleFormValues(source: Record<string, unknown>): ScheduleFormValues {
  const field = (k: keyof ScheduleFormValues) => (typeof source[k] === 'string' ? source[k] : undefined);
  return { kind: field('kind'), interval: field('interval'), prompt: field('prompt'), overlap: field('overlap') };
}

function kindOf(v: ScheduleFormValues): LoopKind {
  if (v.kind === undefined || v.kind === 'loop') return 'loop';
  if (v.kind === 'heartbeat') return 'heartbeat';
  throw new ScheduleInputError(`"${v.kind}" is not a schedule of a session; set a loop or a heartbeat.`, { field: 'kind' });
}

/**
 * The interval in seconds, `null` for a self-paced loop.
 * @throws ScheduleInputError as `/loop` and `/heartbeat` word it (units, minimum, maximum)
 */
function intervalOf(kind: LoopKind, text: string | undefined, config: HermesConfig): number | null {
  if (!text?.trim()) {
    if (kind === 'loop') return null;
    throw new ScheduleInputError('A heartbeat needs an interval, e.g. 30m.', { field: 'interval' });
  }
  return kind === 'loop'
    ? parseLoopInterval(text, { minIntervalSeconds: config.loops.min_interval_seconds })
    : parseHeartbeatInterval(text, { minIntervalSeconds: config.heartbeat.min_interval_seconds });
}

/**
 * What the form asks to set.
 * @throws ScheduleInputError or HttpError (400) naming what is wrong; nothing is set
 */
export function scheduleFormSpec(v: ScheduleFormValues, config: HermesConfig): { kind: LoopKind; spec: LoopSpec } {
  const kind = kindOf(v);
  const seconds = intervalOf(kind, v.interval, config);
  const prompt = v.prompt ?? '';
  const spec =
    seconds === null
      ? loopSpecFromFields(null, prompt, {}, config)
      : kind === 'loop'
        ? loopSpecFromFields(seconds, prompt, {}, config)
        : heartbeatSpec(seconds, prompt, {}, config);
  // A heartbeat queues (the select is a loop's); so does a self-paced loop, whose ticks never overlap.
  const overlap = kind === 'loop' && seconds !== null && v.overlap ? v.overlap : undefined;
  return { kind, spec: overlap ? withOverlap(spec, overlap) : spec };
}

/**
 * The preview of the cadence as typed: the first tick now, then one every interval (a fixed
 * cadence runs at its rate from the set); for a self-paced loop, the range its delays keep to.
 */
export function cadencePreview(v: ScheduleFormValues, config: HermesConfig, tz: string, now: number): Html {
  let seconds: number | null;
  try {
    seconds = intervalOf(kindOf(v), v.interval, config);
  } catch (err) {
    if (err instanceof ScheduleInputError) return previewHtml({ error: err.message }, now);
    throw err;
  }
  if (seconds === null) {
    const { self_paced_floor_seconds: floor, self_paced_ceiling_seconds: ceiling } = config.loops;
    return html`<div id="preview" class="preview"><p class="description">self-paced: the first tick now, then each reply picks the next delay, from ${formatSeconds(floor)} to ${formatSeconds(ceiling)}</p></div>`;
  }
  const every = `every ${formatSeconds(seconds)}`;
  const times = Array.from({ length: TICKS_SHOWN }, (_, k) => now + k * seconds * 1000);
  return previewHtml(
    {
      schedule: { kind: 'interval', expression: every, display: `${every}, the first tick now`, everyMs: seconds * 1000, anchorMs: now },
      tz,
      fromMs: now,
      times,
    },
    now,
  );
}

/** The form (its answer: the form again, emptied after a set, or with the error and what was typed). */
export function scheduleForm(sessionId: string, values: ScheduleFormValues, preview: Html, error?: string): Html {
  const kind = values.kind === 'heartbeat' ? 'heartbeat' : 'loop';
  const url = `${sessionUrl(sessionId)}/schedule`;
  const live = html`hx-get="${url}/preview" hx-target="#preview" hx-swap="outerHTML" hx-include="#schedule-form [name=kind], #schedule-form [name=interval]"`;
  return html`<form id="schedule-form" class="schedule-form" hx-post="${url}" hx-swap="outerHTML">
<h2>Set a loop or heartbeat</h2>
<label>Kind <select name="kind" ${live} hx-trigger="change">${(['loop', 'heartbeat'] as const).map((k) => html`<option value="${k}"${k === kind ? html` selected` : ''}>${k}</option>`)}</select></label>
<label>Every <input name="interval" value="${values.interval ?? ''}" placeholder="10m, 2h, every 90 minutes — empty: a loop paces itself" autocomplete="off" ${live} hx-trigger="input changed delay:250ms"></label>
${preview}
<label>Prompt <textarea name="prompt" rows="2" required placeholder="what each tick asks">${values.prompt ?? ''}</textarea></label>
<label>A tick due while the last one runs (loops) <select name="overlap">${OVERLAP_CHOICES.map(([v, text]) => html`<option value="${v}"${v === (values.overlap || 'queue') ? html` selected` : ''}>${text}</option>`)}</select></label>
<button type="submit">Set</button>${error ? errorBox(error) : ''}
<p class="hint">It replaces the session's loop or heartbeat; Stop is in the table above. The agent runs it with the tools allowed from the web.</p>
</form>`;
}
