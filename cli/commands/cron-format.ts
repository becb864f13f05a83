/**
 * Human output of `hermes cron`: tables and one-line summaries. Times are
 * shown in each job's own zone, with a relative hint ("in 4m").
 */
import { readNotify } from '../../scheduler/economy/notify.ts';
import { formatInZone, formatRelative, isoUtc } from '../../scheduler/cron/cron-engine.ts';
import { MAX_RUN_OUTPUT_CHARS, type CronJob, type CronRun } from '../../scheduler/cron/cron-job.ts';
import type { CronFinding, CronStatus } from '../../scheduler/cron/cron-reports.ts';
import type { SchedulePreview } from '../../scheduler/cron/preview.ts';
import { formatSeconds } from '../../scheduler/interval.ts';
import { formatSpend, NO_TOTALS, type ModelSpend } from '../../scheduler/model-spend.ts';
import { describeCron, scheduleText, scheduleTextInZone } from '../../scheduler/cron/describe.ts';
import { clip } from '../../scheduler/text/clip.ts';
import { agentCreatorCell } from '../../scheduler/session/origin.ts';

export { describeCron, scheduleText };

/** Lay out rows as left-aligned columns separated by two spaces. */
export function table(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)];
}

/** `2026-03-05 07:00 CET (in 4m)` or `—`. */
export function when(ms: number | null, tz: string, now: number): string {
  return ms === null ? '—' : `${formatInZone(ms, tz)} (${formatRelative(ms, now)})`;
}

/**
 * The `list` table. A `BY` column (`agent (telegram)` for a job the agent made with its `schedules`
 * tool, `—` for the others) is shown when some job listed was made by the agent.
 */
export function formatJobList(jobs: CronJob[], now: number): string[] {
  if (jobs.length === 0) return ['No cron jobs. Add one: hermes cron add "daily at 7am" "summarise my inbox"'];
  const by = jobs.some((j) => j.created_by);
  return table(
    ['ID', 'NAME', 'SCHEDULE', 'NEXT RUN', 'LAST', 'STREAK', ...(by ? ['BY'] : []), 'STATE'],
    jobs.map((j) => [
      j.id,
      clip(j.name, 28),
      clip(scheduleWithAfter(j, jobs), 48),
      j.state === 'scheduled' ? when(j.next_run_at, j.tz, now) : '—',
      j.last_status ?? '—',
      String(j.failure_streak),
      ...(by ? [j.created_by ? agentCreatorCell(j.created_by) : '—'] : []),
      j.state,
    ]),
  );
}

/** Details of one job (after add, edit, pause, resume). */
export function formatJob(job: CronJob, now: number): string[] {
  const lines = [
    `${job.id}  ${job.name}`,
    `  schedule  ${scheduleTextInZone(job.schedule, job.tz)}${job.repeat.times !== null ? ` · ${job.repeat.completed}/${job.repeat.times} runs` : ''}`,
    `  state     ${job.state}${job.state === 'scheduled' ? ` · next ${when(job.next_run_at, job.tz, now)}` : ''}${job.paused_reason ? ` (${job.paused_reason})` : ''}`,
    `  deliver   ${job.deliver.join(', ')}`,
    `  output    ${outputsAt(job)}`,
    `  policy    misfire ${job.misfire}${job.misfire === 'all' && job.catchup_window_seconds ? ` (window ${formatSeconds(job.catchup_window_seconds)})` : ''} · overlap ${job.overlap} · notify ${readNotify(job.notify)}`,
  ];
  if (job.after?.length) lines.push(`  after     ${job.after.map((a) => `${a.job_id}:${a.on}`).join(', ')} (a run after each such run)`);
  if (job.schedule.kind !== 'once' && job.schedule.jitter) {
    const { seconds, offsetMs } = job.schedule.jitter;
    lines.push(`  jitter    ${formatSeconds(seconds)} · this job fires ${formatSeconds(offsetMs / 1000)} after each scheduled time`);
  }
  // Economy (docs/CRON.md, "Economy").
  if (job.model) lines.push(`  model     ${job.model}`);
  if (job.watch) lines.push(`  watch     ${clip(job.watch, 100)}`);
  if (job.max_tokens) {
    const n = (x: number) => x.toLocaleString('en-US');
    lines.push(`  budget    ${n(job.budget_tokens ?? 0)} of ${n(job.max_tokens)} tokens used since it was set or resumed (--max-tokens)`);
  }
  if (job.created_by) {
    const c = job.created_by;
    lines.push(
      `  made by   the agent, from ${c.surface} (session ${c.session_id})${c.from_tool_output ? ", after reading a tool's output" : ''}`,
    );
  }
  if (job.script !== null) lines.push(`  script    ${clip(job.script, 100)}`);
  if (job.prompt) lines.push(`  prompt    ${clip(job.prompt, 100)}`);
  if (job.last_status !== null) {
    lines.push(
      `  last      ${job.last_status}${job.last_run_at !== null ? ` at ${when(job.last_run_at, job.tz, now)}` : ''}${job.failure_streak ? ` · ${job.failure_streak} failure(s) in a row` : ''}`,
    );
  }
  if (job.last_error) lines.push(`  error     ${clip(job.last_error, 200)}`);
  return lines;
}

