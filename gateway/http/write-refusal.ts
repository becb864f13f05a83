/**
 * Recognise a write that Redis refused although it is reachable — a state of
 * the server, not a bug of the caller, and over once the operator fixed it:
 *
 * - `OOM` (`maxmemory` reached with `noeviction`),
 * - `MISCONF` (the last RDB save or an AOF write failed, e.g. ENOSPC: the disk is full),
 * - `READONLY` (a replica, e.g. after a failover), `NOREPLICAS` (`min-replicas-to-write` not met),
 * - `MASTERDOWN`, `LOADING` (the dataset is still loading), `CLUSTERDOWN`, `TRYAGAIN`, `BUSY` (a script runs).
 *
 * Redis puts the code first in its error reply (`-OOM command not allowed…`);
 * an error raised inside a Lua script carries it further on (`ERR Error
 * running script … -OOM …`, or the script's own `@user_script` prefix); a
 * refused MULTI/EXEC fails as `EXECABORT` with the commands' own errors in
 * ioredis's `previousErrors`; and the product's own errors keep the Redis
 * error as `cause`. All of those are recognised. Callers answer with "retry later" (HTTP 503 with `Retry-After`),
 * never an internal error.
 */

/** The codes above. */
export const REDIS_REFUSAL_CODES = [
  'OOM',
  'MISCONF',
  'READONLY',
  'NOREPLICAS',
  'MASTERDOWN',
  'LOADING',
  'CLUSTERDOWN',
  'TRYAGAIN',
  'BUSY',
] as const;

export type RedisRefusalCode = (typeof REDIS_REFUSAL_CODES)[number];

/** A reply that starts with a code, or a code after `-` or `: ` inside a script error. */
const CODE_AT = new RegExp(`(?:^|-|:\\s)(${REDIS_REFUSAL_CODES.join('|')})\\s`);

/** Causes followed at most (a cause chain is never this long in practice). */
const MAX_CAUSES = 8;

/**
 * The refusal a thrown value reports (it or one of its causes), or `undefined` for any other error.
 * `ENOSPC` that reaches a client without a Redis code counts as `MISCONF`.
 */
export function redisRefusal(err: unknown): { code: RedisRefusalCode; message: string } | undefined {
  let e: unknown = err;
  for (let i = 0; i < MAX_CAUSES && e && typeof e === 'object'; i++) {
    const previous = (e as { previousErrors?: unknown }).previousErrors;
    if (Array.isArray(previous)) {
      for (const p of previous) {
        const found = redisRefusal(p);
        if (found) return found;
      }
    }
    const raw = (e as { message?: unknown }).message;
    const message = typeof raw === 'string' ? raw : '';
    const m = CODE_AT.exec(message);
    if (m) return { code: m[1] as RedisRefusalCode, message: firstLine(message) };
    if ((e as { code?: unknown }).code === 'ENOSPC' || /\bENOSPC\b|No space left on device/.test(message)) {
      return { code: 'MISCONF', message: firstLine(message) };
    }
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

function firstLine(message: string): string {
  const line = message.split('\n')[0]!.trim();
  return line.length > 300 ? `${line.slice(0, 300)}…` : line;
}
