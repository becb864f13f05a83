import { HermesError } from './hermes-error.ts';

/**
 * A messaging platform (Telegram, a webhook target) said no or could not be
 * reached. Carries the platform, the API method and the platform's own code
 * and description; never the bot token.
 */
export class PlatformError extends HermesError {
  readonly code = 'PLATFORM_ERROR';
  readonly platform: string;
  readonly method: string | undefined;
  readonly errorCode: number | undefined;

  constructor(message: string, options: { platform: string; method?: string; errorCode?: number; cause?: unknown }) {
    super(message, options);
    this.platform = options.platform;
    this.method = options.method;
    this.errorCode = options.errorCode;
  }
}
