/**
 * Files only this user may read. `HERMES_HOME` and the folders the product makes in it are
 * created 0700; data, secrets and logs are 0600. A folder of an earlier version that is open to
 * others (0755) is narrowed when the product uses it again, as long as it belongs to this user.
 */
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  fsyncSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  renameSync,
  rmSync,
  writeSync,
  type Stats,
} from 'node:fs';

/** Mode bits that give group or others any access. */
export const OPEN_TO_OTHERS = 0o077;

/** This process's user id (0 where the platform has none). */
export function currentUid(): number {
  return process.getuid?.() ?? 0;
}

/** `lstat`, or `undefined` when nothing is there. */
export function lstatOrUndefined(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** `0755`-style octal text of a mode's permission bits, for messages. */
export function modeText(mode: number): string {
  return `0${(mode & 0o777).toString(8).padStart(3, '0')}`;
}

/**
 * Create `dir` (and missing parents) with mode 0700. An existing folder of this user that
 * group or others may enter is narrowed to 0700 when `narrow` is set (the default).
 * @returns the folder's stats after the call
 */
export function ensurePrivateDir(dir: string, options: { narrow?: boolean } = {}): Stats {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  let st = lstatSync(dir);
  if (options.narrow !== false && st.isDirectory() && st.uid === currentUid() && (st.mode & OPEN_TO_OTHERS) !== 0) {
    chmodSync(dir, 0o700);
    st = lstatSync(dir);
  }
  return st;
}

/**
 * Write `data` to `file` with mode 0600, atomically (a temporary file in the same folder,
 * renamed over it): a reader sees the old or the new content, never a part.
 */
export function writePrivateFile(file: string, data: string): void {
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    renameSync(tmp, file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

/**
 * Create `file` holding `data` with mode 0600 unless it exists, atomically (a temporary file in the
 * same folder, hard-linked to the name, which fails when the name is taken): of two processes
 * creating it at once, one wins and the other sees the winner's complete file.
 * @returns false when `file` already existed (it is left as it is)
 */
export function createPrivateFile(file: string, data: string): boolean {
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(tmp, file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    rmSync(tmp, { force: true });
  }
}

/**
 * Make sure `file` exists with mode 0600 (created empty if missing; narrowed if this user's
 * and open to others). Used before another library appends to it (the log file).
 */
export function ensurePrivateFile(file: string): void {
  closeSync(openSync(file, 'a', 0o600));
  const st = lstatSync(file);
  if (st.isFile() && st.uid === currentUid() && (st.mode & OPEN_TO_OTHERS) !== 0) chmodSync(file, 0o600);
}
