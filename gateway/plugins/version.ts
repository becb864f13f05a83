/**
 * The product version (from package.json) and the version ranges plugins may
 * require. Supported ranges: exact `x.y.z`, `>=x.y.z`, `^x.y.z` (same major;
 * for 0.x the same minor, as npm reads it).
 */
import { existsSync, readFileSync } from 'node:fs';
import { compareVersions } from '../../scheduler/store/redis/connect.ts';

/**
 * The nearest `package.json` above this file: the checkout's, whether this runs from
 * `gateway/plugins/` or from a chunk of the compiled CLI (`dist/`, cli/build.mjs).
 */
function packageJson(): URL {
  for (let dir = new URL('./', import.meta.url); ;) {
    const file = new URL('package.json', dir);
    if (existsSync(file)) return file;
    const up = new URL('../', dir);
    if (up.href === dir.href) throw new Error(`no package.json above ${import.meta.url}`);
    dir = up;
  }
}

/** This build's version. */
export const HERMES_VERSION: string = (JSON.parse(readFileSync(packageJson(), 'utf8')) as { version: string }).version;

/** Whether `version` satisfies `range`; an unparseable range is not satisfied. */
export function satisfiesRange(version: string, range: string): boolean {
  const r = range.trim();
  const m = /^(>=|\^)?\s*(\d+)\.(\d+)\.(\d+)$/.exec(r);
  if (!m) return false;
  const base = `${m[2]}.${m[3]}.${m[4]}`;
  if (m[1] === '>=') return compareVersions(version, base) >= 0;
  if (m[1] === '^') {
    if (compareVersions(version, base) < 0) return false;
    const [maj, min] = version.split('.').map(Number);
    return m[2] !== '0' ? maj === Number(m[2]) : maj === 0 && min === Number(m[3]);
  }
  return compareVersions(version, base) === 0;
}
