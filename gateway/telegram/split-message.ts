/**
 * Splitting a reply at Telegram's message limit (SPEC §8).
 *
 * Telegram refuses texts longer than 4096 characters (counted in UTF-16 code
 * units, as JavaScript counts `length`). A long reply is cut into parts of at
 * most `limit`, preferring a line break, then a space, in the second half of
 * the window; otherwise a hard cut that never separates a surrogate pair. The
 * separator at a soft cut is dropped, so joining the parts with it restores
 * the text. Whitespace-only text yields no parts (Telegram refuses empty messages).
 */

/** Telegram's limit for one text message. */
export const TELEGRAM_MESSAGE_LIMIT = 4096;

/** Cut `text` into parts of at most `limit` characters. */
export function splitMessage(text: string, limit = TELEGRAM_MESSAGE_LIMIT): string[] {
  if (limit < 2) throw new RangeError('limit must be at least 2');
  if (text.trim().length === 0) return [];
  const parts: string[] = [];
  let rest = text;
  while (rest.length > limit) {
    const window = rest.slice(0, limit + 1);
    let cut = window.lastIndexOf('\n');
    if (cut < limit / 2) cut = window.lastIndexOf(' ');
    if (cut >= limit / 2 && cut <= limit) {
      parts.push(rest.slice(0, cut));
      rest = rest.slice(cut + 1);
      continue;
    }
    cut = limit;
    const code = rest.charCodeAt(cut - 1);
    if (code >= 0xd800 && code <= 0xdbff) cut -= 1;
    parts.push(rest.slice(0, cut));
    rest = rest.slice(cut);
  }
  if (rest.length > 0) parts.push(rest);
  return parts.filter((p) => p.length > 0);
}
