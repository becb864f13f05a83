/**
 * A session event as clients are handed it (`GET /api/sessions/:id/events`, MCP, any `--json`): its
 * stream id, type and data with every key in snake_case (`occurrence_id`, `due_at`, `lateness_ms`,
 * `spend.input_tokens`). The stream in Redis keeps the names the workers write (`occurrenceId`, …);
 * this is the one place they change, at the boundary (scheduler/text/wire-case.ts has the rule).
 */
import { wireKeys } from '../text/wire-case.ts';
import type { SessionEvent } from './session-store.ts';

/** `event` on the wire: `id` and `type` as they are, `data` in snake_case at every depth. */
export function eventWire(event: SessionEvent): SessionEvent {
  return { id: event.id, type: event.type, data: wireKeys(event.data) };
}
