/**
 * A cron job's page (`/ui/cron/<id>`): its next 10 fire times in its zone, its runs (status,
 * started, lateness, duration, delivery per target, output), run now / pause / resume / edit /
 * remove; and the form that creates or edits a job, whose preview (next fires and the schedule in
 * words) follows the schedule as it is typed — `hermes cron next`'s logic (scheduler/cron/preview.ts).
 */
import { formatInZone, isoUtc } from '../../scheduler/cron/cron-engine.ts';
import type { SchedulePreview } from '../../scheduler/cron/preview.ts';
import { describeCron, scheduleText } from '../../scheduler/cron/describe.ts';
import { OVERLAP_POLICIES, type OverlapPolicy } from '../../scheduler/cron/cron-job.ts';
import { NOTIFY_MODES, readNotify, type NotifyMode } from '../../scheduler/economy/notify.ts';
import { agentCreatorText } from '../../scheduler/session/origin.ts';
import { ms, type CronJobView, type CronRunView } from './cron-view.ts';
import { at, countdown, duration, tokens } from './format.ts';
import { clip } from '../../scheduler/text/clip.ts';
import { spendFromWire } from '../../scheduler/model-spend.ts';
import { formatSeconds } from '../../scheduler/interval.ts';
import { html, type Html } from './html.ts';
import { CONSOLE_PATH, errorBox, page, warningBox } from './layout.ts';
import { cronUrl, scheduleWords } from './overview-page.ts';

function action(job: CronJobView, name: string, label: string, confirm?: string): Html {
  return html`<button type="button" class="action" data-action="${name}" hx-post="${cronUrl(job.id)}/${name}" hx-target="#job" hx-swap="outerHTML"${confirm ? html` hx-confirm="${confirm}"` : ''}>${label}</button>`;
}

function runRow(r: CronRunView, tz: string): Html {
  const started = ms(r.started_at);
  const finished = ms(r.finished_at);
  const deliveries = r.deliveries.map(
    (d) => html`<li>${d.target}: <span class="status status-${d.status}">${d.status}</span>${d.error ? ` (${d.error})` : ''}</li>`,
  );
  // A chain's runs link to each other: the parent run an `after` run follows, the jobs a run started.
  const parents = r.parents ?? (r.parent ? [r.parent] : []);
  const parent = parents.map((p, i) => html`${i > 0 ? ' +' : ''} <a href="${cronUrl(p.job_id)}">${p.job_id}</a>`);
  const children = r.handoff?.length
    ? html`<br><span class="reason">then ${r.handoff.map((id, i) => html`${i > 0 ? ', ' : ''}<a href="${cronUrl(id)}">${id}</a>`)}</span>`
    : '';
  return html`<tr><td><span class="status status-${r.status}">${r.status}</span>${r.reason ? ` (${r.reason})` : ''}<br><span class="reason">${r.trigger}${parent}</span>${children}</td><td>${started === null ? '—' : at(started, tz)}</td><td>${duration(r.lateness_ms)}${r.late ? ' (late)' : ''}</td><td>${started !== null && finished !== null ? duration(finished - started) : '—'}</td><td><ul class="deliveries">${deliveries}</ul></td><td><pre class="text">${r.error ? `error: ${r.error}\n` : ''}${clip(r.output ?? '', 2000)}</pre></td></tr>`;
}

/** Notices, overlap (when not the default), jitter, watch, model and token budget in one line: `notify auto · jitter 5m (this job: +2m 13s) · max 200,000 tokens`. */
function runSettings(job: CronJobView): string {
  const parts = [`notify ${job.notify}`];
  if (job.overlap !== 'skip') parts.push(`overlap ${job.overlap}`);
  if (job.jitter_seconds > 0)
    parts.push(`jitter ${formatSeconds(job.jitter_seconds)} (this job: +${formatSeconds(job.jitter_offset_seconds)})`);
  if (job.watch) parts.push(`watch ${job.watch}`);
  if (job.model) parts.push(`model ${job.model}`);
  if (job.max_tokens) parts.push(`max ${job.max_tokens.toLocaleString('en-US')} tokens`);
  return parts.join(' · ');
}

