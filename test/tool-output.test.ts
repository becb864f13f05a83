/**
 * The big-result rule and a watch's collector (worker/tools/tool-output.ts): head and tail cut at
 * line ends, never inside a character, the lines left out named exactly; the digest of a stream
 * whatever its chunks; an output that only grew told apart from one that changed. Pure.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ToolOutput, cutMiddle, type ToolOutputOptions } from '../worker/tools/tool-output.ts';

const limits = (maxBytes: number, headShare = 0.25): ToolOutputOptions => ({ maxBytes, headShare, fileReadBytes: 1 << 20 });
const sha = (text: string) => createHash('sha256').update(text).digest('hex');
const numbered = (n: number) => Array.from({ length: n }, (_, i) => `line ${i + 1}`).join('\n');

/** Push `text` in pieces of the given sizes (the rest in one). */
function pushed(out: ToolOutput, text: string, sizes: number[]): ToolOutput {
  const buf = Buffer.from(text);
  let at = 0;
  for (const n of sizes) {
    out.push(buf.subarray(at, at + n));
    at += n;
  }
  out.push(buf.subarray(at));
  return out;
}

describe('the big-result rule', () => {
  it('an output that fits is whole; one byte more is cut', () => {
    const text = numbered(50);
    const fits = ToolOutput.of(text, limits(Buffer.byteLength(text))).render();
    expect(fits).toEqual({ content: text, bytes: Buffer.byteLength(text), truncated: false });
    const over = ToolOutput.of(text, limits(Buffer.byteLength(text) - 1)).render();
    expect(over.truncated).toBe(true);
    expect(over.content).toContain('left out');
  });

  it("property: head and tail are the output's own start and end, and the lines named are those between", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 30, max: 400 }),
        fc.integer({ min: 40, max: 600 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (lines, maxBytes, share) => {
          const text = `${numbered(lines)}\n`;
          const r = ToolOutput.of(text, limits(maxBytes, share)).render();
          if (!r.truncated) {
            expect(r.content).toBe(text);
            return;
          }
          const m = /\[… ([\d,]+) of ([\d,]+) bytes \(lines ([\d,]+)–([\d,]+)\) left out …\]\n/.exec(r.content)!;
          expect(m).not.toBeNull();
          // The marker starts a line of its own: a head cut inside a line got a line end for it.
          const shownHead = r.content.slice(0, m.index);
          const head = text.startsWith(shownHead) ? shownHead : shownHead.slice(0, -1);
          const tail = r.content.slice(m.index + m[0].length);
          expect(text.startsWith(head)).toBe(true);
          expect(text.endsWith(tail)).toBe(true);
          const [total, from, to] = m.slice(2).map((g) => Number(g.replace(/,/g, ''))) as [number, number, number];
          expect(total).toBe(Buffer.byteLength(text));
          // The head's last whole line is the one before `from` (a part of line `from` may follow) ...
          const h = head.split('\n');
          if (from > 1) expect(h.at(-2)).toBe(`line ${from - 1}`);
          expect(`line ${from}`.startsWith(h.at(-1)!)).toBe(true);
          // ... and the tail's first whole line the one after `to` (after a part of line `to`).
          const t = tail.split('\n');
          if (to < lines && t[0] !== `line ${to + 1}`) {
            expect(`line ${to}`.endsWith(t[0]!)).toBe(true);
            expect(t[1]).toBe(`line ${to + 1}`);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('never splits a character, at the head nor at the tail', () => {
    const text = '日本語'.repeat(400); // 3 bytes each, no line ends
    const r = ToolOutput.of(text, limits(1001)).render();
    expect(r.content).not.toContain('\uFFFD');
    const [head, tail] = r.content.split(/\n?\[….*…\]\n/);
    expect(text.startsWith(head!)).toBe(true);
    expect(text.endsWith(tail!)).toBe(true);
  });

  it('the split is the setting: all head at 1, all tail at 0', () => {
    const text = `${numbered(300)}\n`;
    const headOnly = ToolOutput.of(text, limits(200, 1)).render().content;
    expect(headOnly.startsWith('line 1\n')).toBe(true);
    expect(headOnly).toMatch(/left out …\]\n$/);
    const tailOnly = ToolOutput.of(text, limits(200, 0)).render().content;
    expect(tailOnly.startsWith('[… ')).toBe(true);
    expect(tailOnly.endsWith('line 300\n')).toBe(true);
  });

  it('a message cut to fit a window keeps its head and tail the same way', () => {
    const cut = cutMiddle(`${numbered(1000)}\n`, 300, 0.25, "cut to fit the model's context window");
    expect(cut.startsWith('line 1\n')).toBe(true);
    expect(cut.endsWith('line 1000\n')).toBe(true);
    expect(cut).toMatch(/\[… cut to fit the model's context window: \d+ of [\d,]+ characters kept, lines \d+–\d+ left out …\]/);
    expect(cutMiddle('short', 300, 0.25, 'x')).toBe('short');
  });
});

describe("a watch's collector", () => {
  const watch = (since?: number): ToolOutputOptions => ({
    ...limits(1000),
    watch: { keepBytes: 5000, ...(since !== undefined ? { since } : {}) },
  });

  it("property: the digest is the whole output's, whatever the chunks; so is the digest before `since`", () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 0, maxLength: 3000 }),
        fc.array(fc.integer({ min: 0, max: 400 }), { maxLength: 8 }),
        fc.nat(),
        (text, sizes, cut) => {
          const since = Buffer.byteLength(text) === 0 ? 0 : cut % Buffer.byteLength(text);
          const before = Buffer.from(text).subarray(0, since).toString('utf8');
          const out = pushed(new ToolOutput(watch(since)), text, sizes);
          expect(out.digest()).toBe(sha(text));
          if (Buffer.byteLength(text) > since && Buffer.from(before).length === since) expect(out.appendedTo(sha(before))).toBeDefined();
        },
      ),
    );
  });

  it('tells an output that only grew from one that changed, and keeps a copy only while small', () => {
    const last = `${numbered(100)}\n`;
    const grown = pushed(new ToolOutput(watch(Buffer.byteLength(last))), `${last}line 101\nline 102\n`, [7, 500]);
    const appended = grown.appendedTo(sha(last))!;
    expect(appended.render().content).toBe('line 101\nline 102\n');
    expect(appended.firstLine).toBe(101);
    expect(grown.lines).toBe(102);
    const edited = ToolOutput.of(`${last.replace('line 1\n', 'line one\n')}line 101\n`, watch(Buffer.byteLength(last)));
    expect(edited.appendedTo(sha(last))).toBeUndefined();
    expect(grown.kept()).toBe(`${last}line 101\nline 102\n`);
    expect(ToolOutput.of('x'.repeat(5001), watch()).kept()).toBeUndefined();
  });

  it('bytes not read (a file past its read limit) are in the digest by their count, and the marker names no lines', () => {
    const a = new ToolOutput(watch());
    a.push('head\n');
    a.skip(10_000);
    a.push('tail\n');
    const b = new ToolOutput(watch());
    b.push('head\n');
    b.skip(10_001);
    b.push('tail\n');
    expect(a.digest()).not.toBe(b.digest());
    expect(a.lines).toBeUndefined();
    expect(a.render().content).toBe('head\n[… 10,000 of 10,010 bytes left out (not read) …]\ntail\n');
    expect(a.kept()).toBeUndefined();
  });
});
