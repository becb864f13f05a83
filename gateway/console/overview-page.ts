/**
 * The overview (`/ui`): workers alive; each running gateway's platforms (on, starting, off, or
 * failed and why); a page of sessions by id with their loop, heartbeat and goal (state,
 * cadence, next due as a live countdown, ticks used and budget, tokens spent, the last reply's
 * first line); a page of cron jobs by name (schedule in words and raw, zone, next run, last run's status
 * and lateness, failure streak, why it is paused); the charts of what the pages show. A search box narrows
 * both lists to a prefix (`?q=`: of session ids, of job names), and each list links its next page
 * (`?sessions=`, `?jobs=`: the cursors of `/api`). The part below the heading is re-sent whole over the
 * overview's event stream, for the same view, when something changes.
 */
import { cadence, createdByText } from '../../scheduler/loop/loop-service.ts';
import { loopTargets } from '../../scheduler/loop/loop-state.ts';
import { describeCron } from '../../scheduler/cron/describe.ts';
import { agentCreatorText } from '../../scheduler/session/origin.ts';
import type { GoalRecord } from '../../scheduler/goal/goal-state.ts';
import { latenessHistogram, latenessOverTime, turnsPerHour } from './charts.ts';
import { CHART_WINDOW_MS, type JobWithLastRun, type OverviewData } from './console-data.ts';
import { ms } from './cron-view.ts';
import { at, countdown, duration, tokens } from './format.ts';
import { clip } from '../../scheduler/text/clip.ts';
import { html, type Html } from './html.ts';
import { CONSOLE_PATH, page } from './layout.ts';
import { describePlatformState, platformLabel } from '../../scheduler/delivery/platform-state.ts';
import type { ScheduleState, SessionSummary } from '../session-summaries.ts';
import type { OverviewView } from './console-data.ts';

/** The overview's query for `view` (what the page links and its stream carry). */
export function overviewQuery(view: OverviewView): string {
  const q = new URLSearchParams();
  if (view.q) q.set('q', view.q);
  if (view.sessions) q.set('sessions', view.sessions);
  if (view.jobs) q.set('jobs', view.jobs);
  const text = q.toString();
  return text ? `?${text}` : '';
}

/** The links under a list: its next page, and back to its first while on a later one. */
function pageLinks(d: OverviewData, list: 'sessions' | 'jobs', next: string | null): Html {
  const first = d.view[list]
    ? html`<a class="first-page" href="${CONSOLE_PATH}${overviewQuery({ ...d.view, [list]: undefined })}">first page</a>`
    : '';
  const more = next ? html`<a class="next-page" href="${CONSOLE_PATH}${overviewQuery({ ...d.view, [list]: next })}">next page</a>` : '';
  return first || more ? html`<p class="pages">${first} ${more}</p>` : html``;
}

/** The search box: a prefix of session ids and cron job names. */
function searchBox(view: OverviewView): Html {
  return html`<form class="search" method="get" action="${CONSOLE_PATH}"><input type="search" name="q" value="${view.q ?? ''}" placeholder="session id or job name starts with…" aria-label="search sessions and cron jobs"> <button type="submit">Search</button></form>`;
}

/** A session's URL in the console. */
export const sessionUrl = (id: string) => `${CONSOLE_PATH}/sessions/${encodeURIComponent(id)}`;
/** A cron job's URL in the console. */
export const cronUrl = (id: string) => `${CONSOLE_PATH}/cron/${encodeURIComponent(id)}`;

/** A loop or heartbeat in one cell: state, cadence, next due, ticks, tokens, where its replies also go. */
export function scheduleCell(s: ScheduleState | null, now: number): Html {
  if (!s) return html`<span class="none">—</span>`;
  const r = s.record;
  const used = r.maxTicks > 0 ? `${r.ticksUsed}/${r.maxTicks}` : `${r.ticksUsed}`;
  // The quiet ticks, as `hermes status` shows them (cli/status-format.ts).
  const quiet = [r.silentTicks ? `${r.silentTicks} silent` : '', r.unchangedTicks ? `${r.unchangedTicks} unchanged` : '']
    .filter(Boolean)
    .join(', ');
  const next = r.status === 'active' && s.nextDueAt !== undefined ? html` · next ${countdown(s.nextDueAt, now)}` : '';
  const by = r.createdBy ? html` · <span class="reason">${createdByText(r.createdBy)}</span>` : '';
  const targets = loopTargets(r);
  const to = targets.length ? html` · to <code>${targets.join(', ')}</code>` : '';
  return html`<span class="state state-${r.status}">${r.status}</span>${r.statusReason ? html` <span class="reason">(${r.statusReason})</span>` : ''} · ${cadence(r)}${next} · ticks ${used}${quiet ? ` (${quiet})` : ''} · ${tokens(r.spend)}${to}${by}<br><span class="prompt">“${clip(r.prompt, 80)}”</span>`;
}

/** A goal in one cell: state, turns used and budget, tokens. */
export function goalCell(g: GoalRecord | null): Html {
  if (!g) return html`<span class="none">—</span>`;
  return html`<span class="state state-${g.status}">${g.status}${g.parked ? ' (waiting)' : ''}</span>${g.statusReason ? html` <span class="reason">(${g.statusReason})</span>` : ''} · turns ${g.turnsUsed}/${g.maxTurns} · ${tokens(g.spend)}<br><span class="prompt">“${clip(g.text, 80)}”</span>`;
}

