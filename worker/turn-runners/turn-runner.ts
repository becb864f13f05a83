/**
 * The turn runner contract (SPEC §3): a turn takes the session's current
 * transcript plus one new input and produces a reply.
 */

/** A chat message as sent to a runner. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** One turn to run. */
export interface TurnRequest {
  sessionId: string;
  /** The transcript so far, then the new input as the last `user` message. */
  messages: ChatMessage[];
  /** Aborted by a drain deadline or a user interrupt; runners stop promptly. */
  signal: AbortSignal;
  /** Extra environment for command runners (e.g. `HERMES_TICK`). Never secrets. */
  env?: Record<string, string>;
}

/**
 * Produces a reply for a turn.
 * @throws TurnError (kind `network` when the model was never reached, `model`,
 *   `timeout`, `aborted`, `command`, `config`)
 */
export interface TurnRunner {
  readonly kind: 'agent' | 'command';
  run(request: TurnRequest): Promise<string>;
}
