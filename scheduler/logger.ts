/**
 * Structured logs (pino) to stderr, so a command's stdout stays clean for users
 * and scripts. Secrets are redacted by key name wherever they appear; message
 * text from users is only logged at debug level by the callers.
 *
 * Format: human-readable (`pino-pretty`) when the destination is stderr and
 * stderr is a terminal; JSON lines otherwise (files, pipes, journald,
 * containers), so log collectors always get JSON.
 */
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { pino, type DestinationStream, type Logger } from 'pino';
import type { build as PrettyStream } from 'pino-pretty';
import { ensurePrivateDir, ensurePrivateFile } from './private-files.ts';
import { tracing } from './telemetry/tracing.ts';

export type { Logger };

/**
 * A message as a terminal line shows it: control characters (a line break, an ANSI escape) written as
 * `\n`, `\u001b`, so text from a chat or a payload in a message can neither fake a log line nor
 * repaint the terminal. JSON lines escape them by themselves.
 */
export function escapeControls(text: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are what this finds
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) =>
    c === '\n' ? '\\n' : c === '\t' ? '\\t' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/**
 * pino-pretty, loaded by the first logger that writes for a terminal: a command that logs JSON or
 * nothing (most `hermes` calls, every service under a supervisor) never parses it (docs/BENCHMARKS.md,
 * "CLI start-up"). Required at run time, so the compiled CLI leaves it to Node's loader too.
 */
const prettyStream: typeof PrettyStream = (options) =>
  (createRequire(import.meta.url)('pino-pretty') as { build: typeof PrettyStream }).build(options);

/** Field names whose values never reach a log line. */
export const REDACTED_KEYS = [
  'api_key',
  'apiKey',
  'key',
  'token',
  'bot_token',
  'botToken',
  'authorization',
  'Authorization',
  'password',
  'signing_secret',
  'signingSecret',
  'app_token',
  'appToken',
  'webhook_secret',
  'webhookSecret',
  'secret',
];

/**
 * Create the process logger.
 * @param options.level - pino level (default `info`)
 * @param options.name - process role, e.g. `worker`, `gateway`
 * @param options.file - write JSON to this file instead of stderr (folders created 0700, the file 0600)
 * @param options.pretty - human-readable lines; default: stderr is a TTY and no file was given
 * @param options.holdUntil - keep every line until this settles, then write them in order (and later
 *   ones at once): `hermes up` prints its banner first, the start-up lines after it
 */
export function createLogger(
  options: { level?: string; name?: string; file?: string; pretty?: boolean; holdUntil?: Promise<unknown> } = {},
): Logger {
  const pretty = options.file === undefined && (options.pretty ?? process.stderr.isTTY === true);
  let destination: DestinationStream;
  if (options.file) {
    ensurePrivateDir(dirname(options.file));
    ensurePrivateFile(options.file);
    destination = pino.destination({ dest: options.file, sync: true });
  } else if (pretty)
    destination = prettyStream({
      destination: 2,
      sync: true,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname',
      messageFormat: (log, messageKey) => {
        const msg = log[messageKey];
        return typeof msg === 'string' ? escapeControls(msg) : '';
      },
    });
  else destination = pino.destination({ fd: 2, sync: true });
  if (options.holdUntil) destination = heldUntil(destination, options.holdUntil);
  return pino(
    {
      name: options.name ?? 'hermes',
      level: options.level ?? 'info',
      mixin: traceFields,
      redact: {
        paths: REDACTED_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`]),
        censor: '[redacted]',
      },
    },
    destination,
  );
}

/**
 * `trace_id` and `span_id` of the active span, on every line written while one is active (docs/OPERATIONS.md,
 * "Traces"). A new object each time: pino merges the line's fields into it.
 */
function traceFields(): object {
  return tracing().logFields() ?? {};
}

/** `to`, with every line kept until `release` settles. */
function heldUntil(to: DestinationStream, release: Promise<unknown>): DestinationStream {
  let held: string[] | undefined = [];
  const flush = () => {
    const lines = held ?? [];
    held = undefined;
    for (const line of lines) to.write(line);
  };
  release.then(flush, flush);
  return {
    write(line: string) {
      if (held) held.push(line);
      else to.write(line);
    },
  };
}

const LEVEL_METHODS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal']);
const noop = () => {};

/**
 * `parent.child(bindings)`, made when it first writes a line at an enabled level (or is used otherwise).
 * Making a pino child runs the redaction above over its bindings — tens of µs with the wildcard
 * paths — which a worker would pay for every occurrence of an aligned burst before its claim,
 * though most occurrences log nothing at the default level (docs/BENCHMARKS.md, "Tick lateness").
 */
export function lazyChild(parent: Logger, bindings: Record<string, unknown>): Logger {
  let child: Logger | undefined;
  return new Proxy(parent, {
    get(target, prop) {
      if (!child && typeof prop === 'string' && LEVEL_METHODS.has(prop) && !target.isLevelEnabled(prop)) return noop;
      child ??= target.child(bindings);
      const value: unknown = Reflect.get(child, prop, child);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(child) : value;
    },
  });
}
