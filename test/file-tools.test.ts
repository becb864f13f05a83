/**
 * `read_file` and `list_dir` called directly (worker/tools/file-tools.ts): what the model is told
 * about them, the path rule at its edges (length, roots reached through a symlink, several roots),
 * the file-type rule, the descriptor check without `/proc`, and the paging of `read_file` (lines,
 * the end of a file, files larger than one read). The toolbox's wiring of them is in
 * tool-sandbox.test.ts, the swap race in tool-file-race.test.ts.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ToolError } from '../scheduler/errors/tool-error.ts';
import { FD_DIRS, MAX_PATH_CHARS, fileTools, resolveInRoots } from '../worker/tools/file-tools.ts';
import type { AgentTool } from '../worker/tools/tool.ts';
import { ToolOutput } from '../worker/tools/tool-output.ts';

let dir: string;
let root: string;
let second: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'hermes-file-tools-'));
  root = join(dir, 'root');
  second = join(dir, 'second');
  mkdirSync(join(root, 'sub', 'deeper'), { recursive: true });
  mkdirSync(second);
  writeFileSync(join(root, 'a.txt'), 'alpha\n');
  writeFileSync(join(root, 'sub', 'b.txt'), 'beta');
  writeFileSync(join(second, 'c.txt'), 'gamma');
  writeFileSync(join(dir, 'outside.txt'), 'outside');
  writeFileSync(join(root, 'empty.txt'), '');
  symlinkSync(join(root, 'sub'), join(root, 'abs-link')); // an absolute link that stays inside
  symlinkSync('sub/b.txt', join(root, 'rel-link'));
  symlinkSync('../outside.txt', join(root, 'rel-out'));
  symlinkSync(root, join(dir, 'root-link')); // the root reached through a symlink
  symlinkSync('loop-b', join(root, 'loop-a'));
  symlinkSync('loop-a', join(root, 'loop-b'));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const MB = 1 << 20;
const output = (maxBytes = MB, fileReadBytes = MB) => new ToolOutput({ maxBytes, headShare: 0.25, fileReadBytes });
const tools = (roots = [root], options: { fdDirs?: readonly string[] } = {}) => {
  const [read, list] = fileTools(roots, options) as [AgentTool, AgentTool];
  return { read, list };
};

/** The text the model gets from a call (a streamed result rendered as the toolbox does). */
async function call(tool: AgentTool, args: Record<string, unknown>, out = output()): Promise<string> {
  const r = await tool.call(args, {
    sessionId: 's',
    surface: 'chat',
    signal: new AbortController().signal,
    output: out,
    timeoutMs: 30_000,
  });
  return typeof r === 'string' ? r : r.render().content;
}

/** The ToolError a call fails with. */
async function failure(tool: AgentTool, args: Record<string, unknown>, out = output()): Promise<ToolError> {
  const err = await call(tool, args, out).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ToolError);
  return err as ToolError;
}

const numbered = (n: number, end = '\n') => Array.from({ length: n }, (_, i) => `line ${i + 1}`).join('\n') + end;

describe('what the model is told', () => {
  it('names, groups, idempotence, and descriptions that name the allowed folders and the first one', () => {
    const { read, list } = tools([root, second]);
    expect(read.name).toBe('read_file');
    expect(list.name).toBe('list_dir');
    expect(read.groups).toEqual(['read_file', 'files']);
    expect(list.groups).toEqual(['list_dir', 'files']);
    expect(read.idempotent).toBe(true);
    expect(list.idempotent).toBe(true);
    expect(read.description).toContain(`Allowed folders: ${root}, ${second}. A relative path is read from ${root}. `);
    expect(read.description).toMatch(/^Read a text file as it is now\. /);
    expect(read.description).toMatch(/head and its end.*offset and limit.*tail_lines\.$/);
    expect(list.description).toBe(`List a folder (names; folders end with /). Allowed folders: ${root}, ${second}.`);
  });

  it('parameters: read_file takes a path and whole numbers of lines from 1; list_dir an optional path; nothing else', () => {
    const { read, list } = tools();
    const p = read.parameters as { properties: Record<string, { type: string; minimum?: number; description: string }> };
    expect(read.parameters).toMatchObject({ type: 'object', required: ['path'], additionalProperties: false });
    expect(p.properties.path).toMatchObject({ type: 'string' });
    for (const name of ['offset', 'limit', 'tail_lines']) expect(p.properties[name]).toMatchObject({ type: 'integer', minimum: 1 });
    expect(p.properties.path!.description).toMatch(/absolute or relative to the first allowed folder/);
    expect(p.properties.offset!.description).toMatch(/First line to read/);
    expect(p.properties.limit!.description).toMatch(/Lines to read from offset/);
    expect(p.properties.tail_lines!.description).toMatch(/last this many lines/);
    expect(list.parameters).toMatchObject({ type: 'object', additionalProperties: false });
    expect(list.parameters.required).toBeUndefined();
    expect((list.parameters as { properties: Record<string, { type: string; description: string }> }).properties.path).toEqual({
      type: 'string',
      description: `Folder path; default ${root}`,
    });
  });
});

