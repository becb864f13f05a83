/**
 * `read_file` and `list_dir` inside `tools.files.roots`.
 *
 * Path rule: a relative path is read from the first root; every path is
 * walked and resolved with `realpath` (symlinks included) and refused unless
 * the result lies inside one of the roots' own real paths. So `../` escapes
 * and symlinks that lead out of a root are refused, whatever the model writes.
 *
 * No race between the check and the open: the check is on a path, and someone
 * who can write inside a root could swap a checked folder for a symlink
 * leading out before the open follows it (`O_NOFOLLOW` guards only the last
 * component). Node has no `openat`, so the file is opened first and then
 * checked by its descriptor (`checkOpened`): the kernel says where the open
 * file really is (`readlink` of `/proc/self/fd/<fd>`), that real path must lie
 * inside a root's real path, and the descriptor's device and inode must be
 * those of that path. Otherwise the call is refused with one answer
 * ("changed while it was being opened") whether the swapped path led to a
 * file outside or to nothing. (The type checks before the open are on the
 * path, so a race can still tell a folder, a FIFO or device, or a file the
 * worker may not open from the rest; never a file's content.) A folder is listed
 * through its open descriptor (`/proc/self/fd/<fd>` names the opened folder
 * itself, not a path looked up again). Where `/proc` is missing the tools
 * refuse every path.
 *
 * File-type rule: `read_file` reads regular files only and `list_dir` lists
 * folders only. Anything else (a FIFO, a socket, a device) is refused before
 * it is opened: opening a FIFO without a writer blocks a libuv threadpool
 * thread until a writer comes, which no tool timeout or abort can undo, and a
 * few such calls would stall every fs and dns.lookup call of the worker. The
 * file is then opened with `O_NONBLOCK | O_NOFOLLOW` and checked again with
 * `fstat` on the open handle, so a path swapped for a FIFO or a symlink
 * between the check and the open is refused too instead of hanging.
 */
import { constants, type Dirent } from 'node:fs';
import { lstat, open, readdir, readlink, realpath, stat, type FileHandle } from 'node:fs/promises';
import { dirname, isAbsolute, join, resolve, sep } from 'node:path';
import { ToolError } from '../../scheduler/errors/tool-error.ts';
import { pathWithin } from '../../scheduler/tools/tool-reach.ts';
import { stringArg, type AgentTool } from './tool.ts';
import type { ByteRange, ToolOutput } from './tool-output.ts';

/** Longest `path` argument accepted, in characters (Linux's PATH_MAX); a longer one is refused. */
export const MAX_PATH_CHARS = 4096;

/** Symbolic links followed in one path before it counts as a loop (Linux's limit). */
const MAX_SYMLINKS = 40;

/**
 * Folders where the kernel shows this process's open descriptors as links to
 * what they hold, tried in order (on Linux `/dev/fd` is `/proc/self/fd`).
 */
export const FD_DIRS: readonly string[] = ['/proc/self/fd', '/dev/fd'];

/**
 * Resolve `path` against the roots.
 *
 * The path is first normalised as written (`resolve`: `a/../b` is `b`, for
 * relative and absolute paths alike), then walked component by component —
 * symlinks followed, `..` inside a link's target taken from the folder reached
 * so far — and refused as soon as a step leaves the roots and their own parent
 * folders (`staysWithinRoots`). Only then is anything looked up for real. So
 * no answer depends on what exists outside the roots: no "does it exist"
 * oracle through a symlinked folder, a dangling symlink or a link whose target
 * wanders outside and back.
 * @returns the real path, inside a root
 * @throws ToolError `refused` outside the roots or over `MAX_PATH_CHARS`, `failed` when the path does not exist
 */
export async function resolveInRoots(path: string, roots: string[], tool: string): Promise<string> {
  if (path.length > MAX_PATH_CHARS) {
    throw new ToolError(`Refused: the path is longer than ${MAX_PATH_CHARS} characters.`, { kind: 'refused', tool });
  }
  // Each root as configured and as it really is (a root may itself be reached through a symlink).
  const places = [
    ...new Set([...roots.map((r) => resolve(r)), ...(await Promise.all(roots.map((r) => realpath(r).catch(() => resolve(r)))))]),
  ];
  const candidate = isAbsolute(path) ? resolve(path) : resolve(roots[0]!, path);
  if (!(await staysWithinRoots(candidate, places))) throw outside(path, tool);
  let real: string;
  try {
    real = await realpath(candidate);
  } catch {
    throw new ToolError(`No such file or directory: ${path}`, { kind: 'failed', tool });
  }
  if (!places.some((root) => pathWithin(real, root))) throw outside(path, tool);
  return real;
}

