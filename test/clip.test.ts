/** `clip`: the one way names, prompts and errors are cut for a table, a status line or a notice. */
import { describe, expect, it } from 'vitest';
import { clip } from '../scheduler/text/clip.ts';

describe('clip', () => {
  it('keeps text that fits, on one line', () => {
    expect(clip('check  the\nbuild\t', 15)).toBe('check the build');
    expect(clip('exactly ten', 11)).toBe('exactly ten');
  });

  it('cuts text one character over, with the ellipsis counted in the limit', () => {
    expect(clip('exactly ten!', 11)).toBe('exactly te…');
    expect(clip('exactly ten!', 11)).toHaveLength(11);
  });
});
