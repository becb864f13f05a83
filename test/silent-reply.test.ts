/**
 * The quiet-reply recogniser (`scheduler/economy/silent-reply.ts`, docs/CONTEXT.md "Quiet ticks"): the
 * shapes real models answer `[SILENT]` in, and the near misses that must still be delivered. The paths
 * that ask it are pinned in quiet-replies.test.ts.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { isSilentReply, SILENT_REPLY } from '../scheduler/economy/silent-reply.ts';
import { NEAR_MISSES, SILENT_LINES, SILENT_SHAPES } from './support/quiet-replies.ts';

describe('isSilentReply', () => {
  it('uses the marker the wakeup text asks for', () => {
    expect(SILENT_REPLY).toBe('[SILENT]');
  });

  it.each([...SILENT_SHAPES, ...SILENT_LINES])('a quiet reply: %s', (_name, reply) => {
    expect(isSilentReply(reply)).toBe(true);
  });

  it.each([...NEAR_MISSES, ['empty', ''] as [string, string]])('not quiet: %s', (_name, reply) => {
    expect(isSilentReply(reply)).toBe(false);
  });

  it('more shapes: a fence with an info string, tildes, a one-line fence, quotes, CRLF, a list mark, emphasis inside the brackets', () => {
    for (const reply of [
      '```text\n[SILENT]\n```',
      '~~~\nsilent\n~~~',
      '```[SILENT]```',
      '"[SILENT]"',
      'Checked the log; no change.\r\n\r\n[SILENT]\r\n',
      '- [SILENT]',
      '[**SILENT**]',
      '***[SILENT]!***',
      '> [SILENT]',
    ]) {
      expect(isSilentReply(reply), JSON.stringify(reply)).toBe(true);
    }
  });

  const wrapper = fc.constantFrom('', ' ', '*', '**', '_', '__', '`', '~~', '"');
  const after = fc.constantFrom('', '.', '!', ' .', '…', ':');
  const marker = fc.constantFrom('[SILENT]', '[silent]', '[Silent]', 'SILENT', 'silent', '[ SILENT ]');
  const sentence = fc
    .array(fc.constantFrom('the', 'build', 'is', 'green', 'deploy', 'done', 'nothing', 'changed', 'log', 'red'), {
      minLength: 2,
      maxLength: 8,
    })
    .map((w) => `${w.join(' ')}.`);

  it('property: any wrapping of the marker, alone or as the first or last line of a reply, is quiet', () => {
    fc.assert(
      fc.property(wrapper, marker, after, fc.array(sentence, { maxLength: 3 }), fc.boolean(), (w, m, a, others, first) => {
        const line = `${w}${m}${a}${[...w].reverse().join('')}`;
        const reply = (first ? [line, ...others] : [...others, line]).join('\n');
        expect(isSilentReply(reply)).toBe(true);
      }),
    );
  });

  it('property: the marker between words on the same line is never quiet', () => {
    fc.assert(
      fc.property(sentence, marker, sentence, (before, m, rest) => {
        expect(isSilentReply(`${before.slice(0, -1)} ${m} ${rest}`)).toBe(false);
      }),
    );
  });
});
