/**
 * Lists on the command line (`hermes cron list`, `hermes status`) read a page of
 * `api_server.page_size` records by default, like `/api`; `--cursor` continues where the hint
 * of the page before said, `--limit` sets the page's length, and `--all` reads every page.
 */
import type { Page, PageRequest } from '../scheduler/store/list-page.ts';
import { pageLimit } from '../scheduler/store/list-page.ts';
import type { HermesConfig } from '../scheduler/config/config.ts';

/** The paging flags of a list command. */
export interface PageFlags {
  all?: boolean;
  limit?: string;
  cursor?: string;
}

/**
 * The records the flags ask for: one page, or with `all` every page (`api_server.max_page_size` at a time).
 * @throws ScheduleInputError for a bad `--limit` or `--cursor`
 */
export async function readListPages<T>(
  config: Pick<HermesConfig, 'api_server'>,
  flags: PageFlags,
  read: (request: PageRequest) => Promise<Page<T>>,
): Promise<Page<T>> {
  const { page_size: pageSize, max_page_size: maxPageSize } = config.api_server;
  if (!flags.all) {
    const limit = pageLimit(flags.limit, pageSize, maxPageSize);
    return await read({ limit, ...(flags.cursor ? { cursor: flags.cursor } : {}) });
  }
  const items: T[] = [];
  let cursor = flags.cursor;
  do {
    const page = await read({ limit: maxPageSize, ...(cursor ? { cursor } : {}) });
    items.push(...page.items);
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return { items, nextCursor: null };
}

/** The line that says how to see more after a page that is not the last, or none. */
export function moreHint(command: string, page: Page<unknown>, what: string): string[] {
  if (page.nextCursor === null) return [];
  return [`${page.items.length} ${what} shown; more: ${command} --cursor ${page.nextCursor} (or --all)`];
}
