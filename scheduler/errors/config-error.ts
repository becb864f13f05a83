import { HermesError } from './hermes-error.ts';

/** The configuration file or an environment override is invalid; `key` names it. */
export class ConfigError extends HermesError {
  readonly code = 'CONFIG_INVALID';
  readonly key: string | undefined;

  constructor(message: string, options?: { key?: string; cause?: unknown }) {
    super(message, options);
    this.key = options?.key;
  }
}
