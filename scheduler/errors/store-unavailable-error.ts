import { HermesError } from './hermes-error.ts';

/**
 * Redis could not be reached, refused a write (read-only replica, OOM) or is
 * too old. `target` names what was tried (host:port or a description), never a
 * password.
 */
export class StoreUnavailableError extends HermesError {
  readonly code = 'STORE_UNAVAILABLE';
  readonly target: string | undefined;

  constructor(message: string, options?: { target?: string; cause?: unknown }) {
    super(message, options);
    this.target = options?.target;
  }
}
