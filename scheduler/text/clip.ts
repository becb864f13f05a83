/**
 * Text cut to one line of at most `max` characters: runs of whitespace become one space, and a cut
 * ends with `…` (counted in `max`). For names, prompts and errors shown in tables, status lines and
 * notices; what is cut stays whole in the record it came from.
 */
export function clip(text: string, max: number): string {
  const one = text.replace(/\s+/g, ' ').trim();
  return one.length <= max ? one : `${one.slice(0, max - 1)}…`;
}
