/**
 * One page of a list (`/api/cron/jobs`, `/api/schedules`, `/api/sessions`, `hermes cron list`,
 * `hermes status`, the console's overview): the records after a cursor in the list's order
 * (`lex-index.ts`), read a page at a time, never the whole list.
 *
 * Cursors are opaque to clients: the list's name and the last index member a page covered, as
 * base64url JSON. A cursor names a place in the order, not an offset, so records added or removed
 * between two pages neither repeat nor hide a record that existed throughout.
 *
 * Filters the index cannot answer (a state, a platform) are applied to the records read. So that a
 * filter matching few records still reads a bounded amount, one page examines at most
 * `FILTER_SCAN_PAGES` pages' worth of records; a page that stops there holds fewer than `limit`
 * records and still has a `next_cursor`. A list ends only when `next_cursor` is `null`.
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';

/** How many pages' worth of records a filtered page examines at most before it answers short. */
export const FILTER_SCAN_PAGES = 10;

/** A page: its records, and the cursor of the next one (`null`: the list ends here). */
export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

/** What a caller asks of a list. */
export interface PageRequest {
  /** Records at most (already checked against the maximum). */
  limit: number;
  /** A cursor a page of the same list gave, or none for the first page. */
  cursor?: string | undefined;
}

/** Where a list's page reads from. */
export interface PageSource<T> {
  /** The list's name, written into its cursors: a cursor of another list is refused. */
  list: string;
  /** Up to `count` index members after `after`, in order. */
  members(after: string | undefined, count: number): Promise<string[]>;
  /** The records of `members` (`null`: gone meanwhile, skipped). */
  load(members: string[]): Promise<Array<T | null>>;
  /** Whether a record belongs on the page (the filters); default all. */
  keep?: (record: T) => boolean;
}

/**
 * Read one page: `limit` records from `source` after the request's cursor.
 * Reads `limit + 1` index members and `limit` records when nothing is filtered out; with filters, at
 * most `FILTER_SCAN_PAGES × limit` records.
 * @throws ScheduleInputError (`cursor`) when the cursor is not one this list gave
 */
export async function readPage<T>(source: PageSource<T>, request: PageRequest): Promise<Page<T>> {
  let after = request.cursor === undefined ? undefined : decodeCursor(source.list, request.cursor);
  const items: T[] = [];
  let examined = 0;
  for (;;) {
    const want = request.limit - items.length;
    const members = await source.members(after, want + 1);
    const chunk = members.slice(0, want);
    const records = chunk.length === 0 ? [] : await source.load(chunk);
    examined += chunk.length;
    records.forEach((r) => {
      if (r !== null && (source.keep?.(r) ?? true)) items.push(r);
    });
    if (members.length <= want) return { items, nextCursor: null };
    after = chunk.at(-1)!;
    if (items.length >= request.limit || examined >= FILTER_SCAN_PAGES * request.limit) {
      return { items, nextCursor: encodeCursor(source.list, after) };
    }
  }
}

/** The cursor of the place after `member` in `list`. */
export function encodeCursor(list: string, member: string): string {
  return Buffer.from(JSON.stringify({ l: list, a: member })).toString('base64url');
}

/**
 * The index member a cursor of `list` stands for.
 * @throws ScheduleInputError (`cursor`) when it is not one this list gave
 */
export function decodeCursor(list: string, cursor: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  const p = parsed as { l?: unknown; a?: unknown } | undefined;
  if (!p || typeof p !== 'object' || typeof p.a !== 'string') {
    throw new ScheduleInputError(
      '`cursor` is not a cursor this list gave; pass the `next_cursor` of the page before, or none for the first page.',
      {
        field: 'cursor',
      },
    );
  }
  if (p.l !== list) {
    throw new ScheduleInputError(`\`cursor\` belongs to another list (${String(p.l)}), not ${list}; start this list without one.`, {
      field: 'cursor',
    });
  }
  return p.a;
}

/**
 * The number of records a caller asked for, checked: a whole number from 1 to `max`; `fallback` when none.
 * @throws ScheduleInputError (`limit`) otherwise
 */
export function pageLimit(value: unknown, fallback: number, max: number): number {
  if (value === undefined || value === '') return Math.min(fallback, max);
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d+$/.test(value.trim()) ? Number(value) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > max) {
    throw new ScheduleInputError(`\`limit\` must be a whole number from 1 to ${max}, got ${JSON.stringify(value)}.`, { field: 'limit' });
  }
  return n;
}
