/**
 * How the failure of an upstream reads — the model endpoint's and every platform's (Telegram,
 * Slack, Discord) — spelled in one place, so each message names its cause and states a status
 * code once:
 *
 * - an answer: `<who> answered <status>: <what it said>` (`answeredText`), or `<status> <what it
 *   said>` inside a refusal (`statusText`). Clients put the code in front of the text they hand
 *   over (openai: `500 The server had an error`; Discord: `404: Not Found`), so that copy is taken
 *   off (`withoutStatus`);
 * - a platform's start (`platformStartFailure`): 401 and 403 say the bot token was refused; a 404
 *   from an address the operator set says the platform's API is not there (a wrong
 *   `DISCORD_API_URL`), from the platform's own address that the token is unknown when the token is
 *   part of the path (Telegram's Bot API), else what it answered; an answer that is not the API's
 *   (an HTML page) says the API is not there; no answer says it could not connect to the address,
 *   with the network's reason (`networkReason`).
 *
 * Addresses are shown by `showEndpoint` (no credentials, no query); a token is never part of a text.
 */

/** An endpoint URL as shown: scheme, host and path, never credentials or a query. */
export function showEndpoint(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname === '/' ? '' : u.pathname.replace(/\/$/, '')}`;
  } catch {
    return '(unreadable URL)';
  }
}

/**
 * `message` without the copies of `status` it starts with (`500 x`, `500: x`, `HTTP 500 x`, `HTTP 500: x`, `404: Not Found`).
 * Any other text is kept as it is, trimmed.
 */
export function withoutStatus(message: string, status: number): string {
  return message.replace(new RegExp(`^(?:\\s*(?:HTTP\\s+)?${status}(?![\\d.])\\s*:?\\s*)+`, 'i'), '').trim();
}

/**
 * `<who> answered <status>: <message>`, the message without its copy of the status; just
 * `<who> answered <status>` when there is nothing else to say.
 * @param who - the subject as the sentence starts: `The model endpoint`, `Discord's API at https://discord.com/api`
 */
export function answeredText(who: string, status: number, message?: string): string {
  const said = message === undefined ? '' : withoutStatus(message, status);
  return said ? `${who} answered ${status}: ${said}` : `${who} answered ${status}`;
}

/** `<status> <message>` with the message's copy of the status taken off (`404 Unknown Channel`), for a refusal in parentheses. */
export function statusText(status: number, message?: string): string {
  const said = message === undefined ? '' : withoutStatus(message, status);
  return said ? `${status} ${said}` : String(status);
}

/** Words for the network error codes a failed connection carries. */
const NETWORK_CODES: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed',
  ECONNRESET: 'connection reset',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  UND_ERR_CONNECT_TIMEOUT: 'timed out',
  CERT_HAS_EXPIRED: 'TLS certificate expired',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'self-signed TLS certificate',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'TLS certificate not trusted',
};

/**
 * Why a connection failed, from the first network code in the error's chain (`cause`, and the
 * `error`/`original` fields grammY and the Slack client wrap it in): `connection refused (ECONNREFUSED)`.
 * Without one, `fallback` — the caller's own words, since a client's message may hold the URL and
 * with it a token (grammY's requests carry the token in their path).
 */
export function networkReason(err: unknown, fallback = 'no answer'): string {
  const seen = new Set<unknown>();
  let e: unknown = err;
  while (e && typeof e === 'object' && !seen.has(e)) {
    seen.add(e);
    const { code, cause, error, original } = e as { code?: unknown; cause?: unknown; error?: unknown; original?: unknown };
    if (typeof code === 'string' && (code in NETWORK_CODES || /^E[A-Z]+$/.test(code))) {
      const words = Object.hasOwn(NETWORK_CODES, code) ? NETWORK_CODES[code] : undefined;
      return words ? `${words} (${code})` : code;
    }
    e = cause ?? error ?? original;
  }
  return fallback;
}

/** A platform's API as its start-failure texts name it. */
export interface PlatformEndpoint {
  /** `Discord` */
  name: string;
  /** The API's address (shown through `showEndpoint`). */
  url: string;
  /** The variable that set the address, when the operator set one (`DISCORD_API_URL`); absent: the platform's own. */
  urlSetting?: string;
  /** The bot token's variable (`DISCORD_BOT_TOKEN`). */
  tokenSetting: string;
  /** The token is part of the request path, so the platform's own address answers 404 to an unknown one (Telegram). */
  tokenInPath?: boolean;
}

/** How a platform's start failed: it answered with an HTTP status, it answered something else than its API, or nothing answered. */
export type PlatformFailure =
  | { kind: 'answer'; status: number; message?: string }
  | { kind: 'unexpected'; /** what came back: `an answer that is not JSON` */ what: string }
  | { kind: 'network'; reason: string };

/** Why a platform did not start, naming the cause (the rule at the top of this file). One sentence. */
export function platformStartFailure(endpoint: PlatformEndpoint, failure: PlatformFailure): string {
  const at = showEndpoint(endpoint.url);
  const set = endpoint.urlSetting ? ` (${endpoint.urlSetting})` : '';
  if (failure.kind === 'network') return sentence(`Could not connect to ${endpoint.name}'s API at ${at}${set}: ${failure.reason}`);
  if (failure.kind === 'unexpected') return sentence(`${endpoint.name}'s API is not at ${at}${set}: it sent ${failure.what}`);
  const { status, message } = failure;
  if (status === 401 || status === 403 || (status === 404 && endpoint.tokenInPath && !endpoint.urlSetting)) {
    return sentence(`${endpoint.name} refused the bot token (${endpoint.tokenSetting}): ${answeredText(`${at}${set}`, status, message)}`);
  }
  if (status === 404 && endpoint.urlSetting) {
    const orToken = endpoint.tokenInPath ? `, or it does not know the bot token (${endpoint.tokenSetting})` : '';
    return sentence(`${endpoint.name}'s API is not at ${at}${set}${orToken}: ${answeredText('it', status, message)}`);
  }
  return sentence(`${endpoint.name}'s API at ${answeredText(`${at}${set}`, status, message)}`);
}

function sentence(text: string): string {
  return /[.!?]$/.test(text) ? text : `${text}.`;
}