describe('the path rule at its edges', () => {
  it(`a path of ${MAX_PATH_CHARS} characters is looked at; one more is refused before`, async () => {
    const { read } = tools();
    const at = `${root}/${'x'.repeat(MAX_PATH_CHARS - root.length - 1)}`;
    expect(at.length).toBe(MAX_PATH_CHARS);
    expect((await failure(read, { path: at })).message).toBe(`No such file or directory: ${at}`);
    const over = await failure(read, { path: `${at}y` });
    expect(over.message).toBe(`Refused: the path is longer than ${MAX_PATH_CHARS} characters.`);
    expect(over.kind).toBe('refused');
    expect(over.tool).toBe('read_file');
  });

  it('a relative path is read from the first root; an absolute one from any root; "." steps are taken as written', async () => {
    const { read, list } = tools([root, second]);
    expect(await call(read, { path: 'a.txt' })).toBe('alpha\n');
    expect(await call(read, { path: './sub/./b.txt' })).toBe('beta');
    expect(await call(read, { path: join(second, 'c.txt') })).toBe('gamma');
    expect((await failure(read, { path: 'c.txt' })).message).toBe('No such file or directory: c.txt');
    expect(await call(list, { path: second })).toBe('c.txt');
  });

  it('links that stay inside are followed, absolute or relative; one leading out is refused', async () => {
    const { read } = tools();
    expect(await call(read, { path: 'abs-link/b.txt' })).toBe('beta');
    expect(await call(read, { path: 'rel-link' })).toBe('beta');
    const out = await failure(read, { path: 'rel-out' });
    expect(out.message).toBe('Refused: rel-out is outside the folders this agent may read.');
    expect(out.kind).toBe('refused');
    expect(out.tool).toBe('read_file');
  });

  it('a root given through a symlink: its files read by either path, outside still refused', async () => {
    const viaLink = join(dir, 'root-link');
    const { read, list } = tools([viaLink]);
    expect(await call(read, { path: 'a.txt' })).toBe('alpha\n');
    expect(await call(read, { path: join(root, 'a.txt') })).toBe('alpha\n');
    expect(await call(read, { path: join(viaLink, 'sub', 'b.txt') })).toBe('beta');
    expect((await failure(read, { path: join(dir, 'outside.txt') })).message).toMatch(/is outside the folders/);
    expect(await call(list, {})).toContain('a.txt');
  });

  it('resolveInRoots returns the real path; a missing one fails (not refused), a link loop too', async () => {
    expect(await resolveInRoots('abs-link/b.txt', [root], 'read_file')).toBe(join(root, 'sub', 'b.txt'));
    const missing = await resolveInRoots('nope.txt', [root], 'list_dir').catch((e: ToolError) => e);
    expect(missing).toMatchObject({ kind: 'failed', tool: 'list_dir', message: 'No such file or directory: nope.txt' });
    const loop = await resolveInRoots('loop-a', [root], 'read_file').catch((e: ToolError) => e);
    expect(loop).toMatchObject({ kind: 'failed', message: 'No such file or directory: loop-a' });
  });

  it('a root that does not exist refuses nothing inside another root and reads nothing itself', async () => {
    const { read } = tools([join(dir, 'gone'), root]);
    expect(await call(read, { path: join(root, 'a.txt') })).toBe('alpha\n');
    expect((await failure(read, { path: 'x.txt' })).message).toBe('No such file or directory: x.txt');
  });
});

