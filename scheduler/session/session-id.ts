import { ScheduleInputError } from '../errors/schedule-input-error.ts';

const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,127}$/;

/**
 * Validate a session id: 1–128 characters of letters, digits and `_ . @ : -`,
 * starting with a letter or digit.
 * @throws ScheduleInputError for anything else
 */
export function assertSessionId(id: string): string {
  if (!SESSION_ID.test(id)) {
    throw new ScheduleInputError(
      `Invalid session id "${id.slice(0, 40)}": use 1–128 letters, digits or _ . @ : - (starting with a letter or digit).`,
      { field: 'session' },
    );
  }
  return id;
}
