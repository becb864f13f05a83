/**
 * The gateway's report of a cron delivery (docs/DESIGN.md §7 Delivery: "delivered" only
 * on evidence from the target). A `telegram:` delivery is `queued` when the
 * worker hands it to the outbound queue; the gateway then reports each
 * attempt's outcome into the run record:
 *
 * - sent → `sent` with the message ids (final);
 * - failed, will be retried → stays `queued`, with the error and `will_retry: true`;
 * - failed for good (403 blocked, 400 chat not found, attempts used up) → `failed`
 *   with the reason and `will_retry: false` (final).
 *
 * A final outcome is never overwritten: not by a later report, and not by the
 * worker's own write of `queued` when the gateway was faster than it
 * (`update-cron-run-1.lua` keeps reported deliveries).
 */
import type { RedisClient } from '../store/redis/connection-factory.ts';
import type { Keys } from '../store/keys.ts';
import { luaScript, runLuaScript } from '../store/redis/lua-script.ts';
import type { CronDelivery, CronDeliveryStatus } from './cron-job.ts';

const REPORT = luaScript('report-cron-delivery-1.lua');

/** The delivery statuses the gateway reports (the others are the worker's own). */
export type ReportedDeliveryStatus = Extract<CronDeliveryStatus, 'sent' | 'queued' | 'failed'>;

/** What the gateway reports about one delivery. */
export type DeliveryReport = Pick<CronDelivery, 'status' | 'evidence' | 'error' | 'message_ids' | 'will_retry' | 'attempts'> & {
  status: ReportedDeliveryStatus;
};

/**
 * Apply a report to the run's delivery of `target`.
 * @returns `updated`; `final` when the delivery already had a final outcome;
 *   `missing` when the run (trimmed from the history) or the target is not there
 * @throws when Redis refused the write
 */
export async function reportCronDelivery(
  redis: RedisClient,
  keys: Keys,
  ref: { cronJobId: string; runOccurrenceId: string; target: string },
  report: DeliveryReport,
  now = Date.now(),
): Promise<'updated' | 'final' | 'missing'> {
  const code = await runLuaScript(
    redis,
    REPORT,
    [keys.cronRuns(ref.cronJobId)],
    [ref.runOccurrenceId, ref.target, JSON.stringify({ ...report, reported_at: now })],
  );
  return code === 1 ? 'updated' : code === 2 ? 'final' : 'missing';
}
