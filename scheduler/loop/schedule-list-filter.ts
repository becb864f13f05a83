/**
 * What a page of loops and heartbeats may be narrowed to (`/api/schedules`, `hermes status`): a status,
 * a kind, a platform (`reachesPlatform`) and a session id prefix. The prefix is a range of the list
 * order; the others are checked on the records a page reads.
 */
import { reachesPlatform } from '../session/reaches-platform.ts';
import type { LoopKind } from '../tick/tick-kind.ts';
import type { LoopRecord, LoopStatus } from './loop-state.ts';

/** The statuses a loop or heartbeat can be in, as the `status` filter takes them. */
export const LOOP_STATUSES = ['active', 'paused', 'finished'] as const satisfies readonly LoopStatus[];

/** The filters of a schedule list. */
export interface ScheduleListFilter {
  status?: LoopStatus;
  /** Leave finished ones out (when no `status` is asked for). */
  hideFinished?: boolean;
  kind?: LoopKind;
  platform?: string;
  /** Only sessions whose id starts with it. */
  sessionPrefix?: string;
}

/** The record check of a filter, or `undefined` when it keeps every record. */
export function keepSchedule(f: ScheduleListFilter): ((r: LoopRecord) => boolean) | undefined {
  const { status, kind, platform } = f;
  const hideFinished = f.hideFinished === true && status === undefined;
  if (status === undefined && kind === undefined && platform === undefined && !hideFinished) return undefined;
  return (r) =>
    (status === undefined || r.status === status) &&
    (!hideFinished || r.status !== 'finished') &&
    (kind === undefined || r.kind === kind) &&
    (platform === undefined || reachesPlatform(r, platform));
}
