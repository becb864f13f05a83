import { HermesError } from './hermes-error.ts';

/**
 * A process that must run once per `HERMES_HOME` (`hermes up`) found another one running there.
 * `pid` is the one running; the message says how to reach it instead.
 */
export class AlreadyRunningError extends HermesError {
  readonly code = 'ALREADY_RUNNING';
  readonly pid: number;

  constructor(message: string, options: { pid: number }) {
    super(message);
    this.pid = options.pid;
  }
}
