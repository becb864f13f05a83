/**
 * The compiled CLI for the test run. Tests run `hermes` dozens of times (`status`, `loop`, `cron …`); from
 * a current build a call costs ~0.2 s of CPU, from the sources through tsx ~0.8 s. A checkout's `dist/`
 * goes stale with every edit of a source it was made from (cli/hermes.mjs then runs the sources), so
 * when it is not current the run compiles its own copy of the same sources into `.build-test-<id>/` and
 * names it to every child process (`HERMES_BUILD_DIR`, read by cli/hermes.mjs); `dist/` itself is left
 * alone, as another run or the user may be using it. `up`, `worker` and `gateway` run from it too (~0.6 s of CPU
 * to a started worker against ~2.3 s from the sources; the suite starts dozens).
 */
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { isCurrentBuild } from '../../cli/build-state.mjs';
import { promisify } from 'node:util';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Whether `dir` (a folder under the checkout) holds a current build: cli/hermes.mjs's rule (`isCurrentBuild`). */
const isCurrent = (dir: string): boolean => isCurrentBuild(pathToFileURL(`${ROOT}/`), pathToFileURL(join(ROOT, dir, '/')));

/**
 * Make sure the run's `hermes` calls find a current build; resolves with the clean-up. A build that fails
 * leaves the calls on the sources (slower, same behaviour), with the reason on stderr.
 */
export async function currentCliBuild(): Promise<() => void> {
  if (process.env.HERMES_FROM_SOURCES === '1' || isCurrent(process.env.HERMES_BUILD_DIR ?? 'dist')) return () => {};
  const dir = `.build-test-${randomBytes(4).toString('hex')}`;
  const env = { ...process.env, HERMES_BUILD_DIR: dir };
  await promisify(execFile)(process.execPath, [join(ROOT, 'cli', 'build.mjs'), '--if-possible'], { env }).then(
    ({ stderr }) => process.stderr.write(stderr),
    (err: Error) => process.stderr.write(`${err.message}\n`),
  );
  if (!isCurrent(dir)) return () => rmSync(join(ROOT, dir), { recursive: true, force: true });
  // Set before any test file runs: the worker processes, and every child they start with process.env, inherit it.
  process.env.HERMES_BUILD_DIR = dir;
  return () => {
    delete process.env.HERMES_BUILD_DIR;
    rmSync(join(ROOT, dir), { recursive: true, force: true });
  };
}