/**
 * The job panel (details, next fires, what will not work as set, actions); swapped whole after an action.
 * @param options.offerForce - the run was refused for the job's token budget: offer to run it anyway
 */
export function jobPanel(job: CronJobView, now: number, error?: string, options: { offerForce?: boolean } = {}): Html {
  const next = (job.next_runs ?? []).map((t) => Date.parse(t));
  const buttons = [
    action(job, 'run', 'Run now'),
    job.state === 'paused' ? action(job, 'resume', 'Resume') : job.state === 'scheduled' ? action(job, 'pause', 'Pause') : '',
    html`<a class="button" href="${cronUrl(job.id)}/edit">Edit</a>`,
    action(job, 'remove', 'Remove', `Remove the cron job ${job.name}?`),
  ];
  return html`<section id="job">
<dl class="job">
<dt>schedule</dt><dd>${scheduleWords(job.schedule)}</dd>
<dt>zone</dt><dd>${job.tz}</dd>
<dt>state</dt><dd><span class="state state-${job.state}">${job.state}</span>${job.paused_reason ? html` <span class="reason">${job.paused_reason}</span>` : ''}</dd>
<dt>prompt</dt><dd><pre class="text">${job.prompt}</pre></dd>
<dt>deliver</dt><dd>${job.deliver.join(', ')}</dd>
<dt>runs</dt><dd class="run-settings">${runSettings(job)}</dd>
${job.created_by ? html`<dt>made by</dt><dd${job.created_by.from_tool_output ? html` class="warning"` : ''}>${agentCreatorText(job.created_by)}</dd>` : ''}
<dt>last run</dt><dd>${job.last_status ?? 'never'}${job.last_error ? ` — ${job.last_error}` : ''} · failure streak ${job.failure_streak}</dd>
<dt>spend</dt><dd>${tokens(spendFromWire(job.spend))}</dd>
</dl>
${(job.warnings ?? []).map((w) => warningBox(w))}
<div class="buttons">${buttons}</div>${error ? errorBox(error) : ''}${options.offerForce ? html`<div class="buttons">${action(job, 'run-anyway', 'Run anyway', `Run ${job.name} beyond its token budget?`)}</div>` : ''}
<h2>Next ${next.length} fire times (${job.tz})</h2>
${next.length === 0 ? html`<p class="none">None: the job is ${job.state}.</p>` : html`<ol class="fires">${next.map((t) => html`<li>${formatInZone(t, job.tz)} <span class="reason">${isoUtc(t)}</span> · ${countdown(t, now)}</li>`)}</ol>`}
</section>`;
}

/** How long the runs list follows a run asked for with Run now before it stops re-reading, ms. */
const RUN_FOLLOW_MS = 10 * 60_000;
/** The runs list is re-read this often while it follows a run, ms. */
const RUN_FOLLOW_EVERY_MS = 500;

/** A run that started at or after `since` has finished. */
const finishedSince = (runs: CronRunView[], since: number) => runs.some((r) => (ms(r.started_at) ?? -1) >= since && r.finished_at !== null);

/**
 * The runs list. With `follow.since` (Run now was pressed then) it re-reads itself until a run
 * that started since has finished — shown with its status and output, no reload — or
 * `RUN_FOLLOW_MS` passed.
 */
