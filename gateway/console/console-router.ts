/**
 * The web console's routes, mounted at `/ui` behind the same Basic auth as the queue dashboard
 * (server.ts) and the browser guard (no foreign `Origin`, no DNS-rebound `Host`):
 *
 * - `GET /ui` the overview, `GET /ui/overview/stream` its live part (SSE);
 * - `GET /ui/sessions/:id` a session, `GET /ui/sessions/:id/stream` its events, schedule panel and
 *   transcript (SSE), `POST /ui/sessions/:id/messages` a message (gateway/web-input.ts),
 *   `POST /ui/sessions/:id/(loop|heartbeat|goal)/(pause|resume|stop)`, `POST /ui/sessions/:id/schedule` (set a
 *   loop or heartbeat) and `GET /ui/sessions/:id/schedule/preview` (its cadence);
 * - `GET /ui/cron/new`, `GET /ui/cron/preview`, `POST /ui/cron`, `GET /ui/cron/:id`,
 *   `GET /ui/cron/:id/runs`, `POST /ui/cron/:id/(run|run-anyway|pause|resume|remove)`,
 *   `GET|POST /ui/cron/:id/edit`;
 * - `GET /ui/assets/*` htmx, its SSE extension, the console's script and styles.
 *
 * Every answer carries the console's Content-Security-Policy (layout.ts). A request that changes
 * anything must also carry `HX-Request: true`, which htmx sends and a page of another origin
 * cannot (a custom header needs a CORS preflight, and the gateway answers none): with the Origin
 * check of the browser guard, no other site can make a logged-in browser pause, send or remove.
 */
import type { NOTIFY_WORDS } from '../../scheduler/economy/notify.ts';
import express, { Router, type Request, type Response } from 'express';
import { defaultTimeZone } from '../../scheduler/cron/cron-engine.ts';
import { previewSchedule, type SchedulePreview } from '../../scheduler/cron/preview.ts';
import { isHermesError } from '../../scheduler/errors/hermes-error.ts';
import { formatSeconds } from '../../scheduler/interval.ts';
import type { OverlapPolicy } from '../../scheduler/cron/cron-job.ts';
import { ScheduleInputError } from '../../scheduler/errors/schedule-input-error.ts';
import { assertSessionId } from '../../scheduler/session/session-id.ts';
import { setAsideInputs } from '../../scheduler/session/set-aside.ts';
import type { CronEditInput } from '../http/cron-routes.ts';
import { HttpError, toHttpError } from '../http/errors.ts';
import { pagePolicy } from '../http/security-headers.ts';
import { lastEventId, openSse, type SseStream } from '../http/sse.ts';
import { sessionSummary } from '../session-summaries.ts';
import { isStreamId } from '../stream-fanout.ts';
import { sendWebMessage } from '../web-input.ts';
import { assetsRouter } from './assets.ts';
import { readOverview, type ConsoleDeps, type OverviewView } from './console-data.ts';
import { CRON_FORM_FIELDS, cronForm, cronPage, jobPanel, previewHtml, runsSection, type CronFormValues } from './cron-page.ts';
import type { CronJobView, CronRunView } from './cron-view.ts';
import { eventHtml } from './event-html.ts';
import { html, type Html } from './html.ts';
import { CONSOLE_CSP, CONSOLE_PATH, errorBox, page } from './layout.ts';
import { cronUrl, overviewBody, overviewPage } from './overview-page.ts';
import { cadencePreview, scheduleForm, scheduleFormSpec, scheduleFormValues } from './schedule-form.ts';
import { messageForm, schedulePanel, sessionPage, transcriptMark, transcriptSection } from './session-page.ts';

/** Fire times shown on a job's page. */
export const NEXT_FIRES_SHOWN = 10;
/** Runs shown on a job's page. */
const RUNS_SHOWN = 20;
/** Transcript messages and recent events on a session's page. */
const TRANSCRIPT_SHOWN = 50;
/** A burst of events re-renders a live view once, this long after the first, ms. */
const RERENDER_DEBOUNCE_MS = 250;
/** The overview is re-read at least this often while open (schedules changed without an event), ms. */
const OVERVIEW_REFRESH_MS = 15_000;
/** Event streams the overview follows at most (one per session and cron job); beyond it the refresh alone. */
const OVERVIEW_MAX_SUBSCRIPTIONS = 50;

