import type { ModelSpend, TurnBudgetOverrun } from '../model-spend.ts';
import { HermesError } from './hermes-error.ts';

/**
 * Why a turn failed; `network` means the model was never reached (retryable); `budget` means the
 * turn's model calls reached `agent.max_tokens_per_turn` (the schedule pauses).
 */
/** `in-doubt`: a command turn whose outcome is unknown, not run again (`worker.command_turn_on_doubt: report`). */
export type TurnFailureKind = 'network' | 'model' | 'timeout' | 'aborted' | 'command' | 'config' | 'budget' | 'in-doubt';

/**
 * A turn could not produce a reply: the model endpoint failed, the command
 * exited non-zero or timed out, the turn spent its token budget, or it was
 * aborted by a drain.
 */
export class TurnError extends HermesError {
  readonly code = 'TURN_FAILED';
  readonly kind: TurnFailureKind;
  readonly sessionId: string | undefined;
  /** What the model calls made before the failure cost (set by the agent runner; absent for command turns). */
  spend: ModelSpend | undefined;
  /** Kind `budget`: what the turn used and the limit it passed. */
  readonly overrun: TurnBudgetOverrun | undefined;

  constructor(
    message: string,
    options: { kind: TurnFailureKind; sessionId?: string; cause?: unknown; spend?: ModelSpend; overrun?: TurnBudgetOverrun },
  ) {
    super(message, options);
    this.kind = options.kind;
    this.sessionId = options.sessionId;
    this.spend = options.spend;
    this.overrun = options.overrun;
  }

  /** Failures that never reached the model may be retried with backoff (docs/DESIGN.md §7 Retries). */
  get retryable(): boolean {
    return this.kind === 'network';
  }
}
