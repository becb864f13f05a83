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
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { ToolError } from '../../scheduler/errors/tool-error.ts';
import { stringArg, type AgentTool } from './tool.ts';

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
  if (!places.some((root) => within(real, root))) throw outside(path, tool);
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
  const onTheWay = (p: string) => roots.some((root) => within(p, root) || within(root, p));
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
  return roots.some((root) => within(current, root));
}

/** Whether `path` is `folder` or lies under it (both absolute and normalised). */
function within(path: string, folder: string): boolean {
  const rel = relative(folder, path);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
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
  if (!isAbsolute(found.where) || !realRoots.some((root) => within(found.where, root))) throw changed(path, tool);
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
      description: `Read a text file as it is now. Allowed folders: ${where}. A relative path is read from ${roots[0]}.`,
      parameters: {
        type: 'object',
        properties: { path: { type: 'string', description: 'File path, absolute or relative to the first allowed folder' } },
        required: ['path'],
        additionalProperties: false,
      },
      groups: ['read_file', 'files'],
      async call(args, ctx) {
        const path = stringArg(args, 'path', 'read_file');
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
