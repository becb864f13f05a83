/**
 * Job references (docs/DESIGN.md §7): a job id, or a case-insensitive name. An exact id
 * wins; a name that matches several jobs is an error listing the candidates.
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import { UnknownJobError } from '../errors/unknown-job-error.ts';
import type { CronJob } from './cron-job.ts';

/**
 * Find the job `ref` names among `jobs` (pure).
 * @throws ScheduleInputError when nothing matches, or when a name matches
 *   several jobs (the message lists their ids)
 */
export function resolveJobRef(ref: string, jobs: readonly CronJob[]): CronJob {
  const wanted = ref.trim();
  if (wanted.length === 0) throw new ScheduleInputError('A job reference (id or name) is required.', { field: 'ref' });
  const byId = jobs.find((j) => j.id === wanted);
  if (byId) return byId;
  const lower = wanted.toLowerCase();
  const byName = jobs.filter((j) => j.name.toLowerCase() === lower);
  if (byName.length === 1) return byName[0]!;
  if (byName.length > 1) {
    const list = byName
      .sort((a, b) => a.created_at - b.created_at)
      .map((j) => `${j.id} (${j.state}, ${j.schedule.display})`)
      .join(', ');
    throw new ScheduleInputError(`"${wanted}" is ambiguous: ${byName.length} jobs have that name: ${list}. Use an id.`, { field: 'ref' });
  }
  throw new UnknownJobError(`No cron job with id or name "${wanted}". \`hermes cron list --all\` shows every job.`);
}
