/**
 * Splitting a reply at Telegram's message limit (docs/DESIGN.md §8).
 *
 * Telegram refuses texts longer than 4096 characters (counted in UTF-16 code
 * units, as JavaScript counts `length`). A long reply is cut into parts of at
 * most `limit`, preferring a line break, then a space, in the second half of
 * the window; otherwise a hard cut that never separates a surrogate pair.
 *
 * Nothing is lost at a cut: the line break or space a part was cut at stays at
 * the end of that part, so the parts concatenated are the text exactly (field
 * report F28: a split that dropped the line break changed the reply). The one
 * exception is a part that would be whitespace only — Telegram refuses those,
 * and they show nothing — which is not sent; so whitespace-only text yields no
 * parts. `splitFormatted` (render-markdown.ts) cuts formatted text at the same
 * places, through {@link nextCut}.
 */

/** Telegram's limit for one text message. */
export const TELEGRAM_MESSAGE_LIMIT = 4096;

/**
 * Where the part of `text` that starts at `start` ends (exclusive), when more
 * than `limit` characters are left: just after the last line break of the
 * window, else just after its last space, when that leaves the part at least
 * half the limit long; else at the limit, one earlier if that would separate a
 * surrogate pair.
 */
export function nextCut(text: string, start: number, limit: number): number {
  const window = text.slice(start, start + limit);
  let at = window.lastIndexOf('\n');
  if (at < limit / 2) at = window.lastIndexOf(' ');
  if (at >= limit / 2) return start + at + 1;
  let end = start + limit;
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return end;
}

/** Cut `text` into parts of at most `limit` characters whose concatenation is `text` (whitespace-only parts left out). */
export function splitMessage(text: string, limit = TELEGRAM_MESSAGE_LIMIT): string[] {
  if (limit < 2) throw new RangeError('limit must be at least 2');
  const parts: string[] = [];
  let start = 0;
  while (text.length - start > limit) {
    const end = nextCut(text, start, limit);
    parts.push(text.slice(start, end));
    start = end;
  }
  parts.push(text.slice(start));
  return parts.filter((p) => p.trim().length > 0);
}