/**
 * Whether walking the absolute `path` stays inside `roots` and their parent
 * folders at every step and ends inside a root. Each component is checked
 * before it is looked at; a symlink is followed to what it names (a dangling
 * one too), `..` goes up from the folder reached so far, and past a component
 * that does not exist the rest is walked as written. A walk of more than
 * `MAX_SYMLINKS` links (a loop) that stayed inside so far is left to `realpath`
 * to refuse.
 */
async function staysWithinRoots(path: string, roots: string[]): Promise<boolean> {
  const onTheWay = (p: string) => roots.some((root) => pathWithin(p, root) || pathWithin(root, p));
  const parts = path.split(sep).filter((p) => p !== '');
  let current: string = sep;
  let links = 0;
  let missing = false;
  while (parts.length > 0) {
    const part = parts.shift()!;
    if (part === '.') continue;
    const next = part === '..' ? dirname(current) : join(current, part);
    if (!onTheWay(next)) return false;
    if (missing || part === '..') {
      current = next;
      continue;
    }
    const info = await lstat(next).catch(() => undefined);
    if (info?.isSymbolicLink()) {
      if (++links > MAX_SYMLINKS) return true;
      const target = await readlink(next);
      if (isAbsolute(target)) current = sep;
      parts.unshift(...target.split(sep).filter((p) => p !== ''));
      continue;
    }
    if (!info) missing = true;
    current = next;
  }
  return roots.some((root) => pathWithin(current, root));
}

function outside(path: string, tool: string): ToolError {
  return new ToolError(`Refused: ${path} is outside the folders this agent may read.`, { kind: 'refused', tool });
}

/**
 * Check an opened file or folder by its descriptor, not by its path: the
 * kernel's answer to "where is this descriptor" (`readlink` of
 * `<fdDir>/<fd>`) must lie inside one of the roots' real paths, and the
 * descriptor's device and inode must be those of that path. What was opened
 * is then known to be inside a root, whatever was swapped on the way to it.
 * @param fdDirs - where to ask (`FD_DIRS`); when none answers, everything is refused
 * @returns `<fdDir>/<fd>`: a path that names the opened object itself (for `readdir`)
 * @throws ToolError `refused` when it is outside, changed while being opened, or cannot be checked
 */
async function checkOpened(fh: FileHandle, path: string, roots: string[], tool: string, fdDirs: readonly string[]): Promise<string> {
  let found: { where: string; fdPath: string } | undefined;
  for (const dir of fdDirs) {
    const fdPath = `${dir}/${fh.fd}`;
    const where = await readlink(fdPath).catch(() => undefined);
    if (where !== undefined) {
      found = { where, fdPath };
      break;
    }
  }
  if (!found) {
    throw new ToolError(
      `Refused: cannot check where ${path} was opened: ${fdDirs[0] ?? '/proc/self/fd'} is not available, and without it ${tool} refuses every path.`,
      { kind: 'refused', tool },
    );
  }
  // The path passed the check, so an opened object elsewhere means it was swapped meanwhile.
  const realRoots = (await Promise.all(roots.map((r) => realpath(r).catch(() => undefined)))).filter((r) => r !== undefined);
  if (!isAbsolute(found.where) || !realRoots.some((root) => pathWithin(found.where, root))) throw changed(path, tool);
  const [held, there] = await Promise.all([fh.stat({ bigint: true }), stat(found.where, { bigint: true }).catch(() => undefined)]);
  if (!there || held.dev !== there.dev || held.ino !== there.ino) throw changed(path, tool);
  return found.fdPath;
}

/**
 * A path that passed the check and then could not be opened, or was opened
 * elsewhere: it was changed in between. One answer for every such case, so
 * the race tells nothing about what exists where a swapped path led.
 */
function changed(path: string, tool: string): ToolError {
  return new ToolError(`Refused: ${path} changed while it was being opened; nothing was read.`, { kind: 'refused', tool });
}

