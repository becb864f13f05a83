/**
 * Structured logs (pino) to stderr, so a command's stdout stays clean for users
 * and scripts. Secrets are redacted by key name wherever they appear; message
 * text from users is only logged at debug level by the callers.
 */
import { pino, type Logger } from 'pino';

export type { Logger };

/** Field names whose values never reach a log line. */
export const REDACTED_KEYS = [
  'api_key', 'apiKey', 'key', 'token', 'bot_token', 'botToken', 'authorization', 'Authorization', 'password',
];

/**
 * Create the process logger.
 * @param options.level - pino level (default `info`)
 * @param options.name - process role, e.g. `worker`, `gateway`
 * @param options.file - write to this file (folders created) instead of stderr
 */
export function createLogger(options: { level?: string; name?: string; file?: string } = {}): Logger {
  return pino(
    {
      name: options.name ?? 'hermes',
      level: options.level ?? 'info',
      redact: {
        paths: REDACTED_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`]),
        censor: '[redacted]',
      },
    },
    options.file ? pino.destination({ dest: options.file, mkdir: true, sync: true }) : pino.destination({ fd: 2, sync: true }),
  );
}
