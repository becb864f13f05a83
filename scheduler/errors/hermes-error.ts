/**
 * Base class of every error the product raises on purpose.
 *
 * Each subclass names one failure domain and carries a stable `code` sentinel,
 * so callers test `instanceof` or `code` instead of matching message text.
 * `message` is written for a user: one or two sentences, no stack, no secrets.
 */
export abstract class HermesError extends Error {
  /** Stable sentinel for the failure domain, e.g. `SCHEDULE_INPUT`. */
  abstract readonly code: string;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** True when `err` is one of the product's own, user-presentable errors. */
export function isHermesError(err: unknown): err is HermesError {
  return err instanceof HermesError;
}
