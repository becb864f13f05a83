/**
 * The query of a paged list under `/api` (`/api/cron/jobs`, `/api/schedules`, `/api/sessions`):
 * `limit` (default `api_server.page_size`, at most `api_server.max_page_size`), `cursor` (a
 * `next_cursor` the list gave), and the filters each list names. Bad values are 400s naming the field.
 */
import type { Request } from 'express';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { ScheduleInputError } from '../../scheduler/errors/schedule-input-error.ts';
import { pageLimit, type PageRequest } from '../../scheduler/store/list-page.ts';

/** The page asked for by `limit` and `cursor`. @throws ScheduleInputError (400) for a bad `limit` or `cursor` */
export function pageRequestOf(req: Request, config: Pick<HermesConfig, 'api_server'>): PageRequest {
  const limit = pageLimit(oneValue(req, 'limit'), config.api_server.page_size, config.api_server.max_page_size);
  const cursor = oneValue(req, 'cursor');
  return { limit, ...(cursor ? { cursor } : {}) };
}

/**
 * A filter's value (`state`, `platform`, `name`), checked against `allowed` when given.
 * @throws ScheduleInputError (400) for a value given twice or not allowed
 */
export function filterOf<T extends string>(req: Request, field: string, allowed?: readonly T[]): T | undefined {
  const value = oneValue(req, field);
  if (value === undefined || value === '') return undefined;
  if (allowed && !allowed.includes(value as T)) {
    throw new ScheduleInputError(`\`${field}\` must be one of ${allowed.join(', ')}, got ${value}.`, { field });
  }
  return value as T;
}

function oneValue(req: Request, field: string): string | undefined {
  const v = req.query[field];
  if (v === undefined || typeof v === 'string') return v;
  throw new ScheduleInputError(`\`${field}\` must be given once, as text.`, { field });
}
