/**
 * `hermes key`: the key this home's HTTP API requires (scheduler/config/api-key.ts), for `curl`,
 * the OpenAI SDKs and the console's password prompt: `API_SERVER_KEY` when set, else the home's key
 * file, made now when no gateway has started yet (the gateway then uses the same). With
 * `api_server.insecure_no_auth` there is no key, which is an error (exit 2).
 */
import { resolveApiAuth } from '../../scheduler/config/api-key.ts';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { ConfigError } from '../../scheduler/errors/config-error.ts';
import { printOut, terminalJson } from '../terminal-text.ts';

/**
 * Print the key (`--json`: `{ key, source, file }`, `file` null for a configured key).
 * @throws ConfigError with `insecure_no_auth`, or when the key file cannot be trusted
 */
export function printApiKey(cfg: HermesConfig, opts: { json?: boolean }, out: (line: string) => void = printOut): void {
  const auth = resolveApiAuth(cfg);
  if (auth.mode === 'insecure_no_auth') {
    throw new ConfigError('There is no API key: api_server.insecure_no_auth is set, so the HTTP API serves without one.', {
      key: 'api_server.insecure_no_auth',
    });
  }
  const file = auth.source === 'file' ? auth.file : null;
  out(opts.json ? terminalJson({ key: auth.key, source: auth.source, file }, 0) : auth.key);
}