export function runsSection(job: CronJobView, runs: CronRunView[], now: number, follow: { since?: number; oob?: boolean } = {}): Html {
  const since = follow.since;
  const following = since !== undefined && now - since < RUN_FOLLOW_MS && !finishedSince(runs, since);
  const attrs = following
    ? html` hx-get="${cronUrl(job.id)}/runs?since=${String(since)}" hx-trigger="load delay:${String(RUN_FOLLOW_EVERY_MS)}ms" hx-swap="outerHTML"`
    : '';
  return html`<section id="runs"${attrs}${follow.oob ? html` hx-swap-oob="true"` : ''}><h2>Runs</h2>${runs.length === 0 ? html`<p class="none">No runs yet.</p>` : html`<table class="runs"><thead><tr><th>status</th><th>started</th><th>lateness</th><th>duration</th><th>delivery</th><th>output</th></tr></thead><tbody>${runs.map((r) => runRow(r, job.tz))}</tbody></table>`}</section>`;
}

/** The whole job page. */
export function cronPage(job: CronJobView, runs: CronRunView[], now: number): Html {
  return page(
    `Cron ${job.name}`,
    html`<h1>Cron job <code>${job.name}</code> <span class="reason">${job.id}</span></h1>
${jobPanel(job, now)}
${runsSection(job, runs, now)}
<p class="hint"><a href="${CONSOLE_PATH}">← Overview</a></p>`,
  );
}

/** The preview of a schedule as typed: the schedule in words and its next fire times, or why it is not one. */
export function previewHtml(p: SchedulePreview | { error: string } | undefined, now: number): Html {
  if (p === undefined)
    return html`<div id="preview" class="preview"><p class="none">Type a schedule: <code>weekdays at 9am</code>, <code>every 2h</code>, <code>0 9 * * 1-5</code>.</p></div>`;
  if ('error' in p) return html`<div id="preview" class="preview">${errorBox(p.error)}</div>`;
  const words = p.schedule.kind === 'cron' ? describeCron(p.schedule.expression) : undefined;
  return html`<div id="preview" class="preview"><p class="description">${scheduleText(p.schedule)}${words && p.schedule.display !== p.schedule.expression ? html` · <span class="words">${words}</span>` : ''} <span class="reason">(${p.tz})</span></p>
<ol class="fires">${p.times.map((t) => html`<li>${formatInZone(t, p.tz)} <span class="reason">${isoUtc(t)}</span> · ${countdown(t, now)}</li>`)}</ol></div>`;
}

/** Field values of the form, as typed (the cron service reads them as `/api/cron` bodies: cron-input.ts). */
export interface CronFormValues {
  schedule?: string;
  prompt?: string;
  name?: string;
  tz?: string;
  deliver?: string;
  /** `--notify` (`scheduler/economy/notify.ts`): auto, always, done or never. */
  notify?: string;
  /** What an occurrence does while the previous run is still going: one of `OVERLAP_POLICIES`. */
  overlap?: string;
  /** A jitter window (`5m`, or whole seconds); empty for none. */
  jitter?: string;
  /** A declared check run before each run; empty for none. */
  watch?: string;
  /** A model declared under `agent.models`; empty for the primary. */
  model?: string;
  /** Tokens the runs may spend until the job is resumed; empty for no limit. */
  max_tokens?: string;
}

/** The form's fields. */
export const CRON_FORM_FIELDS = [
  'schedule',
  'prompt',
  'name',
  'tz',
  'deliver',
  'notify',
  'overlap',
  'jitter',
  'watch',
  'model',
  'max_tokens',
] as const;

/** What `notify` offers, with what each sends. */
const NOTIFY_CHOICES: Record<NotifyMode, string> = {
  auto: 'auto — replies (not [SILENT]) and a notice when a run fails',
  always: 'always — also [SILENT] replies and skipped runs',
  done: "done — only the last run's reply, and failure notices",
  never: 'never — replies only, no notices',
};

/** What `overlap` offers, with Temporal's name of each (docs/CRON.md, "Overlap"). */
const OVERLAP_CHOICES: Record<OverlapPolicy, string> = {
  skip: 'skip — record the occurrence as skipped (SKIP)',
  queue: 'queue — wait; the newest waiting one runs next (close to BUFFER_ONE)',
  buffer_all: 'buffer all — wait and run each in order, bounded (BUFFER_ALL)',
  cancel_other: 'cancel other — stop the running one, then run (CANCEL_OTHER)',
  allow: 'allow — run beside it (ALLOW_ALL)',
};

