/**
 * Whether a schedule (a loop, heartbeat or cron job) has to do with a messaging platform: it was set
 * from that platform, or it delivers there — a target of that platform, or `origin` (or no
 * `--deliver`) with a route on it. The `platform` filter of the lists (`/api/cron/jobs`, `/api/schedules`).
 */
import type { Origin } from './origin.ts';

/** Whether `schedule` was set from `platform` or delivers to it. */
export function reachesPlatform(schedule: { origin: Origin; deliver?: readonly string[] | undefined }, platform: string): boolean {
  if (schedule.origin.surface === platform) return true;
  const targets = schedule.deliver ?? ['origin'];
  return targets.some((t) => t.startsWith(`${platform}:`) || (t === 'origin' && schedule.origin.route?.platform === platform));
}
