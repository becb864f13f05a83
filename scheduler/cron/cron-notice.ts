/**
 * Notices a cron run sends to its job's targets besides its reply (pure):
 * a failed run is told as a short failure notice (job, error, how to
 * inspect), unless the job says `--notify never`; with `--notify always` a
 * skipped occurrence or a cancelled run is told too (`../economy/notify.ts`). A run that paused the job (its failure
 * streak, field report F19; a token budget: `--max-tokens` or
 * `agent.max_tokens_per_turn`) says so and how to resume; a successful run
 * that spent the job's `--max-tokens` delivers its reply with that notice
 * after it.
 */
import { isoUtc } from './cron-engine.ts';
import { notifySendsNotices, notifyTellsSkips } from '../economy/notify.ts';
import { deliveryText, pausedByStreak, runDeliversReply, type CronDelivery, type CronJob, type CronRun } from './cron-job.ts';

/** Why an occurrence was skipped, by its run's `reason`, as the notice says it. */
const SKIPPED_WHY: Record<string, string> = {
  overlap: 'the previous run was still going',
  'buffer-full': 'the previous run was still going and the overlap buffer was full (cron.max_buffered_occurrences)',
  misfire: 'it was missed beyond its grace window',
};

/**
 * The notice for `run`, or `null` when none is due under the job's policy.
 * @param job - the job after the run was applied (`applyRun`): a job that the
 *   run paused carries its `paused_reason`
 * @param pausedByRun - true when this run moved the job from scheduled to paused
 */
export function runNotice(job: CronJob, run: CronRun, pausedByRun: boolean): string | null {
  if (!notifySendsNotices(job.notify)) return null;
  const who = `Cron job "${job.name}" (${job.id})`;
  if (run.status === 'error') {
    const error = (run.error ?? 'unknown error').replace(/\s+/g, ' ').trim();
    const lines = [`${who} failed: ${error.length > 500 ? `${error.slice(0, 499)}…` : error}`];
    if (pausedByRun)
      lines.push(
        pausedByStreak(job)
          ? `Paused after ${job.failure_streak} failed runs in a row; \`hermes cron resume ${job.id}\` continues.`
          : budgetPause(job),
      );
    lines.push(`\`hermes cron runs ${job.id}\` shows its runs.`);
    return lines.join('\n');
  }
  if (run.status === 'ok' && pausedByRun) return `${who} paused: ${budgetPause(job)}`;
  if (run.status === 'skipped' && notifyTellsSkips(job.notify))
    return `${who} skipped its run due ${isoUtc(run.due_at)}: ${SKIPPED_WHY[run.reason ?? ''] ?? SKIPPED_WHY.misfire}.`;
  if (run.status === 'cancelled' && notifyTellsSkips(job.notify)) {
    return `${who} cancelled its run due ${isoUtc(run.due_at)}: a newer occurrence replaced it (--overlap cancel_other).`;
  }
  return null;
}

/**
 * The run with its notice set up for delivery: `delivery_text` and one
 * pending delivery per target. A run with no notice due is returned as it is
 * (a successful run's reply deliveries are set by the caller).
 * @param targets - the job's concrete targets (`origin` resolved)
 */
export function withNotice(run: CronRun, job: CronJob, pausedByRun: boolean, targets: string[]): CronRun {
  const notice = runNotice(job, run, pausedByRun);
  if (notice === null) return run;
  // A successful run's reply goes out with the notice after it (a quiet one, unless `--notify always`: the notice alone).
  const text = runDeliversReply(job, run) && deliveryText(run) ? `${deliveryText(run)}\n\n${notice}` : notice;
  return { ...run, delivery_text: text, deliveries: targets.map((target): CronDelivery => ({ target, status: 'pending' })) };
}

/** `Paused: token budget of … reached …; \`hermes cron resume <id>\` gives a fresh allowance.` */
function budgetPause(job: CronJob): string {
  const reason = job.paused_reason ?? 'a token budget was reached';
  return `Paused: ${reason}; \`hermes cron resume ${job.id}\` ${job.max_tokens ? 'gives a fresh allowance' : 'continues'}.`;
}