/** The fields of how a job runs: notices, overlap, jitter and its economy (docs/CRON.md, "Economy"). */
function runFields(values: CronFormValues): Html {
  const notify = readNotify(values.notify || undefined);
  const options = NOTIFY_MODES.map((p) => html`<option value="${p}"${p === notify ? html` selected` : ''}>${NOTIFY_CHOICES[p]}</option>`);
  const overlap = values.overlap || 'skip';
  const overlapOptions = OVERLAP_POLICIES.map(
    (p) => html`<option value="${p}"${p === overlap ? html` selected` : ''}>${OVERLAP_CHOICES[p]}</option>`,
  );
  return html`<fieldset class="runs-fields"><legend>How it runs</legend>
<label>Notify <select name="notify">${options}</select></label>
<label>While the previous run is still going <select name="overlap">${overlapOptions}</select></label>
<label>Jitter <input name="jitter" value="${values.jitter ?? ''}" placeholder="none; e.g. 5m: each fire moves by a fixed offset in this window" autocomplete="off"></label>
<label>Watch <input name="watch" value="${values.watch ?? ''}" placeholder="none; a command tool, read_file:&lt;path&gt; or http_get:&lt;url&gt; — unchanged output skips the model" autocomplete="off"></label>
<label>Model <input name="model" value="${values.model ?? ''}" placeholder="the primary; or a model from agent.models" autocomplete="off"></label>
<label>Max tokens <input name="max_tokens" value="${values.max_tokens ?? ''}" placeholder="no limit; e.g. 200000 — the job pauses when its runs spent them" inputmode="numeric" autocomplete="off"></label>
</fieldset>`;
}

/** The create form (no `job`) or the edit form of `job`; the preview follows the schedule and zone fields. */
export function cronForm(values: CronFormValues, preview: Html, options: { job?: CronJobView; error?: string; defaultTz: string }): Html {
  const target = options.job ? `${cronUrl(options.job.id)}/edit` : `${CONSOLE_PATH}/cron`;
  const title = options.job ? `Edit ${options.job.name}` : 'New cron job';
  return page(
    title,
    html`<h1>${title}</h1>
<form id="cron-form" class="cron-form" hx-post="${target}" hx-target="#form-error" hx-swap="innerHTML">
<label>Schedule <input name="schedule" value="${values.schedule ?? ''}" placeholder="weekdays at 9am" required autocomplete="off"
  hx-get="${CONSOLE_PATH}/cron/preview" hx-trigger="input changed delay:250ms, load" hx-target="#preview" hx-swap="outerHTML" hx-include="#cron-form [name=tz]"></label>
<label>Time zone <input name="tz" value="${values.tz ?? options.defaultTz}" placeholder="${options.defaultTz}" autocomplete="off"
  hx-get="${CONSOLE_PATH}/cron/preview" hx-trigger="input changed delay:250ms" hx-target="#preview" hx-swap="outerHTML" hx-include="#cron-form [name=schedule]"></label>
${preview}
<label>Prompt <textarea name="prompt" rows="3" required>${values.prompt ?? ''}</textarea></label>
<label>Name <input name="name" value="${values.name ?? ''}" placeholder="(the start of the prompt)"></label>
<label>Deliver to <input name="deliver" value="${values.deliver ?? ''}" placeholder="local, telegram:&lt;chat&gt;, a webhook URL"></label>
${runFields(values)}
<button type="submit">${options.job ? 'Save' : 'Create'}</button>
<div id="form-error">${options.error ? errorBox(options.error) : ''}</div>
</form>
<p class="hint">The agent runs the prompt at each fire time; jobs made here are agent turns (a script is the shell's: <code>hermes cron add … --script</code>).</p>`,
  );
}
