/**
 * The order cron jobs are listed in (`hermes cron list`, `/api/cron/jobs`, `hermes status`, the
 * console): by name, ASCII letters folded to lower case, then by id — the member of the job's
 * shard's list order (`Keys.cronJobOrder`, store/lex-index.ts). A name prefix is a range of it.
 * The scripts that write and delete a record (`put-cron-job-3.lua`, `delete-cron-job-8.lua`)
 * spell the same member from the stored name.
 */
import { foldName } from '../store/lex-index.ts';
import type { CronJob } from './cron-job.ts';

/** A job's member in its shard's list order: `<folded name>\0<id>`. */
export function cronOrderMember(job: Pick<CronJob, 'id' | 'name'>): string {
  return `${foldName(job.name ?? '')}\0${job.id}`;
}

/** The job id of a list-order member (after its last NUL; an id holds none). */
export function cronOrderId(member: string): string {
  return member.slice(member.lastIndexOf('\0') + 1);
}

/** The range of the list order whose names start with `prefix` (folded as the order is). */
export function cronNamePrefix(prefix: string): string {
  return foldName(prefix);
}
