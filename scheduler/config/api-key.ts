/**
 * The key of a home's HTTP API (the gateway's `/v1`, `/api`, `/ui`, `/admin/queues`, `/metrics`,
 * and a worker's metrics port).
 *
 * Which key a gateway or a worker's metrics server requires, first match wins:
 *   1. `API_SERVER_KEY` (`api_server.key`): the operator's own key;
 *   2. `api_server.insecure_no_auth: true`: none — the explicit, loud opt-out, loopback binds only;
 *   3. the home's key file `$HERMES_HOME/api.key`: made at the first start (256 random bits,
 *      base64url) and reused by every later start, so `hermes up` is never open to the other
 *      users of its host. `hermes key` prints it.
 *
 * The file is 0600 in the 0700 home and is read only when it is a regular file (not a symlink)
 * of this user that nobody else may read: a file another user could have planted or read is
 * refused with a `ConfigError` naming it, never used. It is created with an exclusive link, so
 * two processes starting at once end with the same key.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../errors/config-error.ts';
import { createPrivateFile, currentUid, ensurePrivateDir, modeText, OPEN_TO_OTHERS } from '../private-files.ts';

/** The key file of a home: `<home>/api.key`. */
export function apiKeyFile(home: string): string {
  return join(home, 'api.key');
}

/** Random bytes of a made key (256 bits). */
const KEY_BYTES = 32;
/** What a key file may hold: at least 32 characters of the base64url alphabet (a made key has 43). */
const KEY_FILE_CONTENT = /^[A-Za-z0-9_-]{32,512}$/;

/** What a home's HTTP API requires (rules above). */
export type ApiAuth =
  | { mode: 'key'; key: string; source: 'config' }
  | { mode: 'key'; key: string; source: 'file'; file: string }
  | { mode: 'insecure_no_auth' };

/** What an `ApiAuth` says without its key: for banners and logs. */
export type ApiAuthSummary =
  { mode: 'key'; source: 'config' } | { mode: 'key'; source: 'file'; file: string } | { mode: 'insecure_no_auth' };

/** `auth` without its key. */
export function summariseApiAuth(auth: ApiAuth): ApiAuthSummary {
  if (auth.mode === 'insecure_no_auth') return auth;
  return auth.source === 'file' ? { mode: 'key', source: 'file', file: auth.file } : { mode: 'key', source: 'config' };
}

/** The settings `resolveApiAuth` reads. */
export interface ApiAuthSettings {
  home: string;
  api_server: { key?: string | undefined; insecure_no_auth: boolean };
}

/**
 * The key the HTTP API of `config.home` requires (rules above); makes the key file when the home has none.
 * @throws ConfigError when the key file is not this user's private file, or holds no key
 */
export function resolveApiAuth(config: ApiAuthSettings): ApiAuth {
  const key = config.api_server.key;
  if (key) return { mode: 'key', key, source: 'config' };
  if (config.api_server.insecure_no_auth) return { mode: 'insecure_no_auth' };
  const file = apiKeyFile(config.home);
  return { mode: 'key', key: ensureApiKeyFile(config.home), source: 'file', file };
}

/**
 * The key in `<home>/api.key`, made first when there is none.
 * @throws ConfigError when the file is not this user's private file, or holds no key
 */
export function ensureApiKeyFile(home: string): string {
  const existing = readApiKeyFile(home);
  if (existing !== undefined) return existing;
  ensurePrivateDir(home);
  const made = randomBytes(KEY_BYTES).toString('base64url');
  if (createPrivateFile(apiKeyFile(home), `${made}\n`)) return made;
  // Another process made it first: use its key.
  const theirs = readApiKeyFile(home);
  if (theirs === undefined)
    throw new ConfigError(`${apiKeyFile(home)} vanished while it was made; start again.`, { key: 'api_server.key' });
  return theirs;
}

/**
 * The key in `<home>/api.key`, or `undefined` when there is no such file.
 * @throws ConfigError when the file is a symlink, not a regular file, another user's, readable or
 *   writable by others, or holds no key
 */
export function readApiKeyFile(home: string): string | undefined {
  const file = apiKeyFile(home);
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP') throw refused(file, 'is a symlink');
    throw new ConfigError(`Cannot read the API key file ${file} (${code ?? (err as Error).message}).`, {
      key: 'api_server.key',
      cause: err,
    });
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw refused(file, 'is not a regular file');
    if (st.uid !== currentUid()) throw refused(file, `belongs to uid ${st.uid}, not to this user (uid ${currentUid()})`);
    if ((st.mode & OPEN_TO_OTHERS) !== 0) {
      throw refused(
        file,
        `is open to others (mode ${modeText(st.mode)}, expected 0600), so the key may be known to them; ` +
          'remove it (the next start makes a new key) or, if nobody else can have read it, chmod 600 it',
      );
    }
    const key = readFileSync(fd, 'utf8').trim();
    if (!KEY_FILE_CONTENT.test(key)) throw refused(file, 'does not hold a key (32 or more characters of A-Z a-z 0-9 _ -)');
    return key;
  } finally {
    closeSync(fd);
  }
}

function refused(file: string, why: string): ConfigError {
  return new ConfigError(`Refusing the API key file ${file}: it ${why}.`, { key: 'api_server.key' });
}