/**
 * An open of a checked path failed: no permission is said as such (`verb`
 * `path` (EACCES)); anything else means the path changed since the check.
 */
function openFailed(err: NodeJS.ErrnoException, verb: string, path: string, tool: string): ToolError {
  if (err.code === 'EACCES' || err.code === 'EPERM')
    return new ToolError(`Cannot ${verb} ${path} (${err.code}).`, { kind: 'failed', tool });
  return changed(path, tool);
}

/**
 * Refuse what `read_file` must not read: a folder (pointing at `list_dir`) or
 * anything that is not a regular file.
 * @throws ToolError `failed`
 */
function notRegularFile(path: string, info: { isFile(): boolean; isDirectory(): boolean }): void {
  if (info.isDirectory()) throw new ToolError(`${path} is a folder; use list_dir.`, { kind: 'failed', tool: 'read_file' });
  if (!info.isFile()) throw new ToolError(`Refused: ${path} is not a regular file.`, { kind: 'refused', tool: 'read_file' });
}

/**
 * The two file tools over `roots` (absolute folders).
 * @param options.fdDirs - where opened descriptors are checked (`FD_DIRS`; tests name a missing folder)
 */
export function fileTools(roots: string[], options: { fdDirs?: readonly string[] } = {}): AgentTool[] {
  const where = roots.join(', ');
  const fdDirs = options.fdDirs ?? FD_DIRS;
  return [
    {
      name: 'read_file',
      description:
        `Read a text file as it is now. Allowed folders: ${where}. A relative path is read from ${roots[0]}. ` +
        'A large file comes back as its head and its end, with a marker naming the lines left out: read those with offset and limit, or the last lines with tail_lines.',
      parameters: {
        type: 'object',
        properties: {
          path: { type: 'string', description: 'File path, absolute or relative to the first allowed folder' },
          offset: { type: 'integer', minimum: 1, description: 'First line to read (1 is the first line of the file)' },
          limit: { type: 'integer', minimum: 1, description: 'Lines to read from offset (default: to the end of the file)' },
          tail_lines: { type: 'integer', minimum: 1, description: 'Read only the last this many lines (instead of offset and limit)' },
        },
        required: ['path'],
        additionalProperties: false,
      },
      groups: ['read_file', 'files'],
      idempotent: true, // it only reads
      async call(args, ctx) {
        const path = stringArg(args, 'path', 'read_file');
        const page = pageArgs(args);
        const real = await resolveInRoots(path, roots, 'read_file');
        notRegularFile(path, await lstat(real));
        // Non-blocking open: a FIFO put in place after the check opens at once
        // (no writer needed) and is refused by the fstat below.
        const fh = await open(real, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW).catch(
          (err: NodeJS.ErrnoException) => {
            throw openFailed(err, 'read', path, 'read_file');
          },
        );
        try {
          // Where it really is first: what was opened outside a root is not described at all.
          await checkOpened(fh, path, roots, 'read_file', fdDirs);
          const info = await fh.stat();
          notRegularFile(path, info);
          const out = ctx.output;
          out.readHint = (from, to) => `read them with read_file offset=${from} limit=${to - from + 1}, or the end with tail_lines`;
          if (page.tailLines !== undefined) await readTailLines(fh, info.size, page.tailLines, out);
          else if (page.offset !== undefined || page.limit !== undefined) {
            const past = await readLines(fh, info.size, page.offset ?? 1, page.limit, out);
            if (past !== undefined) return past;
          } else await readRanges(fh, out.fileRanges(info.size), out);
          return out;
        } finally {
          await fh.close();
        }
      },
    },
    {
      name: 'list_dir',
      description: `List a folder (names; folders end with /). Allowed folders: ${where}.`,
      parameters: {
        type: 'object',
        properties: { path: { type: 'string', description: `Folder path; default ${roots[0]}` } },
        additionalProperties: false,
      },
      groups: ['list_dir', 'files'],
      idempotent: true, // it only reads
      async call(args) {
        const path = typeof args.path === 'string' && args.path.length > 0 ? args.path : roots[0]!;
        const real = await resolveInRoots(path, roots, 'list_dir');
        const notFolder = () => new ToolError(`${path} is not a folder.`, { kind: 'failed', tool: 'list_dir' });
        // Folders only (see the file-type rule above); O_DIRECTORY also fails
        // at once on anything else put in place after this check.
        if (!(await stat(real)).isDirectory()) throw notFolder();
        const fh = await open(real, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NONBLOCK | constants.O_NOFOLLOW).catch(
          (err: NodeJS.ErrnoException) => {
            throw openFailed(err, 'list', path, 'list_dir');
          },
        );
        let entries: Dirent[];
        try {
          const opened = await checkOpened(fh, path, roots, 'list_dir', fdDirs);
          if (!(await fh.stat()).isDirectory()) throw notFolder();
          // `<fdDir>/<fd>` leads to the opened folder itself, not to whatever its path names now.
          entries = await readdir(opened, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
            throw new ToolError(`Cannot list ${path} (${err.code ?? 'error'}).`, { kind: 'failed', tool: 'list_dir' });
          });
        } finally {
          await fh.close();
        }
        return entries
          .map((e) => (e.isDirectory() ? `${e.name}/` : e.name))
          .sort()
          .join('\n');
      },
    },
  ];
}