const send = (res: Response, body: Html, status = 200) => res.status(status).type('html').send(body.value);

/** The console router (mount at `CONSOLE_PATH`). */
export function consoleRouter(deps: ConsoleDeps): Router {
  const router = Router();
  // The other security headers come from server.ts for every route (http/security-headers.ts).
  router.use(pagePolicy(CONSOLE_CSP));
  router.use((req, res, next) => {
    if (req.method !== 'GET' && req.method !== 'HEAD' && req.get('hx-request') !== 'true') {
      res
        .status(403)
        .set('Connection', 'close')
        .type('text/plain')
        .send('The console changes nothing without its own header (HX-Request: true).\n');
      return;
    }
    next();
  });
  router.use(assetsRouter());
  router.use(express.urlencoded({ extended: false, limit: '256kb' }));
  const tz = defaultTimeZone(undefined, deps.config.timezone);

  router.get('/', async (req, res) => send(res, overviewPage(await readOverview(deps, overviewView(req)))));

  router.get('/overview/stream', async (req, res) => {
    const view = overviewView(req);
    const subs: Array<{ close(): void }> = [];
    let timer: NodeJS.Timeout | undefined;
    let sse: SseStream | undefined;
    const render = async () => {
      timer = undefined;
      try {
        sse?.send({ event: 'overview', data: overviewBody(await readOverview(deps, view)).value });
      } catch (err) {
        deps.log.warn({ err: (err as Error).message }, 'console overview not refreshed');
      }
    };
    const soon = () => {
      timer ??= setTimeout(() => void render(), RERENDER_DEBOUNCE_MS);
    };
    const shown = await readOverview(deps, view);
    const sessionIds = shown.sessions.map((s) => s.id);
    const jobIds = shown.jobs.map((j) => `cron:${j.job.id}`);
    const now = `${Date.now()}-0`;
    for (const id of [...sessionIds, ...jobIds].slice(0, OVERVIEW_MAX_SUBSCRIPTIONS))
      subs.push(deps.fanout.subscribe(deps.keys.events(id), now, soon));
    const refresh = setInterval(soon, OVERVIEW_REFRESH_MS);
    sse = openSse(req, res, {
      onClose: () => {
        clearInterval(refresh);
        if (timer) clearTimeout(timer);
        for (const s of subs) s.close();
      },
      maxBufferedBytes: deps.sseMaxBufferedBytes,
      log: deps.log,
    });
    track(deps, sse);
  });

  // ---- sessions
  router.get('/sessions/:id', async (req, res) => {
    const id = assertSessionId(String(req.params.id));
    const [summary, transcript, recent, setAside] = await Promise.all([
      sessionSummary(deps, id),
      deps.sessions.transcriptPage(id, { limit: TRANSCRIPT_SHOWN }),
      deps.sessions.recentEvents(id, TRANSCRIPT_SHOWN),
      setAsideInputs(deps.redis, deps.keys, id),
    ]);
    const shown = recent.filter((e) => eventHtml(e) !== undefined);
    const now = Date.now();
    const form = scheduleForm(id, {}, cadencePreview({}, deps.config, tz, now));
    send(res, sessionPage(summary, transcript, shown, recent.at(-1)?.id ?? '0', now, setAside, form));
  });

  router.get('/sessions/:id/stream', async (req, res) => {
    const id = assertSessionId(String(req.params.id));
    const after = lastEventId(req, typeof req.query.after === 'string' && req.query.after !== '' ? req.query.after : '0');
    if (after !== '0' && !isStreamId(after))
      throw new HttpError(400, 'after must be an event id like 1700000000000-0.', 'invalid_request_error', 'invalid_event_id', 'after');
    // What the page's transcript panel shows (session-page.ts `transcriptMark`): re-sent when the transcript differs.
    let shownTranscript = typeof req.query.transcript === 'string' ? req.query.transcript : '';
    let timer: NodeJS.Timeout | undefined;
    let sse: SseStream | undefined;
    const panel = async () => {
      timer = undefined;
      try {
        const [summary, transcript] = await Promise.all([
          sessionSummary(deps, id),
          deps.sessions.transcriptPage(id, { limit: TRANSCRIPT_SHOWN }),
        ]);
        sse?.send({ event: 'schedules', data: schedulePanel(summary, Date.now()).value });
        // A turn's messages and its event are committed together (`SessionStore.commitTurn`): the event is read after them.
        const mark = transcriptMark(transcript);
        if (mark !== shownTranscript) {
          shownTranscript = mark;
          sse?.send({ event: 'transcript', data: transcriptSection(id, transcript).value });
        }
      } catch (err) {
        deps.log.warn({ err: (err as Error).message, sessionId: id }, 'console session panels not refreshed');
      }
    };
    const sub = deps.fanout.subscribe(deps.keys.events(id), after, (events) => {
      for (const e of events) {
        const item = eventHtml(e);
        if (item) sse?.send({ id: e.id, event: 'event', data: item.value });
      }
      timer ??= setTimeout(() => void panel(), RERENDER_DEBOUNCE_MS);
    });
    sse = openSse(req, res, {
      onClose: () => {
        if (timer) clearTimeout(timer);
        sub.close();
      },
      maxBufferedBytes: deps.sseMaxBufferedBytes,
      log: deps.log,
    });
    track(deps, sse);
  });

  router.post('/sessions/:id/messages', async (req, res) => {
    const id = assertSessionId(String(req.params.id));
    const text: unknown = (req.body as Record<string, unknown> | undefined)?.text;
    try {
      await sendWebMessage(
        { ...deps, maxChars: deps.config.agent.max_prompt_chars },
        { sessionId: id, text: typeof text === 'string' ? text : '' },
      );
      send(res, messageForm(id));
    } catch (err) {
      if (!isHermesError(err)) throw err;
      send(res, messageForm(id, err.message), toHttpError(err).status);
    }
  });

  // The schedule form (schedule-form.ts): the cadence's preview while typing, and the set.
  router.get('/sessions/:id/schedule/preview', (req, res) => {
    assertSessionId(String(req.params.id));
    send(res, cadencePreview(scheduleFormValues(req.query), deps.config, tz, Date.now()));
  });

  router.post('/sessions/:id/schedule', async (req, res) => {
    const id = assertSessionId(String(req.params.id));
    const values = scheduleFormValues((req.body ?? {}) as Record<string, unknown>);
    try {
      const { kind, spec } = scheduleFormSpec(values, deps.config);
      // Web input never makes a command turn: the runner is the agent, on the surface `web`.
      const reply = await deps.schedules.set(id, kind, spec, { origin: { surface: 'web' }, runner: { kind: 'agent' } });
      await deps.sessions.appendEvent(id, 'notice', { text: reply, by: 'console', kind, action: 'set' });
      const cleared = { kind };
      send(res, scheduleForm(id, cleared, cadencePreview(cleared, deps.config, tz, Date.now())));
    } catch (err) {
      if (!isHermesError(err) && !(err instanceof HttpError)) throw err;
      send(res, scheduleForm(id, values, cadencePreview(values, deps.config, tz, Date.now()), err.message), toHttpError(err).status);
    }
  });

  router.post('/sessions/:id/:kind/:action', async (req, res) => {
    const id = assertSessionId(String(req.params.id));
    const { kind, action } = req.params as { kind: string; action: string };
    if (!['loop', 'heartbeat', 'goal'].includes(kind) || !['pause', 'resume', 'stop'].includes(action)) {
      throw new HttpError(404, `No action ${kind}/${action}.`, 'not_found_error', 'route_not_found');
    }
    let error: string | undefined;
    try {
      const reply =
        kind === 'goal'
          ? await (action === 'stop' ? deps.goals.clear(id) : deps.goals[action as 'pause' | 'resume'](id))
          : await deps.schedules[action as 'pause' | 'resume' | 'stop'](id, kind as 'loop' | 'heartbeat');
      // Every client of the session sees what was done (the chat shows notices too).
      await deps.sessions.appendEvent(id, 'notice', { text: reply, by: 'console', kind, action });
    } catch (err) {
      if (!isHermesError(err)) throw err;
      error = err.message;
    }
    send(res, schedulePanel(await sessionSummary(deps, id), Date.now(), error));
  });

  // ---- cron jobs
  const cron = () => {
    if (!deps.cron) throw new HttpError(501, 'Cron jobs are not available in this gateway.', 'server_error', 'cron_unavailable');
    return deps.cron;
  };
  const preview = (values: CronFormValues): SchedulePreview | { error: string } | undefined => {
    if (!values.schedule?.trim()) return undefined;
    try {
      return previewSchedule(values.schedule, {
        tz: defaultTimeZone(values.tz?.trim() || undefined, deps.config.timezone),
        fromMs: Date.now(),
        count: NEXT_FIRES_SHOWN,
        minIntervalSeconds: deps.config.cron.min_interval_seconds,
        maxScheduleChars: deps.config.cron.max_schedule_chars,
      });
    } catch (err) {
      if (!isHermesError(err)) throw err;
      return { error: err.message };
    }
  };
  const formValues = (source: Record<string, unknown>): CronFormValues => {
    const field = (k: keyof CronFormValues) => (typeof source[k] === 'string' ? source[k] : undefined);
    return Object.fromEntries(CRON_FORM_FIELDS.map((k) => [k, field(k)]));
  };
  // The form's text as `/api/cron` bodies give it; the cron service checks every field (bad input changes nothing).
  const jobInput = (v: CronFormValues) => ({
    ...(v.schedule ? { schedule: v.schedule } : {}),
    ...(v.prompt !== undefined ? { prompt: v.prompt } : {}),
    ...(v.name?.trim() ? { name: v.name.trim() } : {}),
    ...(v.tz?.trim() ? { tz: v.tz.trim() } : {}),
    ...(v.deliver?.trim() ? { deliver: v.deliver.trim() } : {}),
    // The service refuses a value that is none of them (cron-input.ts `parseNotify`).
    ...(v.notify?.trim() ? { notify: v.notify.trim() as (typeof NOTIFY_WORDS)[number] } : {}),
    // The same for `overlap` (`parseOverlap`).
    ...(v.overlap?.trim() ? { overlap: v.overlap.trim() as OverlapPolicy } : {}),
    ...(v.jitter?.trim() ? { jitter: v.jitter.trim() } : {}),
    ...(v.watch?.trim() ? { watch: v.watch.trim() } : {}),
    ...(v.model?.trim() ? { model: v.model.trim() } : {}),
    ...(v.max_tokens?.trim() ? { max_tokens: v.max_tokens.trim() } : {}),
  });
  /** A job's settings as the form shows them. */
  const jobValues = (job: CronJobView): CronFormValues => ({
    schedule: job.schedule.display,
    prompt: job.prompt,
    name: job.name,
    tz: job.tz,
    deliver: job.deliver.join(', '),
    notify: job.notify,
    overlap: job.overlap,
    jitter: job.jitter_seconds > 0 ? formatSeconds(job.jitter_seconds) : '',
    watch: job.watch ?? '',
    model: job.model ?? '',
    max_tokens: job.max_tokens ? String(job.max_tokens) : '',
  });

  router.get('/cron/new', (_req, res) => {
    cron();
    send(res, cronForm({}, previewHtml(undefined, Date.now()), { defaultTz: tz }));
  });

  router.get('/cron/preview', (req, res) => send(res, previewHtml(preview(formValues(req.query)), Date.now())));

  router.post('/cron', async (req, res) => {
    const values = formValues((req.body ?? {}) as Record<string, unknown>);
    try {
      const job = (await cron().add({ schedule: values.schedule ?? '', ...jobInput(values) })) as CronJobView;
      res.set('HX-Redirect', cronUrl(job.id)).status(201).type('html').send('');
    } catch (err) {
      if (!isHermesError(err)) throw err;
      send(res, errorBox(err.message), toHttpError(err).status);
    }
  });

  const jobPage = async (ref: string) => (await cron().get(ref, { nextRuns: NEXT_FIRES_SHOWN })) as CronJobView;

  router.get('/cron/:id', async (req, res) => {
    const job = await jobPage(String(req.params.id));
    const runs = (await cron().runs(job.id, RUNS_SHOWN)) as CronRunView[];
    send(res, cronPage(job, runs, Date.now()));
  });

  // The runs list alone, re-read while it follows a run (cron-page.ts `runsSection`).
  router.get('/cron/:id/runs', async (req, res) => {
    const job = await jobPage(String(req.params.id));
    const runs = (await cron().runs(job.id, RUNS_SHOWN)) as CronRunView[];
    const since = Number(req.query.since);
    send(res, runsSection(job, runs, Date.now(), { since: Number.isFinite(since) ? since : undefined }));
  });

  router.get('/cron/:id/edit', async (req, res) => {
    const job = await jobPage(String(req.params.id));
    const values = jobValues(job);
    send(res, cronForm(values, previewHtml(preview(values), Date.now()), { job, defaultTz: tz }));
  });

  router.post('/cron/:id/edit', async (req, res) => {
    const job = await jobPage(String(req.params.id));
    const values = formValues((req.body ?? {}) as Record<string, unknown>);
    const before = jobValues(job);
    const changes: CronEditInput = jobInput(values);
    // Only what changed: an unchanged schedule is not re-armed.
    if (changes.schedule === job.schedule.display) delete changes.schedule;
    // A field emptied removes what the job had: no jitter, no watch, the primary model, no token budget.
    if (before.jitter && !values.jitter?.trim()) changes.jitter = 0;
    for (const k of ['watch', 'model', 'max_tokens'] as const) if (before[k] && !values[k]?.trim()) changes[k] = null;
    for (const k of ['notify', 'overlap', 'jitter', 'watch', 'model', 'max_tokens'] as const)
      if (changes[k] === before[k]) delete changes[k];
    try {
      await cron().edit(job.id, changes);
      res.set('HX-Redirect', cronUrl(job.id)).type('html').send('');
    } catch (err) {
      if (!isHermesError(err)) throw err;
      send(res, errorBox(err.message), toHttpError(err).status);
    }
  });

  router.post('/cron/:id/:action', async (req, res) => {
    const ref = String(req.params.id);
    const act = String(req.params.action);
    if (act === 'remove') {
      await cron().remove(ref);
      res.set('HX-Redirect', CONSOLE_PATH).type('html').send('');
      return;
    }
    let error: string | undefined;
    let forceable = false;
    const askedAt = Date.now();
    let ran = false;
    try {
      // A job paused by its token budget runs only when asked again, as `run-anyway` (`CronCommands.runNow`).
      if (act === 'run' || act === 'run-anyway') {
        await cron().runNow(ref, { force: act === 'run-anyway' });
        ran = true;
      } else if (act === 'pause') await cron().pause(ref);
      else if (act === 'resume') await cron().resume(ref, { runNow: false });
      else throw new HttpError(404, `No action ${act}.`, 'not_found_error', 'route_not_found');
    } catch (err) {
      if (!isHermesError(err)) throw err;
      error = err.message;
      forceable = err instanceof ScheduleInputError && err.field === 'force';
    }
    const job = await jobPage(ref);
    const panel = jobPanel(job, Date.now(), error, { offerForce: forceable });
    if (!ran) return send(res, panel);
    // The runs list follows the run it asked for (out of band: the button swaps the job panel).
    const runs = (await cron().runs(job.id, RUNS_SHOWN)) as CronRunView[];
    send(res, html`${panel}${runsSection(job, runs, Date.now(), { since: askedAt, oob: true })}`);
  });

  // Errors as a page (or a fragment for htmx), never a stack trace.
  router.use((err: unknown, req: Request, res: Response, _next: express.NextFunction) => {
    const e = toHttpError(err);
    if (e.status >= 500) deps.log.error({ err: (err as Error)?.message, path: req.path }, 'console request failed');
    if (res.headersSent) return;
    const body =
      req.get('hx-request') === 'true'
        ? errorBox(e.message)
        : page('Error', html`<h1>${e.status}</h1>${errorBox(e.message)}<p><a href="${CONSOLE_PATH}">← Overview</a></p>`);
    send(res, body, e.status);
  });
  return router;
}

function track(deps: ConsoleDeps, sse: SseStream): void {
  deps.streams.add(sse);
  sse.signal.addEventListener('abort', () => deps.streams.delete(sse), { once: true });
}

/** The overview's view a request asks for (`?q=`, `?sessions=`, `?jobs=`; each given once, as text). */
function overviewView(req: Request): OverviewView {
  const one = (name: string) => (typeof req.query[name] === 'string' && req.query[name] !== '' ? req.query[name] : undefined);
  const q = one('q')?.trim();
  const sessions = one('sessions');
  const jobs = one('jobs');
  return { ...(q ? { q } : {}), ...(sessions ? { sessions } : {}), ...(jobs ? { jobs } : {}) };
}
