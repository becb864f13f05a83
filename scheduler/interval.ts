/**
 * Interval tokens of the chat grammar (docs/DESIGN.md §4, §5).
 *
 * Compact tokens: `30s`, `5m`, `2h`, `1d`, `1h30m`, `1.5h`, `10min`, `45sec`.
 * Phrases (two tokens): `10 minutes`, `1.5 hours`, `90 seconds`.
 * A bare number without a unit is not an interval (it belongs to the prompt).
 */
import { nameTable } from './names/name-table.ts';

/** Longest interval a loop or heartbeat may have: 366 days. */
export const MAX_INTERVAL_SECONDS = 366 * 86_400;

/** Largest `--times`. */
export const MAX_TIMES = 1_000_000;

const UNIT_SECONDS = nameTable({
  s: 1,
  sec: 1,
  secs: 1,
  second: 1,
  seconds: 1,
  m: 60,
  min: 60,
  mins: 60,
  minute: 60,
  minutes: 60,
  h: 3600,
  hr: 3600,
  hrs: 3600,
  hour: 3600,
  hours: 3600,
  d: 86400,
  day: 86400,
  days: 86400,
});

const UNIT = Object.keys(UNIT_SECONDS)
  .sort((a, b) => b.length - a.length)
  .join('|');
const PART = new RegExp(`(\\d+(?:\\.\\d+)?)(${UNIT})`, 'gy');
const COMPACT = new RegExp(`^(?:\\d+(?:\\.\\d+)?(?:${UNIT}))+$`);

/** True when `token` is written like a compact interval (`0s`, `5m`), whatever its value. */
export function looksLikeInterval(token: string): boolean {
  return COMPACT.test(token.toLowerCase());
}

const UNIT_LIKE = /^(?:\d+(?:\.\d+)?[a-z]+)+$/;

/**
 * The unknown unit of a token written like an interval (`1x` → `x`, `5m3q` →
 * `q`), or `undefined` when the token is a valid interval or does not look
 * like one. A typo in an interval is then an error, not a prompt (field
 * report F22).
 */
export function unknownIntervalUnit(token: string): string | undefined {
  const t = token.toLowerCase();
  if (!UNIT_LIKE.test(t) || COMPACT.test(t)) return undefined;
  for (const m of t.matchAll(/\d+(?:\.\d+)?([a-z]+)/g)) {
    if (!(m[1]! in UNIT_SECONDS)) return m[1]!;
  }
  return undefined;
}

/**
 * True when `token` is an interval-looking token with a sign (`-5m`, `+1h`,
 * `-1x`): an interval is never signed, so this is an error, not the start of
 * a prompt (the rule of field report F22). A signed bare number (`-5`) is not
 * interval-looking and stays part of the prompt.
 */
export function isSignedInterval(token: string): boolean {
  if (!/^[+-]/.test(token)) return false;
  const unsigned = token.slice(1);
  return looksLikeInterval(unsigned) || unknownIntervalUnit(unsigned) !== undefined;
}

/** The error message for a signed interval token (`isSignedInterval`). */
export function signedIntervalMessage(token: string): string {
  return `"${token}" is not an interval: an interval has no sign; use ${INTERVAL_UNITS_HINT}. Quote the prompt to start it with this word.`;
}

/** The units an interval may use, for messages. */
export const INTERVAL_UNITS_HINT = 's, m, h or d (e.g. 30s, 5m, 2h, 1h30m)';

/**
 * Parse a compact interval token.
 * @returns seconds (rounded to whole seconds, at least 1), or `undefined` when
 *   the token is not an interval.
 */
export function parseIntervalToken(token: string): number | undefined {
  const t = token.toLowerCase();
  if (!COMPACT.test(t)) return undefined;
  let total = 0;
  PART.lastIndex = 0;
  for (let m = PART.exec(t); m; m = PART.exec(t)) {
    total += Number(m[1]) * UNIT_SECONDS[m[2]!]!;
  }
  return total > 0 ? Math.max(1, Math.round(total)) : undefined;
}

/**
 * Parse an interval that may be written as a phrase over two tokens
 * (`10 minutes`, `1.5 hours`) or as one compact token.
 * @returns seconds and how many tokens were used, or `undefined`.
 */
export function parseIntervalAt(tokens: readonly string[], index: number): { seconds: number; used: number } | undefined {
  const first = tokens[index];
  if (first === undefined) return undefined;
  const compact = parseIntervalToken(first);
  if (compact !== undefined) return { seconds: compact, used: 1 };
  const unit = tokens[index + 1]?.toLowerCase();
  if (/^\d+(\.\d+)?$/.test(first) && unit !== undefined && unit in UNIT_SECONDS && unit.length > 1) {
    const seconds = Math.round(Number(first) * UNIT_SECONDS[unit]!);
    if (seconds > 0) return { seconds: Math.max(1, seconds), used: 2 };
  }
  return undefined;
}

/** Human form of a duration: `45s`, `5m`, `1h30m`, `2d`. */
export function formatSeconds(total: number): string {
  const s = Math.round(total);
  if (s < 60) return `${s}s`;
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  return [d && `${d}d`, h && `${h}h`, m && `${m}m`, sec && `${sec}s`].filter(Boolean).join('');
}
