/**
 * The overlap buffer of a cron job with `--overlap buffer_all` (Temporal's BUFFER_ALL, bounded), as
 * pure rules; the store keeps it as one sorted set per job (`Keys.cronBuffer`, `CronStore.joinBuffer`).
 *
 * Policy (docs/CRON.md, "Overlap"):
 *  - every occurrence of the job joins the buffer at its gate, by due time; it runs only when it is
 *    first in the buffer and takes the job's turn lock, and leaves the buffer at its claim — so the
 *    waiting occurrences run one after another, in the order they were due;
 *  - at most `cron.max_buffered_occurrences` wait: one whose place is at or beyond that is recorded
 *    as skipped (`buffer-full`), so a run that never ends cannot pile up work without bound;
 *  - an entry that can no longer run is no one's turn: one of another generation (the schedule
 *    was edited, or paused and resumed) and a scheduled one due at or before the job's last handled
 *    occurrence (`last_due_at`: committed, or dropped as coalesced) are left out and removed.
 */
import type { CronJob, OccurrenceTrigger } from './cron-job.ts';

/** One occurrence in the buffer. */
export interface BufferedOccurrence {
  generation: number;
  trigger: OccurrenceTrigger;
  occurrenceId: string;
}

/** The sorted-set member of `o`: `<generation> <trigger> <occurrence id>` (its score is the due time). */
export function bufferMember(o: BufferedOccurrence): string {
  return `${o.generation} ${o.trigger} ${o.occurrenceId}`;
}

/** The occurrence a member stands for, or undefined when it is not one. */
function parseMember(member: string): BufferedOccurrence | undefined {
  const [generation, trigger, occurrenceId] = member.split(' ');
  if (!occurrenceId || (trigger !== 'schedule' && trigger !== 'manual')) return undefined;
  return { generation: Number(generation), trigger, occurrenceId };
}

/**
 * Where `me` stands in the buffer (0: first, its turn once the lock is free), and which entries are stale.
 * @param entries - the buffer as `[member, due ms]`, in the sorted set's order (due time, then member)
 * @returns `place` among the entries still live (`me` counted as live), and the stale members to remove
 */
export function bufferPlace(
  entries: ReadonlyArray<readonly [string, number]>,
  me: string,
  job: Pick<CronJob, 'generation' | 'last_due_at'>,
): { place: number; stale: string[] } {
  const stale = entries.filter(([member, dueAt]) => member !== me && isStale(member, dueAt, job)).map(([member]) => member);
  const at = entries.findIndex(([member]) => member === me);
  const before = at < 0 ? entries : entries.slice(0, at);
  return { place: before.filter(([member]) => !stale.includes(member)).length, stale };
}

function isStale(member: string, dueAt: number, job: Pick<CronJob, 'generation' | 'last_due_at'>): boolean {
  const o = parseMember(member);
  if (!o) return true;
  if (o.trigger === 'manual') return false;
  return o.generation !== job.generation || (job.last_due_at !== null && dueAt <= job.last_due_at);
}