/** Bytes read from a file at a time while looking for line ends. */
const CHUNK_BYTES = 64 * 1024;
/**
 * Bytes read at a time of a byte range: a watched file is read whole (`tools.watch_max_bytes`), and each read
 * waits a turn of the worker's event loop, which a busy worker makes long — 10 MB took 160 turns at 64 KiB.
 */
const RANGE_CHUNK_BYTES = 1024 * 1024;

/** `read_file`'s paging arguments. @throws ToolError `refused` for a value that is no whole number of lines, or both ways at once */
function pageArgs(args: Record<string, unknown>): { offset?: number; limit?: number; tailLines?: number } {
  const lines = (name: string): number | undefined => {
    const v = args[name];
    if (v === undefined) return undefined;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1)
      throw new ToolError(`Argument "${name}" must be a whole number of lines, 1 or more.`, { kind: 'refused', tool: 'read_file' });
    return v;
  };
  const page = { offset: lines('offset'), limit: lines('limit'), tailLines: lines('tail_lines') };
  if (page.tailLines !== undefined && (page.offset !== undefined || page.limit !== undefined))
    throw new ToolError('Use either offset and limit, or tail_lines.', { kind: 'refused', tool: 'read_file' });
  return page;
}

/** Read `ranges` of the open file into `out` from byte `at`, the bytes between them counted as not read. */
async function readRanges(fh: FileHandle, ranges: readonly ByteRange[], out: ToolOutput, at = 0): Promise<void> {
  for (const range of ranges) {
    out.skip(range.start - at);
    await readRange(fh, range, out);
    at = range.end;
  }
}

/** Read `range` of the open file into `out` (less when the file shrank meanwhile). */
async function readRange(fh: FileHandle, range: ByteRange, out: ToolOutput): Promise<void> {
  for (let pos = range.start; pos < range.end;) {
    const len = Math.min(RANGE_CHUNK_BYTES, range.end - pos);
    const { bytesRead, buffer } = await fh.read(Buffer.alloc(len), 0, len, pos);
    if (bytesRead === 0) break;
    out.push(buffer.subarray(0, bytesRead));
    pos += bytesRead;
  }
}

/**
 * Lines `offset` … `offset + limit - 1` into `out`; without `limit`, from `offset` to the end (read
 * as a whole file is: head and end past `out.fileReadBytes`). The first line is searched for in the
 * first `out.fileReadBytes` bytes.
 * @returns a note instead of the lines when `offset` is past the end of the file
 * @throws ToolError `refused` when the first line lies past the scan limit
 */
