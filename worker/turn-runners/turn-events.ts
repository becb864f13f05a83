/**
 * Where a turn's own events (tool calls and results) go while it runs: the
 * session event stream, so `hermes chat`, `/api` and reattaching clients see
 * the work as it happens (docs/DESIGN.md §3). Telegram gets only the final reply.
 */
import type { TurnEvent } from './turn-runner.ts';
import type { WorkerDeps } from '../worker-deps.ts';

/** An `onEvent` sink that appends to `sessionId`'s event stream (tagged with `extra`, e.g. the occurrence). */
export function sessionEventSink(
  deps: WorkerDeps,
  sessionId: string,
  extra: Record<string, unknown> = {},
): (event: TurnEvent) => Promise<unknown> {
  return (event) => deps.sessions.appendEvent(sessionId, event.type, { ...event.data, ...extra });
}
