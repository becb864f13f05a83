/**
 * A request to abort a running turn, published on `Keys.turnAbortChannel`
 * (every worker listens; the one running the turn aborts it, with its tools'
 * processes).
 *
 * - `by: 'stop'` — the session's `/stop`: every running turn of the session.
 * - `by: 'interrupt'` — Ctrl+C in `hermes chat` during a wakeup turn (docs/DESIGN.md §4):
 *   only the tick of `occurrenceId`, so a turn that started after it (a
 *   queued user message, the next tick) is never hit by a late request.
 * - `by: 'overlap'` — a newer occurrence of a cron job with `--overlap cancel_other`
 *   (`worker/cron/cron-processor.ts`): only the run of `occurrenceId`.
 *
 * Processes sharing a Redis run one version (docs/OPERATIONS.md), so the
 * message form is this module's alone.
 */
import { z } from 'zod';

/** Who asked for the abort. */
export const TURN_ABORT_BY = ['stop', 'interrupt', 'overlap'] as const;
export type TurnAbortBy = (typeof TURN_ABORT_BY)[number];

/** What to abort: a session's running turns, or only the one of `occurrenceId`. */
export interface TurnAbortRequest {
  sessionId: string;
  /** Only the turn of this occurrence (a tick's occurrence id); absent: every turn of the session. */
  occurrenceId?: string;
  by: TurnAbortBy;
}

const schema = z.object({
  sessionId: z.string().min(1),
  occurrenceId: z.string().min(1).optional(),
  by: z.enum(TURN_ABORT_BY),
});

/** The channel message for `request` (JSON). */
export function encodeTurnAbort(request: TurnAbortRequest): string {
  return JSON.stringify(request);
}

/** The request in a channel message, or undefined when the message is not one (it is then ignored). */
export function decodeTurnAbort(message: string): TurnAbortRequest | undefined {
  try {
    const parsed = schema.safeParse(JSON.parse(message));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