describe('the file-type rule', () => {
  it('read_file of a folder points at list_dir; list_dir of a file is not a folder', async () => {
    const { read, list } = tools();
    const folder = await failure(read, { path: 'sub' });
    expect(folder.message).toBe('sub is a folder; use list_dir.');
    expect(folder.kind).toBe('failed');
    const file = await failure(list, { path: 'a.txt' });
    expect(file.message).toBe('a.txt is not a folder.');
    expect(file.kind).toBe('failed');
    expect(file.tool).toBe('list_dir');
  });

  it('list_dir: names sorted, folders with a slash; the first root when no path or an empty one is given', async () => {
    const { list } = tools();
    const rootListing = 'a.txt\nabs-link\nempty.txt\nloop-a\nloop-b\nrel-link\nrel-out\nsub/';
    expect(await call(list, {})).toBe(rootListing);
    expect(await call(list, { path: '' })).toBe(rootListing);
    expect(await call(list, { path: 7 })).toBe(rootListing);
    expect(await call(list, { path: 'sub' })).toBe('b.txt\ndeeper/');
    expect(await call(list, { path: 'sub/deeper' })).toBe('');
  });
});

describe('the descriptor check', () => {
  it('the kernel is asked in /proc/self/fd, then /dev/fd', () => {
    expect(FD_DIRS).toEqual(['/proc/self/fd', '/dev/fd']);
  });

  it('the first folder that answers is used; when none does, every path is refused naming the first', async () => {
    const { read, list } = tools([root], { fdDirs: [join(dir, 'no-fd'), '/proc/self/fd'] });
    expect(await call(read, { path: 'a.txt' })).toBe('alpha\n');
    expect(await call(list, { path: 'sub' })).toBe('b.txt\ndeeper/');
    const none = tools([root], { fdDirs: [join(dir, 'no-fd'), join(dir, 'no-fd-either')] });
    const r = await failure(none.read, { path: 'a.txt' });
    expect(r.message).toBe(
      `Refused: cannot check where a.txt was opened: ${join(dir, 'no-fd')} is not available, and without it read_file refuses every path.`,
    );
    expect(r.kind).toBe('refused');
    const l = await failure(none.list, { path: 'sub' });
    expect(l.message).toBe(
      `Refused: cannot check where sub was opened: ${join(dir, 'no-fd')} is not available, and without it list_dir refuses every path.`,
    );
    const empty = await failure(tools([root], { fdDirs: [] }).read, { path: 'a.txt' });
    expect(empty.message).toMatch(/: \/proc\/self\/fd is not available, and without it read_file refuses every path\.$/);
  });
});

