import { HermesError } from './hermes-error.ts';

/**
 * Bad input from a user or a client: an invalid interval, cron expression,
 * time zone, `--times` value, job reference, prompt size, request body.
 *
 * Raised before anything is written: bad input changes nothing (docs/DESIGN.md §11).
 *
 * The same services serve `/api` and the CLI, so a message names an input by
 * its field, in backticks, as the `/api` JSON body spells it (`` `notify` must
 * be auto, always, done, never``), never by a CLI flag; the CLI writes the flag
 * in its place when it reports (`cli/run-command.ts`). Chat grammar
 * (`/loop 5m … --times 3`) is text the user typed and keeps its own words.
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