/**
 * A job's schedule with the jobs it runs after (`after scanner:ok`; `after all of scanner:ok, lint:any` with
 * `--after-all`), names read from `jobs` where listed.
 */
export function scheduleWithAfter(job: CronJob, jobs: readonly CronJob[]): string {
  const names = (job.after ?? []).map((a) => `${jobs.find((j) => j.id === a.job_id)?.name ?? a.job_id}:${a.on}`).join(', ');
  const after = names && job.after_all ? `all of ${names}` : names;
  if (job.schedule.kind === 'after') return after ? `after ${after}` : scheduleText(job.schedule);
  return after ? `${scheduleText(job.schedule)} + after ${after}` : scheduleText(job.schedule);
}

/**
 * An `after` run's trigger with the parent run it follows (`after <job> <run>`), or the parent runs of an
 * `--after-all` run (`after <job> <run> + <job> <run>`); other triggers as they are.
 */
export function triggerText(run: CronRun, jobs?: ReadonlyMap<string, CronJob>): string {
  const parents = run.parents ?? (run.parent ? [run.parent] : []);
  if (run.trigger !== 'after' || parents.length === 0) return run.trigger;
  return `after ${parents.map((p) => `${jobs?.get(p.job_id)?.name ?? p.job_id} ${p.occurrence_id}`).join(' + ')}`;
}

/** Whether a job's runs go to its `local` target (written as `local`, or `origin` for a job made without a chat route). */
export function deliversLocal(job: Pick<CronJob, 'deliver' | 'origin'>): boolean {
  return job.deliver.includes('local') || (job.deliver.includes('origin') && !job.origin.route);
}

/** Where a job's output can be read: `local` output is nowhere else, so the command that shows it is named. */
function outputsAt(job: CronJob): string {
  return deliversLocal(job)
    ? `local: \`hermes cron logs ${job.id}\` shows each run's whole output (--follow waits for new runs)`
    : `to the targets above; \`hermes cron logs ${job.id}\` shows each run's output too`;
}

/**
 * One run of `cron logs` (and `cron runs --output`): a header line — when it was due (in the job's
 * zone), trigger, status, a script run or an agent turn, how long it took, where it went — and the
 * whole output below it, as printed (an error run: its error).
 */
export function formatRunLog(
  run: CronRun,
  job: CronJob | undefined,
  output: { text: string; whole: boolean } | undefined,
  now: number,
): string[] {
  const tz = job?.tz ?? 'UTC';
  const kind = job ? (job.script !== null ? 'script run' : 'agent turn') : 'run';
  const took = run.started_at !== null && run.finished_at !== null ? `took ${((run.finished_at - run.started_at) / 1000).toFixed(1)}s` : '';
  // A quiet reply is sent only under `--notify always`: its deliveries then say how it went.
  const went = notSent(run) ? 'silent, not sent' : run.deliveries.map((d) => `${d.target} ${d.status}`).join(', ');
  const status = run.status === 'skipped' ? `skipped (${run.reason})` : run.status;
  const head = [
    `${formatInZone(run.due_at, tz)} (${formatRelative(run.due_at, now)})`,
    job ? job.name : run.job_id,
    triggerText(run),
    status,
    kind,
    took,
    went,
  ]
    .filter(Boolean)
    .join(' · ');
  const text = output?.text ?? run.error ?? run.output ?? '';
  const body = run.status === 'skipped' ? [] : text === '' ? ['(empty output)'] : text.replace(/\n$/, '').split('\n');
  const cut =
    output && !output.whole
      ? [`(the record keeps the first ${MAX_RUN_OUTPUT_CHARS.toLocaleString('en-US')} characters; the whole text went to the targets)`]
      : [];
  return [`── ${head}`, ...body, ...cut, ''];
}

