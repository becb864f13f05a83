/**
 * `read_file` and `list_dir` inside `tools.files.roots`.
 *
 * Path rule: a relative path is read from the first root; every path is
 * resolved with `realpath` (symlinks included) and refused unless the result
 * lies inside one of the roots' own real paths. So `../` escapes and symlinks
 * that lead out of a root are refused, whatever the model writes.
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
import { constants } from 'node:fs';
import { lstat, open, readdir, readlink, realpath, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { ToolError } from '../../scheduler/errors/tool-error.ts';
import { stringArg, type AgentTool } from './tool.ts';

/** Longest `path` argument accepted, in characters (Linux's PATH_MAX); a longer one is refused. */
export const MAX_PATH_CHARS = 4096;

/** Symbolic links followed in one path before it counts as a loop (Linux's limit). */
const MAX_SYMLINKS = 40;

/**
 * Resolve `path` against the roots.
 *
 * The path is first normalised as written (`resolve`: `a/../b` is `b`, for
 * relative and absolute paths alike), then judged by where it really leads.
 * No "does it exist" oracle: a path that does not exist is refused exactly
 * when it would lie outside the roots once its existing part is resolved —
 * through symlinked folders and dangling symlinks alike (`wherePathLeads`).
 * @returns the real path, inside a root
 * @throws ToolError `refused` outside the roots or over `MAX_PATH_CHARS`, `failed` when the path does not exist
 */
export async function resolveInRoots(path: string, roots: string[], tool: string): Promise<string> {
  if (path.length > MAX_PATH_CHARS) {
    throw new ToolError(`Refused: the path is longer than ${MAX_PATH_CHARS} characters.`, { kind: 'refused', tool });
  }
  const candidate = isAbsolute(path) ? resolve(path) : resolve(roots[0]!, path);
  let real: string;
  try {
    real = await realpath(candidate);
  } catch {
    if (!(await insideAny(await wherePathLeads(candidate), roots))) throw outside(path, tool);
    throw new ToolError(`No such file or directory: ${path}`, { kind: 'failed', tool });
  }
  if (!(await insideAny(real, roots))) throw outside(path, tool);
  return real;
}

/**
 * Where an absolute `path` leads: component by component, each symlink followed
 * to what it names (a dangling one too) and `..` taken from the real folder
 * reached so far; once a component does not exist, the rest is appended as
 * written. After `MAX_SYMLINKS` links (a loop) the path is judged where it stands.
 */
async function wherePathLeads(path: string): Promise<string> {
  const parts = path.split(sep).filter((p) => p !== '');
  let current: string = sep;
  let links = 0;
  let missing = false;
  while (parts.length > 0) {
    const part = parts.shift()!;
    if (part === '.') continue;
    if (part === '..') {
      current = dirname(current);
      continue;
    }
    const next = join(current, part);
    if (missing) {
      current = next;
      continue;
    }
    const info = await lstat(next).catch(() => undefined);
    if (!info) {
      missing = true;
      current = next;
      continue;
    }
    if (info.isSymbolicLink()) {
      if (++links > MAX_SYMLINKS) return join(next, ...parts);
      const target = await readlink(next);
      if (isAbsolute(target)) current = sep;
      parts.unshift(...target.split(sep).filter((p) => p !== ''));
      continue;
    }
    current = next;
  }
  return current;
}

async function insideAny(path: string, roots: string[]): Promise<boolean> {
  for (const root of roots) {
    const realRoot = await realpath(root).catch(() => resolve(root));
    const rel = relative(realRoot, path);
    if (rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel))) return true;
  }
  return false;
}

function outside(path: string, tool: string): ToolError {
  return new ToolError(`Refused: ${path} is outside the folders this agent may read.`, { kind: 'refused', tool });
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

/** The two file tools over `roots` (absolute folders). */
export function fileTools(roots: string[]): AgentTool[] {
  const where = roots.join(', ');
  return [
    {
      name: 'read_file',
      description: `Read a text file as it is now. Allowed folders: ${where}. A relative path is read from ${roots[0]}.`,
      parameters: {
        type: 'object',
        properties: { path: { type: 'string', description: 'File path, absolute or relative to the first allowed folder' } },
        required: ['path'],
        additionalProperties: false,
      },
      groups: ['read_file', 'files'],
      async call(args, ctx) {
        const real = await resolveInRoots(stringArg(args, 'path', 'read_file'), roots, 'read_file');
        notRegularFile(String(args.path), await lstat(real));
        // Non-blocking open: a FIFO put in place after the check opens at once
        // (no writer needed) and is refused by the fstat below.
        const fh = await open(real, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW).catch((err: NodeJS.ErrnoException) => {
          throw new ToolError(`Cannot read ${String(args.path)} (${err.code ?? 'error'}).`, { kind: 'failed', tool: 'read_file' });
        });
        try {
          const info = await fh.stat();
          notRegularFile(String(args.path), info);
          // Read one byte past the cap so the caller can mark the cut.
          const buf = Buffer.alloc(Math.min(info.size, ctx.maxResultBytes + 1));
          const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
          return buf.subarray(0, bytesRead).toString('utf8');
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
      async call(args) {
        const path = typeof args.path === 'string' && args.path.length > 0 ? args.path : roots[0]!;
        const real = await resolveInRoots(path, roots, 'list_dir');
        // Folders only (see the file-type rule above); readdir itself opens
        // with O_DIRECTORY, which fails at once on anything else.
        if (!(await stat(real)).isDirectory()) throw new ToolError(`${path} is not a folder.`, { kind: 'failed', tool: 'list_dir' });
        const entries = await readdir(real, { withFileTypes: true }).catch(() => {
          throw new ToolError(`${path} is not a folder.`, { kind: 'failed', tool: 'list_dir' });
        });
        return entries
          .map((e) => (e.isDirectory() ? `${e.name}/` : e.name))
          .sort()
          .join('\n');
      },
    },
  ];
}
