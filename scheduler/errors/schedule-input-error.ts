import { HermesError } from './hermes-error.ts';

/**
 * Bad input from a user or a client: an invalid interval, cron expression,
 * time zone, `--times` value, job reference, prompt size, request body.
 *
 * Raised before anything is written: bad input changes nothing (SPEC §11).
 */
export class ScheduleInputError extends HermesError {
  readonly code = 'SCHEDULE_INPUT';
  /** The offending token or field, when one can be named. */
  readonly field: string | undefined;

  constructor(message: string, options?: { field?: string; cause?: unknown }) {
    super(message, options);
    this.field = options?.field;
  }
}
