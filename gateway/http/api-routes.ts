/**
 * The management API under `/api` (docs/DESIGN.md §8): loop and heartbeat schedules of
 * sessions (through the same `LoopService` as `/loop` in chat, so the rules
 * live in scheduler/), cron jobs (cron-routes.ts), sessions, their transcripts and
 * messages to them (session-routes.ts), the models and their windows (model-routes.ts),
 * and a session's event stream as SSE with `Last-Event-ID` resume.
 *
 * Schedules created over HTTP always run the agent: `/api` can never create a
 * command turn (docs/DESIGN.md §3).
 */
import { MAX_TOKENS_LIMIT, type ScheduleEconomy } from '../../scheduler/economy/economy-flags.ts';
import { NOTIFY_WORDS, parseNotify } from '../../scheduler/economy/notify.ts';
import { Router } from 'express';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import type { StreamFanout } from '../stream-fanout.ts';
import type { Logger } from 'pino';
import { z } from 'zod';
import { MAX_INTERVAL_SECONDS } from '../../scheduler/interval.ts';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import type { Keys } from '../../scheduler/store/keys.ts';
import type { LoopKind } from '../../scheduler/tick/tick-kind.ts';
import { scheduleObject } from '../../scheduler/loop/schedule-view.ts';
import { parseDeliverList } from '../../scheduler/delivery/deliver-list.ts';
import type { LoopStore } from '../../scheduler/loop/loop-store.ts';
import type { LoopService, LoopSpec } from '../../scheduler/loop/loop-service.ts';
import { assertSessionId } from '../../scheduler/session/session-id.ts';
import { sessionStoreFor } from '../../scheduler/services.ts';
import type { InflightRuns } from '../drain.ts';
import { cronRouter, type CronApi } from './cron-routes.ts';
import { sessionRouter } from './session-routes.ts';
import { modelRouter } from './model-routes.ts';
import type { HermesQueues } from '../../scheduler/store/queues.ts';
import type { GoalService } from '../../scheduler/goal/goal-service.ts';
import { HttpError } from './errors.ts';
import { filterOf, pageRequestOf } from './list-query.ts';
import { keepSchedule, LOOP_STATUSES } from '../../scheduler/loop/schedule-list-filter.ts';
import { PLATFORM_NAMES } from '../../scheduler/delivery/platforms.ts';
import { heartbeatSpec, loopSpecFromArgs, withOverlap } from './schedule-spec.ts';
import { entryFrame, openSse, readAfterId, type SseStream } from './sse.ts';

/** What the `/api` routes use. */
export interface ApiDeps {
  config: HermesConfig;
  keys: Keys;
  /** Non-blocking client (event streams are read by `fanout`). */
  redis: RedisClient;
  /** The gateway's one shared blocking reader of event streams. */
  fanout: StreamFanout;
  loops: LoopStore;
  schedules: LoopService;
  /** The BullMQ queues (a web message goes to its session's inbox). */
  queues: HermesQueues;
  goals: GoalService;
  cron?: CronApi;
  inflight: InflightRuns;
  streams: Set<SseStream>;
  /** Unsent bytes an event stream may hold before its client is dropped (`api_server.sse_max_buffered_bytes`). */
  sseMaxBufferedBytes?: number;
  log: Logger;
}

const kindSchema = z.enum(['loop', 'heartbeat']);

/** `POST /api/schedules`: a loop in the `/loop` grammar, or a heartbeat by interval and prompt. */
/** The economy fields of a schedule (docs/CONTEXT.md), as the `/loop` flags `--notify`, `--watch`, `--max-tokens`, `--model`. */
/** Where replies also go: a comma list of delivery targets, as `deliver` of `/api/cron/jobs` (`scheduler/delivery/deliver-list.ts`). */
const deliverField = { deliver: z.string().min(1).max(4096).optional() };

const economyFields = {
  notify: z.enum(NOTIFY_WORDS).optional(),
  watch: z.string().min(1).max(2048).optional(),
  max_tokens: z.number().int().positive().max(MAX_TOKENS_LIMIT).optional(),
  model: z.string().min(1).max(64).optional(),
};

const createSchema = z.discriminatedUnion('kind', [
  z
    .object({
      kind: z.literal('loop'),
      session_id: z.string().min(1),
      /** Everything after `/loop`, e.g. `5m check the CI build --times 3 --notify done`. */
      args: z.string().min(1),
      /** `queue`, `skip` or `cancel_other` (`scheduler/loop/loop-overlap.ts`); wins over `--overlap` in `args`. */
      overlap: z.string().optional(),
      ...economyFields,
      ...deliverField,
    })
    .strict(),
  z
    .object({
      kind: z.literal('heartbeat'),
      session_id: z.string().min(1),
      interval_seconds: z.number().positive().max(MAX_INTERVAL_SECONDS),
      prompt: z.string().min(1),
      ...economyFields,
      ...deliverField,
    })
    .strict(),
]);

/** The economy a body's fields ask for (a flag in `args` wins over its field). */
function economyOf(body: { notify?: string; watch?: string; max_tokens?: number; model?: string }): ScheduleEconomy {
  return {
    ...(body.notify ? { notify: parseNotify(body.notify, '`notify`') } : {}),
    ...(body.watch ? { watch: body.watch } : {}),
    ...(body.max_tokens ? { maxTokens: body.max_tokens } : {}),
    ...(body.model ? { model: body.model } : {}),
  };
}

/**
 * The management `/api` router (schedules, cron jobs, session event streams).
 * Bodies are validated with zod; bad input answers 400 with an OpenAI-style error object and changes nothing.
 */
