/**
 * `/api/sessions`: the sessions at a glance, a session's transcript page by page, its set-aside
 * input, and a user message to a session (docs/GATEWAY.md "Sessions"). A message sent here is chat input on
 * surface `web` (gateway/web-input.ts): never a command turn; its reply arrives on the session's
 * event stream (`GET /api/sessions/:id/events`, in api-routes.ts).
 */
import { Router } from 'express';
import { z } from 'zod';
import { assertSessionId } from '../../scheduler/session/session-id.ts';
import type { SessionStore } from '../../scheduler/session/session-store.ts';
import { setAsideInputs, setAsideView } from '../../scheduler/session/set-aside.ts';
import { sessionSummaryPage, type SessionSummary, type SummaryStores } from '../session-summaries.ts';
import { filterOf, pageRequestOf } from './list-query.ts';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { sendWebMessage, type WebInputDeps } from '../web-input.ts';
import { goalObject, scheduleObject } from '../../scheduler/loop/schedule-view.ts';

/** What the session routes use. */
export interface SessionRouteDeps extends SummaryStores, WebInputDeps {
  sessions: SessionStore;
  /** `api_server.page_size` and `max_page_size`. */
  config: Pick<HermesConfig, 'api_server'>;
}

/** Largest transcript page. */
export const MAX_TRANSCRIPT_PAGE = 200;

const pageSchema = z.object({
  limit: z.coerce.number().int().min(1).max(MAX_TRANSCRIPT_PAGE).default(50),
  before: z.coerce.number().int().min(0).optional(),
});

const messageSchema = z
  .object({
    text: z.string(),
    /** An id of the caller's own: the same id sent again is queued once. */
    message_id: z.string().optional(),
  })
  .strict();

/** Routes under `/api/sessions` (but its `/:id/events` stream). */
export function sessionRouter(deps: SessionRouteDeps): Router {
  const router = Router();

  // A page of sessions by id: `limit`, `cursor`, and `prefix` (of the id).
  router.get('/', async (req, res) => {
    const now = Date.now();
    const prefix = filterOf(req, 'prefix');
    const page = await sessionSummaryPage(deps, pageRequestOf(req, deps.config), prefix);
    res.json({ object: 'list', data: page.items.map((s) => sessionObject(s, now)), next_cursor: page.nextCursor });
  });

  router.get('/:id/transcript', async (req, res) => {
    const sessionId = assertSessionId(String(req.params.id));
    const { limit, before } = pageSchema.parse(req.query);
    const page = await deps.sessions.transcriptPage(sessionId, { limit, ...(before !== undefined ? { before } : {}) });
    res.json({
      object: 'list',
      session_id: sessionId,
      total: page.total,
      data: page.messages.map((m, i) => ({ index: page.start + i, ...m })),
      // The next (older) page: `?before=<this>`; null at the oldest message kept.
      before: page.start > 0 ? page.start : null,
    });
  });

  // Input set aside after its tries failed (scheduler/session/set-aside.ts), newest first.
  router.get('/:id/set-aside', async (req, res) => {
    const sessionId = assertSessionId(String(req.params.id));
    const inputs = await setAsideInputs(deps.redis, deps.keys, sessionId);
    res.json({ object: 'list', session_id: sessionId, data: inputs.map(setAsideView) });
  });

  router.post('/:id/messages', async (req, res) => {
    const body = messageSchema.parse(req.body ?? {});
    const sent = await sendWebMessage(deps, {
      sessionId: String(req.params.id),
      text: body.text,
      ...(body.message_id !== undefined ? { clientId: body.message_id } : {}),
    });
    res.status(202).json({
      object: 'session.message',
      id: sent.id,
      session_id: sent.sessionId,
      occurrence_id: sent.occurrenceId,
      event_id: sent.eventId,
      events_url: `/api/sessions/${encodeURIComponent(sent.sessionId)}/events?after=${sent.eventId}`,
    });
  });

  return router;
}

/** The API shape of a session summary (times in epoch ms). */
function sessionObject(s: SessionSummary, now: number) {
  return {
    id: s.id,
    loop: s.loop ? scheduleObject(s.loop.record, now, s.loop.nextDueAt) : null,
    heartbeat: s.heartbeat ? scheduleObject(s.heartbeat.record, now, s.heartbeat.nextDueAt) : null,
    goal: s.goal ? goalObject(s.goal) : null,
    last_activity_at: s.lastActivityAt,
    last_reply: s.lastReply,
  };
}