async function readLines(
  fh: FileHandle,
  size: number,
  offset: number,
  limit: number | undefined,
  out: ToolOutput,
): Promise<string | undefined> {
  const found = await lineStart(fh, size, offset, out.fileReadBytes);
  if (typeof found !== 'number')
    return `[Line ${offset.toLocaleString('en-US')} is past the end of the file: it has ${found.lines.toLocaleString('en-US')} lines.]`;
  out.firstLine = offset;
  if (limit === undefined) {
    const rest = out.fileRanges(size - found).map((r) => ({ start: r.start + found, end: r.end + found }));
    await readRanges(fh, rest, out, found);
    return undefined;
  }
  let left = limit;
  for (let pos = found; pos < size && left > 0;) {
    const len = Math.min(CHUNK_BYTES, size - pos);
    const { bytesRead, buffer } = await fh.read(Buffer.alloc(len), 0, len, pos);
    if (bytesRead === 0) break;
    const buf = buffer.subarray(0, bytesRead);
    let to = 0;
    while (left > 0) {
      const nl = buf.indexOf(0x0a, to);
      if (nl < 0) {
        to = buf.length;
        break;
      }
      left -= 1;
      to = nl + 1;
    }
    out.push(buf.subarray(0, to));
    pos += bytesRead;
  }
  return undefined;
}

/**
 * The byte line `line` starts at, looked for in the first `scanBytes` bytes.
 * @returns the byte, or the file's line count when it has fewer lines
 * @throws ToolError `refused` when the line lies past the scan limit
 */
async function lineStart(fh: FileHandle, size: number, line: number, scanBytes: number): Promise<number | { lines: number }> {
  let ends = 0;
  for (let pos = 0; pos < size;) {
    if (ends + 1 >= line) return pos;
    if (pos >= scanBytes) {
      throw new ToolError(
        `Line ${line} lies past the first ${scanBytes.toLocaleString('en-US')} bytes read_file scans (tools.files.max_scan_bytes); read the end of the file with tail_lines.`,
        { kind: 'refused', tool: 'read_file' },
      );
    }
    const len = Math.min(CHUNK_BYTES, size - pos);
    const { bytesRead, buffer } = await fh.read(Buffer.alloc(len), 0, len, pos);
    if (bytesRead === 0) break;
    for (let i = buffer.indexOf(0x0a); i >= 0 && i < bytesRead; i = buffer.indexOf(0x0a, i + 1)) {
      ends += 1;
      if (ends + 1 === line) {
        if (pos + i + 1 < size) return pos + i + 1;
        break;
      }
    }
    pos += bytesRead;
  }
  if (line === 1 && size > 0) return 0;
  // The last line without a line end counts.
  return { lines: ends + (size > 0 && (await lastByte(fh, size)) !== 0x0a ? 1 : 0) };
}

/**
 * The last `count` lines into `out`, reading back from the end at most `out.fileReadBytes`; they
 * are numbered when the file is small enough to count the lines before them.
 */
async function readTailLines(fh: FileHandle, size: number, count: number, out: ToolOutput): Promise<void> {
  const floor = Math.max(0, size - out.fileReadBytes);
  // A last line end closes the last line; it starts none.
  let wanted = count + ((await lastByte(fh, size)) === 0x0a ? 1 : 0);
  let start = floor;
  search: for (let end = size; end > floor;) {
    const len = Math.min(CHUNK_BYTES, end - floor);
    const buf = Buffer.alloc(len);
    const { bytesRead } = await fh.read(buf, 0, len, end - len);
    for (let i = bytesRead - 1; i >= 0; i--) {
      if (buf[i] === 0x0a && --wanted === 0) {
        start = end - len + i + 1;
        break search;
      }
    }
    end -= len;
  }
  out.firstLine = start === 0 ? 1 : size <= out.fileReadBytes ? (await countLineEnds(fh, start)) + 1 : undefined;
  await readRange(fh, { start, end: size }, out);
}

/** The last byte of the file, or -1 when it is empty. */
async function lastByte(fh: FileHandle, size: number): Promise<number> {
  if (size === 0) return -1;
  const { buffer } = await fh.read(Buffer.alloc(1), 0, 1, size - 1);
  return buffer[0]!;
}

/** Line ends in the first `end` bytes of the file. */
async function countLineEnds(fh: FileHandle, end: number): Promise<number> {
  let count = 0;
  for (let pos = 0; pos < end;) {
    const len = Math.min(CHUNK_BYTES, end - pos);
    const { bytesRead, buffer } = await fh.read(Buffer.alloc(len), 0, len, pos);
    if (bytesRead === 0) break;
    for (let i = buffer.indexOf(0x0a); i >= 0 && i < bytesRead; i = buffer.indexOf(0x0a, i + 1)) count += 1;
    pos += bytesRead;
  }
  return count;
}