describe('read_file paging', () => {
  it('offset and limit count lines from 1; a limit past the end reads to the end; offset alone reads to the end', async () => {
    writeFileSync(join(root, 'rows.txt'), numbered(10));
    const { read } = tools();
    expect(await call(read, { path: 'rows.txt', offset: 1, limit: 1 })).toBe('line 1\n');
    expect(await call(read, { path: 'rows.txt', offset: 3, limit: 2 })).toBe('line 3\nline 4\n');
    expect(await call(read, { path: 'rows.txt', offset: 9, limit: 5 })).toBe('line 9\nline 10\n');
    expect(await call(read, { path: 'rows.txt', offset: 10 })).toBe('line 10\n');
    expect(await call(read, { path: 'rows.txt', limit: 2 })).toBe('line 1\nline 2\n');
  });

  it('an offset past the end says how many lines the file has (the last line counts without its line end)', async () => {
    writeFileSync(join(root, 'ended.txt'), 'a\nb\n');
    writeFileSync(join(root, 'open.txt'), 'a\nb');
    const { read } = tools();
    expect(await call(read, { path: 'ended.txt', offset: 3 })).toBe('[Line 3 is past the end of the file: it has 2 lines.]');
    expect(await call(read, { path: 'open.txt', offset: 3 })).toBe('[Line 3 is past the end of the file: it has 2 lines.]');
    expect(await call(read, { path: 'open.txt', offset: 2 })).toBe('b');
    expect(await call(read, { path: 'empty.txt', offset: 1 })).toBe('[Line 1 is past the end of the file: it has 0 lines.]');
    expect(await call(read, { path: 'empty.txt', tail_lines: 3 })).toBe('');
    expect(await call(read, { path: 'empty.txt' })).toBe('');
    writeFileSync(join(root, 'many.txt'), numbered(1_500));
    expect(await call(read, { path: 'many.txt', offset: 2_000 })).toBe('[Line 2,000 is past the end of the file: it has 1,500 lines.]');
  });

  it('tail_lines: the last lines, a last line end closing the last line; more lines than the file: all of it', async () => {
    writeFileSync(join(root, 'ended.txt'), 'a\nb\nc\n');
    writeFileSync(join(root, 'open.txt'), 'a\nb\nc');
    const { read } = tools();
    expect(await call(read, { path: 'ended.txt', tail_lines: 1 })).toBe('c\n');
    expect(await call(read, { path: 'ended.txt', tail_lines: 2 })).toBe('b\nc\n');
    expect(await call(read, { path: 'open.txt', tail_lines: 1 })).toBe('c');
    expect(await call(read, { path: 'open.txt', tail_lines: 3 })).toBe('a\nb\nc');
    expect(await call(read, { path: 'open.txt', tail_lines: 9 })).toBe('a\nb\nc');
  });

  it('a cut page is numbered from its own first line (the marker names the file lines left out)', async () => {
    writeFileSync(join(root, 'rows.txt'), numbered(400));
    const { read } = tools();
    const lines = (text: string) => /lines ([\d,]+)–([\d,]+)\) left out/.exec(text)!.slice(1).map(Number);
    // offset: the page starts at line 101.
    const page = await call(read, { path: 'rows.txt', offset: 101, limit: 200 }, output(600));
    const [from, to] = lines(page);
    expect(page.startsWith('line 101\n')).toBe(true);
    expect(page).toContain(`line ${from! - 1}\n[…`);
    expect(page).toContain(`…]\nline ${to! + 1}\n`);
    // tail_lines on a file that is read whole: numbered from where the tail starts.
    const tail = await call(read, { path: 'rows.txt', tail_lines: 150 }, output(600));
    const [tFrom, tTo] = lines(tail);
    expect(tail.startsWith('line 251\n')).toBe(true);
    expect(tail).toContain(`line ${tFrom! - 1}\n[…`);
    expect(tail).toContain(`…]\nline ${tTo! + 1}\n`);
    expect(tail).toContain('read them with read_file offset=');
    expect(tail.endsWith('line 400\n')).toBe(true);
    // tail_lines of the whole file: from line 1.
    const all = await call(read, { path: 'rows.txt', tail_lines: 400 }, output(600));
    expect(all.startsWith('line 1\n')).toBe(true);
    expect(all).toContain(`line ${lines(all)[0]! - 1}\n[…`);
  });

  it('a tail from a file larger than the scan limit cannot be numbered; its marker says so without line numbers', async () => {
    writeFileSync(join(root, 'rows.txt'), numbered(400));
    const { read } = tools();
    const tail = await call(read, { path: 'rows.txt', tail_lines: 150 }, output(600, 2_000));
    expect(tail.endsWith('line 400\n')).toBe(true);
    expect(tail).not.toMatch(/lines [\d,]+–/);
    expect(tail).toMatch(/\[… [\d,]+ of [\d,]+ bytes left out/);
  });

  it('a first line past the scan limit is refused, pointing at tail_lines (the limit is checked at each 64 KiB read)', async () => {
    writeFileSync(join(root, 'long.txt'), numbered(20_000)); // about 190 KB
    const { read } = tools();
    const r = await failure(read, { path: 'long.txt', offset: 15_000 }, output(MB, 100_000));
    expect(r.message).toBe(
      'Line 15000 lies past the first 100,000 bytes read_file scans (tools.files.max_scan_bytes); read the end of the file with tail_lines.',
    );
    expect(r.kind).toBe('refused');
    // within the first read: found
    expect(await call(read, { path: 'long.txt', offset: 2, limit: 1 }, output(MB, 100_000))).toBe('line 2\n');
    expect(await call(read, { path: 'long.txt', offset: 6_000, limit: 1 }, output(MB, 100_000))).toBe('line 6000\n');
  });

  it('files larger than one read (64 KiB): whole, a page across the chunk edge, a page far in, the tail', async () => {
    const text = numbered(30_000); // about 290 KB
    writeFileSync(join(root, 'large.txt'), text);
    const { read } = tools();
    expect(await call(read, { path: 'large.txt' })).toBe(text);
    const lines = text.split('\n');
    // line 6,500 or so lies across the first 64 KiB boundary
    expect(await call(read, { path: 'large.txt', offset: 6_000, limit: 1_000 })).toBe(`${lines.slice(5_999, 6_999).join('\n')}\n`);
    expect(await call(read, { path: 'large.txt', offset: 29_999, limit: 5 })).toBe('line 29999\nline 30000\n');
    expect(await call(read, { path: 'large.txt', offset: 20_000 })).toBe(`${lines.slice(19_999).join('\n')}`);
    expect(await call(read, { path: 'large.txt', tail_lines: 12_000 })).toBe(`${lines.slice(18_000).join('\n')}`);
    expect(await call(read, { path: 'large.txt', tail_lines: 2 })).toBe('line 29999\nline 30000\n');
  });

  it('past the scan limit a whole read, or a read from an offset, is its head and its end, the bytes between not read', async () => {
    writeFileSync(join(root, 'rows.txt'), numbered(400)); // 3,492 bytes
    const { read } = tools();
    const whole = await call(read, { path: 'rows.txt' }, output(600, 1_000));
    expect(whole.startsWith('line 1\nline 2\n')).toBe(true);
    expect(whole).toContain('line 19\n[… 2,908 of 3,492 bytes left out (not read) …]\nline 352\n');
    expect(whole.endsWith('line 399\nline 400\n')).toBe(true);
    const from = await call(read, { path: 'rows.txt', offset: 2 }, output(600, 1_000));
    expect(from.startsWith('line 2\nline 3\n')).toBe(true);
    expect(from).toContain('line 20\n[… 2,900 of 3,485 bytes left out (not read) …]\nline 352\n');
    expect(from.endsWith('line 399\nline 400\n')).toBe(true);
  });

  it('a page longer than one read (64 KiB), and a numbered tail counted over several reads', async () => {
    const text = numbered(30_000);
    writeFileSync(join(root, 'large.txt'), text);
    const lines = text.split('\n');
    const { read } = tools();
    expect(await call(read, { path: 'large.txt', offset: 1, limit: 8_000 })).toBe(`${lines.slice(0, 8_000).join('\n')}\n`);
    expect(await call(read, { path: 'large.txt', offset: 7_000, limit: 1 })).toBe('line 7000\n');
    const tail = await call(read, { path: 'large.txt', tail_lines: 100 }, output(600));
    const [from, to] = /lines ([\d,]+)–([\d,]+)\) left out/
      .exec(tail)!
      .slice(1)
      .map((g) => Number(g.replace(/,/g, '')));
    expect(tail.startsWith('line 29901\n')).toBe(true);
    expect(tail).toContain(`line ${from! - 1}\n[…`);
    expect(tail).toContain(`…]\nline ${to! + 1}\n`);
  });

  it('paging arguments must be whole numbers from 1, and offset/limit or tail_lines, not both', async () => {
    writeFileSync(join(root, 'rows.txt'), numbered(5));
    const { read } = tools();
    for (const [args, message] of [
      [{ offset: 0 }, 'Argument "offset" must be a whole number of lines, 1 or more.'],
      [{ limit: 0 }, 'Argument "limit" must be a whole number of lines, 1 or more.'],
      [{ tail_lines: 2.5 }, 'Argument "tail_lines" must be a whole number of lines, 1 or more.'],
      [{ offset: '2' }, 'Argument "offset" must be a whole number of lines, 1 or more.'],
      [{ limit: 2 ** 53 }, 'Argument "limit" must be a whole number of lines, 1 or more.'],
      [{ tail_lines: 1, offset: 1 }, 'Use either offset and limit, or tail_lines.'],
      [{ tail_lines: 1, limit: 1 }, 'Use either offset and limit, or tail_lines.'],
    ] as const) {
      const r = await failure(read, { path: 'rows.txt', ...args });
      expect(r.message, JSON.stringify(args)).toBe(message);
      expect(r.kind).toBe('refused');
      expect(r.tool).toBe('read_file');
    }
    expect(await call(read, { path: 'rows.txt', offset: 1, limit: 1 })).toBe('line 1\n');
  });
});
