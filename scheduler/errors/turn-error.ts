import { HermesError } from './hermes-error.ts';

/** Why a turn failed; `network` means the model was never reached (retryable). */
export type TurnFailureKind = 'network' | 'model' | 'timeout' | 'aborted' | 'command' | 'config';

/**
 * A turn could not produce a reply: the model endpoint failed, the command
 * exited non-zero or timed out, or the turn was aborted by a drain.
 */
export class TurnError extends HermesError {
  readonly code = 'TURN_FAILED';
  readonly kind: TurnFailureKind;
  readonly sessionId: string | undefined;

  constructor(message: string, options: { kind: TurnFailureKind; sessionId?: string; cause?: unknown }) {
    super(message, options);
    this.kind = options.kind;
    this.sessionId = options.sessionId;
  }

  /** Failures that never reached the model may be retried with backoff (SPEC §7 Retries). */
  get retryable(): boolean {
    return this.kind === 'network';
  }
}
