import { HermesError } from './hermes-error.ts';

/**
 * Why a tool call did not produce a result:
 * `refused` (not declared, not allowed from this surface, outside the roots or
 * hosts, over the per-turn limit, bad arguments), `timeout`, `aborted` (the turn
 * was aborted), `failed` (the tool ran and failed).
 */
export type ToolFailureKind = 'refused' | 'timeout' | 'aborted' | 'failed';

/**
 * A tool call failed. The message is what the model sees as the call's result
 * (it never holds secrets); the turn itself goes on.
 */
export class ToolError extends HermesError {
  readonly code = 'TOOL_FAILED';
  readonly kind: ToolFailureKind;
  readonly tool: string;

  constructor(message: string, options: { kind: ToolFailureKind; tool: string; cause?: unknown }) {
    super(message, options);
    this.kind = options.kind;
    this.tool = options.tool;
  }
}