/**
 * The `runs` table. A `TOKENS` column (in/out of the run's model calls, `~` when estimated, or
 * `unchanged` when the watch skipped the run) is shown when some run listed made a model call or
 * was unchanged, so script jobs' tables stay as they were.
 */
export function formatRuns(runs: CronRun[], jobs: Map<string, CronJob>): string[] {
  if (runs.length === 0) return ['No runs recorded.'];
  const tokens = runs.some((r) => r.unchanged || (r.spend?.calls ?? 0) > 0);
  return table(
    ['DUE (UTC)', 'JOB', 'TRIGGER', 'STATUS', 'LATE', 'TOOK', 'DELIVERY', ...(tokens ? ['TOKENS IN/OUT'] : []), 'OUTPUT'],
    runs.map((r) => [
      isoUtc(r.due_at),
      clip(jobs.get(r.job_id)?.name ?? r.job_id, 20),
      clip(triggerText(r, jobs), 48),
      r.status === 'skipped' ? `skipped (${r.reason})` : r.status,
      r.started_at === null ? '—' : `${(r.lateness_ms / 1000).toFixed(1)}s`,
      r.started_at !== null && r.finished_at !== null ? `${((r.finished_at - r.started_at) / 1000).toFixed(1)}s` : '—',
      notSent(r) ? 'silent' : r.deliveries.map((d) => d.status).join(',') || '—',
      ...(tokens ? [runTokens(r)] : []),
      clip(r.error ?? r.output ?? '', 50),
    ]),
  );
}

/** `1,204/87`, `~1,204/~87` when estimated, `unchanged`, or `—` for a run without model calls. */
export function runTokens(run: Pick<CronRun, 'spend' | 'unchanged'>): string {
  if (run.unchanged) return 'unchanged';
  const s: ModelSpend | undefined = run.spend;
  if (!s || s.calls === 0) return '—';
  const n = (x: number) => `${s.estimated ? '~' : ''}${x.toLocaleString('en-US')}`;
  return `${n(s.inputTokens)}/${n(s.outputTokens)}`;
}

/** The `next` preview. */
export function formatPreview(p: SchedulePreview, now: number): string[] {
  const jitter =
    p.schedule.kind !== 'once' && p.schedule.jitter
      ? ` · jitter ${formatSeconds(p.schedule.jitter.seconds)}, +${formatSeconds(p.schedule.jitter.offsetMs / 1000)}`
      : '';
  const lines = [`${scheduleTextInZone(p.schedule, p.tz)}${jitter}`];
  if (p.times.length === 0) lines.push('  no further fire times');
  for (const t of p.times) lines.push(`  ${formatInZone(t, p.tz)}   ${isoUtc(t)}   ${formatRelative(t, now)}`);
  return lines;
}

/**
 * `cron show`: everything about one job, its next fire times (in its zone) and
 * its last runs.
 */