export function apiRouter(deps: ApiDeps): Router {
  const router = Router();

  router.use((_req, _res, next) => {
    if (deps.inflight.draining)
      next(new HttpError(503, 'The gateway is shutting down; retry shortly.', 'service_unavailable', 'server_draining'));
    else next();
  });

  // A page of loops and heartbeats by session id: `limit`, `cursor`, and the filters `status`, `kind`, `platform`, `prefix`.
  router.get('/schedules', async (req, res) => {
    const now = Date.now();
    const status = filterOf(req, 'status', LOOP_STATUSES);
    const kind = filterOf(req, 'kind', kindSchema.options);
    const platform = filterOf(req, 'platform', PLATFORM_NAMES);
    const prefix = filterOf(req, 'prefix');
    const page = await deps.loops.page(pageRequestOf(req, deps.config), {
      ...(prefix ? { sessionPrefix: prefix } : {}),
      keep: keepSchedule({ ...(status ? { status } : {}), ...(kind ? { kind } : {}), ...(platform ? { platform } : {}) }),
    });
    const records = page.items;
    const next = await Promise.all(records.map(async (r) => (r.status === 'active' ? deps.loops.nextDueAt(r) : undefined)));
    res.json({ object: 'list', data: records.map((r, i) => scheduleObject(r, now, next[i])), next_cursor: page.nextCursor });
  });

  router.post('/schedules', async (req, res) => {
    const body = createSchema.parse(req.body ?? {});
    assertSessionId(body.session_id);
    let spec: LoopSpec =
      body.kind === 'loop'
        ? loopSpecFromArgs(body.args, economyOf(body), deps.config)
        : heartbeatSpec(body.interval_seconds, body.prompt, economyOf(body), deps.config);
    // A `deliver` field wins over `--deliver` in `args`; the service checks webhooks against `delivery.webhook_allow`.
    if (body.deliver !== undefined) spec = { ...spec, deliver: parseDeliverList(body.deliver) };
    if (body.kind === 'loop' && body.overlap !== undefined) spec = withOverlap(spec, body.overlap);
    const reply = await deps.schedules.set(body.session_id, body.kind, spec, { origin: { surface: 'api' }, runner: { kind: 'agent' } });
    const record = await deps.loops.get(body.session_id, body.kind);
    res.status(201).json({ reply, schedule: record ? scheduleObject(record, Date.now()) : null });
  });

  router.get('/schedules/:session/:kind', async (req, res) => {
    const { sessionId, kind } = target(req.params);
    const record = await deps.loops.get(sessionId, kind);
    if (!record) throw new HttpError(404, `No ${kind} in session ${sessionId}.`, 'not_found_error', 'schedule_not_found');
    const next = record.status === 'active' ? await deps.loops.nextDueAt(record) : undefined;
    res.json(scheduleObject(record, Date.now(), next));
  });

  for (const action of ['pause', 'resume'] as const) {
    router.post(`/schedules/:session/:kind/${action}`, async (req, res) => {
      const { sessionId, kind } = target(req.params);
      await requireSchedule(deps, sessionId, kind);
      const reply = await deps.schedules[action](sessionId, kind);
      const record = await deps.loops.get(sessionId, kind);
      res.json({ reply, schedule: record ? scheduleObject(record, Date.now()) : null });
    });
  }

  router.delete('/schedules/:session/:kind', async (req, res) => {
    const { sessionId, kind } = target(req.params);
    await requireSchedule(deps, sessionId, kind);
    res.json({ reply: await deps.schedules.stop(sessionId, kind) });
  });

  router.use('/cron', cronRouter(deps.cron, deps.config));
  router.use('/models', modelRouter(deps));
  const sessions = sessionStoreFor(deps.config, deps.redis, deps.keys);
  router.use('/sessions', sessionRouter({ ...deps, sessions, maxChars: deps.config.agent.max_prompt_chars }));

  router.get('/sessions/:id/events', async (req, res) => {
    const sessionId = assertSessionId(String(req.params.id));
    const from = typeof req.query.after === 'string' && req.query.after !== '' ? req.query.after : '0';
    let after = readAfterId(req, from, 'allowed');
    if (after === '$') after = await sessions.lastEventId(sessionId);
    // One shared reader serves every stream (gateway/stream-fanout.ts); beyond the cap this throws (429).
    let sse: SseStream | undefined;
    const sub = deps.fanout.subscribe(deps.keys.events(sessionId), after, (events) => {
      for (const e of events) sse?.sendFrame(entryFrame(e));
    });
    sse = openSse(req, res, { onClose: () => sub.close(), maxBufferedBytes: deps.sseMaxBufferedBytes, log: deps.log });
    deps.streams.add(sse);
    sse.signal.addEventListener('abort', () => deps.streams.delete(sse), { once: true });
  });

  return router;
}

function target(params: Record<string, string | string[] | undefined>): { sessionId: string; kind: LoopKind } {
  const sessionId = assertSessionId(String(params.session));
  const parsed = kindSchema.safeParse(params.kind);
  if (!parsed.success)
    throw new HttpError(404, `Unknown schedule kind "${String(params.kind)}"; use loop or heartbeat.`, 'not_found_error', 'unknown_kind');
  return { sessionId, kind: parsed.data };
}

async function requireSchedule(deps: ApiDeps, sessionId: string, kind: LoopKind): Promise<void> {
  if (!(await deps.loops.get(sessionId, kind))) {
    throw new HttpError(404, `No ${kind} in session ${sessionId}.`, 'not_found_error', 'schedule_not_found');
  }
}
