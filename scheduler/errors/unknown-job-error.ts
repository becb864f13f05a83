import { ScheduleInputError } from './schedule-input-error.ts';

/**
 * A job reference (id or name) that names no job. Bad input like any other
 * reference error (the CLI exits 2), but a client can tell "not there" from
 * "malformed": `/api` answers it with 404.
 */
export class UnknownJobError extends ScheduleInputError {
  readonly sentinel = 'unknown-job';

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, { field: 'ref', ...options });
  }
}