export function formatJobDetails(job: CronJob, next: number[], runs: CronRun[], now: number): string[] {
  const lines = formatJob(job, now);
  if (job.schedule.kind === 'cron') {
    const words = describeCron(job.schedule.expression);
    if (words) lines.splice(2, 0, `  in words  ${words}`);
  }
  // What the job's runs cost and how many its watch skipped (docs/CRON.md, "Economy").
  const unchanged = job.unchanged_runs ?? 0;
  if (job.script === null) {
    lines.push(
      `  spend     ${formatSpend(job.spend ?? NO_TOTALS)}${job.watch || unchanged ? ` · ${unchanged} unchanged run${unchanged === 1 ? '' : 's'}` : ''}`,
    );
  } else if (job.watch || unchanged) {
    lines.push(`  unchanged ${unchanged} run${unchanged === 1 ? '' : 's'} (the script did not run)`);
  }
  lines.push(`  created   ${when(job.created_at, job.tz, now)}`);
  lines.push(`next runs${job.state === 'scheduled' ? '' : ` (none while ${job.state})`}`);
  if (job.state === 'scheduled') {
    if (next.length === 0) lines.push('  no further fire times');
    for (const t of next) lines.push(`  ${formatInZone(t, job.tz)}   ${isoUtc(t)}   ${formatRelative(t, now)}`);
  }
  lines.push('last runs');
  if (runs.length === 0) lines.push('  none yet');
  else lines.push(...formatRuns(runs, new Map([[job.id, job]])).map((l) => `  ${l}`));
  return lines;
}

/** The `status` summary. */
export function formatStatus(s: CronStatus, now: number): string[] {
  const lines = [
    `workers alive  ${s.workersAlive}`,
    `jobs           ${s.jobs.total} (${s.jobs.scheduled} scheduled, ${s.jobs.paused} paused, ${s.jobs.completed} completed, ${s.jobs.error} error)`,
    `lateness       ${s.lateness.runs ? `avg ${(s.lateness.averageMs / 1000).toFixed(1)}s, max ${(s.lateness.maxMs / 1000).toFixed(1)}s, ${s.lateness.late} late of the last ${s.lateness.runs} runs` : 'no runs yet'}`,
  ];
  if (s.upcoming.length) {
    lines.push('next runs');
    for (const u of s.upcoming) lines.push(`  ${when(u.next_run_at, u.tz, now)}  ${u.id}  ${clip(u.name, 40)}`);
  }
  const counts = Object.entries(s.deliveries).map(([status, n]) => `${n} ${status}`);
  lines.push(`deliveries     ${counts.length ? `${counts.join(', ')} (recent runs)` : 'none yet'}`);
  if (s.failedDeliveries.length) {
    lines.push('failed deliveries');
    for (const f of s.failedDeliveries) lines.push(`  ${f.id}  ${clip(f.name, 30)}  ${f.target}: ${clip(f.error ?? 'unknown error', 80)}`);
  }
  if (s.failing.length) {
    lines.push('failing');
    for (const f of s.failing) {
      lines.push(
        `  ${f.id}  ${clip(f.name, 30)}  ${f.failure_streak} in a row${f.paused_reason ? ', paused' : ''}: ${clip(f.last_error ?? '', 80)}`,
      );
    }
  }
  return lines;
}

/** The `doctor` report. */
export function formatFindings(findings: CronFinding[]): string[] {
  if (findings.length === 0) return ['No findings: every scheduled job is armed and the store looks healthy.'];
  return [`${findings.length} finding(s):`, ...findings.map((f) => `  ${f.jobId ? `${f.jobId}: ` : ''}${f.message}`)];
}

/** A quiet run whose reply went to no target. */
function notSent(run: CronRun): boolean {
  return run.silent && run.deliveries.every((d) => d.status === 'silent');
}

/** What `backfill` queued: each occurrence in the job's zone, and those already recorded. */
export function formatBackfill(
  job: CronJob,
  window: { fromMs: number; toMs: number; clipped: boolean },
  queued: number[],
  recorded: number[],
): string[] {
  const span = `${formatInZone(window.fromMs, job.tz)} to ${formatInZone(window.toMs, job.tz)}${window.clipped ? ' (--to clipped to now)' : ''}`;
  const lines =
    queued.length === 0
      ? [`Nothing to backfill for ${job.id} (${job.name}) from ${span}.`]
      : [
          `Queued ${queued.length} backfilled occurrence${queued.length === 1 ? '' : 's'} of ${job.id} (${job.name}) from ${span}, to run oldest first:`,
          ...queued.map((at) => `  ${formatInZone(at, job.tz)}`),
        ];
  if (recorded.length > 0) {
    lines.push(`Already backfilled, not queued again: ${recorded.map((at) => formatInZone(at, job.tz)).join(', ')}.`);
  }
  if (queued.length > 0) lines.push(`\`hermes cron runs ${job.id}\` shows the results.`);
  return lines;
}
