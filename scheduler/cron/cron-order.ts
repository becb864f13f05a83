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

/** Spellings looked up at most for a name with letters other than ASCII ones (`cronNameSpellings`). */
const MAX_SPELLINGS = 16;

/**
 * Where in the list order the names equal to `name` in any case (`toLowerCase`, as references compare) are:
 * the name with each letter in either case, folded as the order is. The order folds ASCII letters only, so
 * a name with other letters has several spellings; past `MAX_SPELLINGS` the rest of the name is left out
 * and the spellings are prefixes (`whole` false) whose members are compared by name.
 */
export function cronNameSpellings(name: string): { spellings: string[]; whole: boolean } {
  let spellings = [''];
  for (const ch of name) {
    const forms = [...new Set([ch, ch.toLowerCase(), ch.toUpperCase()].map(foldName))];
    if (spellings.length * forms.length > MAX_SPELLINGS) return { spellings, whole: false };
    spellings = spellings.flatMap((s) => forms.map((f) => s + f));
  }
  return { spellings, whole: true };
}

/** Whether a list-order member names a job whose name equals `name` in any case. */
export function cronOrderNamed(member: string, name: string): boolean {
  return member.slice(0, member.lastIndexOf('\0')).toLowerCase() === name.toLowerCase();
}
