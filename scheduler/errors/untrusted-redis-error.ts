import { HermesError } from './hermes-error.ts';

/**
 * The Redis at the embedded server's address is not this `HERMES_HOME`'s own: its socket or
 * folder belongs to another user or is open to others, or the server does not know the home's
 * password or run id. Nothing is sent to it beyond that check. `target` names the socket.
 */
export class UntrustedRedisError extends HermesError {
  readonly code = 'REDIS_UNTRUSTED';
  readonly target: string | undefined;

  constructor(message: string, options?: { target?: string; cause?: unknown }) {
    super(message, options);
    this.target = options?.target;
  }
}