function sessionRow(s: SessionSummary, now: number): Html {
  return html`<tr data-session="${s.id}"><td><a href="${sessionUrl(s.id)}">${s.id}</a></td><td>${scheduleCell(s.loop, now)}</td><td>${scheduleCell(s.heartbeat, now)}</td><td>${goalCell(s.goal)}</td><td>${s.lastActivityAt ? html`<time class="ago" data-since="${s.lastActivityAt}">${duration(now - s.lastActivityAt)} ago</time>` : '—'}</td><td class="reply">${s.lastReply === null ? '—' : clip(s.lastReply, 120)}</td></tr>`;
}

/** A schedule in words and raw: `At 09:00, Monday through Friday` · `0 9 * * 1-5`. */
export function scheduleWords(schedule: JobWithLastRun['job']['schedule']): Html {
  const words = schedule.kind === 'cron' ? describeCron(schedule.expression) : undefined;
  return html`<span class="words">${words ?? schedule.display}</span> <code>${schedule.kind === 'cron' ? schedule.expression : schedule.display}</code>`;
}

function jobRow({ job, lastRun }: JobWithLastRun, now: number): Html {
  const next = ms(job.next_run_at);
  const last = lastRun
    ? html`<span class="status status-${lastRun.status}">${lastRun.status}</span>${lastRun.reason ? ` (${lastRun.reason})` : ''} · ${duration(lastRun.lateness_ms)} late`
    : html`<span class="none">never run</span>`;
  const by = job.created_by ? html`<br><span class="reason">made by ${agentCreatorText(job.created_by)}</span>` : '';
  return html`<tr data-job="${job.id}"><td><a href="${cronUrl(job.id)}">${job.name}</a>${by}</td><td>${scheduleWords(job.schedule)}</td><td>${job.tz}</td><td>${next === null ? '—' : html`${at(next, job.tz)} (${countdown(next, now)})`}</td><td>${last}</td><td>${job.failure_streak}</td><td><span class="state state-${job.state}">${job.state}</span>${job.paused_reason ? html` <span class="reason">${job.paused_reason}</span>` : ''}</td></tr>`;
}

/** Each running gateway's platforms: state, since when, and why it failed (docs/CONSOLE.md). */
function platformsSection(d: OverviewData): Html {
  if (d.gateways.length === 0)
    return html`<p class="none">No gateway is running: Telegram, Slack and Discord are relayed by <code>hermes up</code> or <code>hermes gateway</code>.</p>`;
  const rows = d.gateways.flatMap((g) =>
    g.platforms.map((p) => {
      // The words begin with the state's name; what follows is why (and the retries).
      const why = describePlatformState(p, d.now).slice(p.state.length);
      return html`<tr data-platform="${p.platform}"><td>${platformLabel(p.platform)}</td><td><span class="state state-platform-${p.state}">${p.state}</span>${why ? html`<span class="reason">${why}</span>` : ''}</td><td><time class="ago" data-since="${p.since}">${duration(d.now - p.since)} ago</time></td><td><code>${g.gateway}</code></td></tr>`;
    }),
  );
  return html`<div class="scroll"><table class="platforms"><thead><tr><th>platform</th><th>state</th><th>since</th><th>gateway</th></tr></thead><tbody>${rows}</tbody></table></div>`;
}

/** The overview's live part. */
export function overviewBody(d: OverviewData): Html {
  return html`<section><h2>Workers</h2><p class="workers">${d.workers.length} alive${d.workers.length ? html`: <code>${d.workers.join(', ')}</code>` : ' — schedules wait until one starts'}</p></section>
<section><h2>Platforms</h2>${platformsSection(d)}</section>
<section><h2>Sessions</h2>${d.sessions.length === 0 ? html`<p class="none">${d.view.q ? 'No session matches.' : 'No sessions yet.'}</p>` : html`<div class="scroll"><table class="sessions"><thead><tr><th>session</th><th>loop</th><th>heartbeat</th><th>goal</th><th>last activity</th><th>last reply</th></tr></thead><tbody>${d.sessions.map((s) => sessionRow(s, d.now))}</tbody></table></div>`}${pageLinks(d, 'sessions', d.sessionsNext)}</section>
<section><h2>Cron jobs</h2>${d.jobs.length === 0 ? (d.view.q ? html`<p class="none">No cron job matches.</p>` : html`<p class="none">No cron jobs. <a href="${CONSOLE_PATH}/cron/new">Create one</a>.</p>`) : html`<div class="scroll"><table class="cron"><thead><tr><th>job</th><th>schedule</th><th>zone</th><th>next run</th><th>last run</th><th>failure streak</th><th>state</th></tr></thead><tbody>${d.jobs.map((j) => jobRow(j, d.now))}</tbody></table></div>`}${pageLinks(d, 'jobs', d.jobsNext)}</section>
<section class="charts"><h2>Last 24 hours</h2>${latenessOverTime(d.lateness, d.now, CHART_WINDOW_MS)}${latenessHistogram(d.lateness)}${turnsPerHour(d.hours)}</section>`;
}

/** The overview page: its body follows the overview's event stream. */
export function overviewPage(d: OverviewData): Html {
  return page(
    'Overview',
    html`<h1>Overview</h1>
${searchBox(d.view)}
<div id="overview" hx-ext="sse" sse-connect="${CONSOLE_PATH}/overview/stream${overviewQuery(d.view)}" sse-swap="overview" hx-swap="innerHTML">${overviewBody(d)}</div>`,
  );
}
