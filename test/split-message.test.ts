/**
 * The Telegram splitter's window rules at their edges (gateway/telegram/split-message.ts): a line break
 * or a space is a cut only in the second half of the window, a line break before a later space, a hard
 * cut at the limit that never separates a surrogate pair, and no part lost or whitespace-only.
 * The F28 property (parts concatenate to the text) is in telegram-topics-and-parts.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { nextCut, splitMessage, TELEGRAM_MESSAGE_LIMIT } from '../gateway/telegram/split-message.ts';

describe('splitMessage near misses', () => {
  it('a text of exactly the limit is one part; one character more is two', () => {
    expect(splitMessage('a'.repeat(10), 10)).toEqual(['a'.repeat(10)]);
    expect(splitMessage('a'.repeat(11), 10)).toEqual(['a'.repeat(10), 'a']);
    // Exactly the limit with a space in the second half: still one part, not cut at the space.
    expect(splitMessage('abcdefgh i', 10)).toEqual(['abcdefgh i']);
    expect(splitMessage('a'.repeat(25), 10)).toEqual(['a'.repeat(10), 'a'.repeat(10), 'a'.repeat(5)]);
    expect(TELEGRAM_MESSAGE_LIMIT).toBe(4096);
    expect(splitMessage('a'.repeat(4097))).toEqual(['a'.repeat(4096), 'a']);
  });

  it('a line break at exactly half the window is a cut; one before the half is not', () => {
    // Window of 10: the break at index 5 (= limit / 2) is taken, the part keeps it.
    expect(nextCut('abcde\nfghijklmno', 0, 10)).toBe(6);
    // At index 4 it is too early: no space either, so a hard cut at the limit.
    expect(nextCut('abcd\nefghijklmno', 0, 10)).toBe(10);
    expect(splitMessage('abcd\nefghijklmno', 10)).toEqual(['abcd\nefghi', 'jklmno']);
  });

  it('a line break is preferred to a later space; a space is taken when the break is too early', () => {
    expect(nextCut('abcdef\nh ijklmno', 0, 10)).toBe(7);
    expect(nextCut('a\ncdefg ijklmno', 0, 10)).toBe(8);
    expect(nextCut('abcde fghijklmno', 0, 10)).toBe(6);
    expect(nextCut('abcd efghijklmno', 0, 10)).toBe(10);
  });

  it('the window starts where the part starts', () => {
    const text = 'aaaaaaaaaa' + 'bbbbbb cdefghij';
    expect(nextCut(text, 10, 10)).toBe(17);
    expect(splitMessage(text, 10)).toEqual(['aaaaaaaaaa', 'bbbbbb ', 'cdefghij']);
  });

  it('a hard cut moves one back from a high surrogate (U+D800…U+DBFF), not from a low one', () => {
    const first = '\ud800\udc00'; // U+10000, the lowest pair
    const last = '\udbff\udfff'; // U+10FFFF, the highest pair
    expect(nextCut('abcdefghi' + first + 'x', 0, 10)).toBe(9);
    expect(nextCut('abcdefghi' + last + 'x', 0, 10)).toBe(9);
    // The pair ends exactly at the limit: the cut stays there.
    expect(nextCut('abcdefgh' + first + 'xy', 0, 10)).toBe(10);
    expect(nextCut('abcdefgh' + last + 'xy', 0, 10)).toBe(10);
    // Just outside the high-surrogate range: a lone U+D7FF or U+DC00 is cut at the limit.
    expect(nextCut('abcdefghi\ud7ffxy', 0, 10)).toBe(10);
    const parts = splitMessage('abcdefghi' + first + 'x', 10);
    expect(parts).toEqual(['abcdefghi', first + 'x']);
  });

  it('whitespace-only parts are left out, a part with one visible character is kept', () => {
    expect(splitMessage('   ', 10)).toEqual([]);
    expect(splitMessage('', 10)).toEqual([]);
    // The middle part is ten spaces: not sent.
    expect(splitMessage('abcdefghi ' + ' '.repeat(10) + 'x', 10)).toEqual(['abcdefghi ', 'x']);
    expect(splitMessage(' x', 10)).toEqual([' x']);
  });

  it('refuses a limit under 2; 2 works', () => {
    expect(() => splitMessage('abc', 1)).toThrow(RangeError);
    expect(() => splitMessage('abc', 1)).toThrow('limit must be at least 2');
    expect(splitMessage('abc', 2)).toEqual(['ab', 'c']);
  });
});
