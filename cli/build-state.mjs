// Whether a compiled CLI may run: the one rule `cli/hermes.mjs` starts by, and the test run's build
// (test/support/global-build.ts) checks with. Plain JavaScript, read at every `hermes` start.
import { readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * Whether `buildDir` holds a build made after the last change of every source it was made from
 * (`build.json`, written by cli/build.mjs: `built_at` epoch ms, `inputs` paths under `root`).
 * @param {URL} root - the checkout (a folder URL ending in `/`)
 * @param {URL} buildDir - the build's folder (a folder URL ending in `/`)
 * @returns {boolean} false with no build, or when a source it names changed since or is gone
 */
export function isCurrentBuild(root, buildDir) {
  try {
    const { built_at: builtAt, inputs } = JSON.parse(readFileSync(new URL('build.json', buildDir), 'utf8'));
    // Paths, not a URL per input: every call checks a few hundred files, and building the URLs cost as much as the stats.
    const base = fileURLToPath(root);
    for (const input of inputs) {
      const stat = statSync(base + input, { throwIfNoEntry: false });
      if (stat === undefined || stat.mtimeMs > builtAt) return false;
    }
    return true;
  } catch {
    return false;
  }
}

/**
 * What a `hermes` call runs (cli/hermes.mjs): `version` for `--version` or `-V` alone (package.json
 * only); `build`, the compiled CLI's `main.js` in `dist/` or the folder `HERMES_BUILD_DIR` names (directly
 * under the checkout), when that build is current (`isCurrentBuild`) and `HERMES_FROM_SOURCES` is not 1,
 * whatever the command (`up`, `worker` and `gateway` included); `sources` otherwise.
 *
 * A build runs with source maps (`sourceMaps`: a stack trace names the TypeScript files) where a stack
 * can be shown: the long-running commands (`STACK_COMMANDS`, whose logs carry an error's stack) and any
 * call with `HERMES_DEBUG` set (the only way a short command prints one, cli/run-command.ts). Every other
 * call leaves them off: Node reads and parses each loaded file's map at load when they are on, a tenth of
 * a short command's start-up (docs/BENCHMARKS.md, "CLI start-up").
 * @param {URL} root - the checkout (a folder URL ending in `/`)
 * @param {string[]} args - the call's arguments (after `hermes`)
 * @param {Record<string, string | undefined>} env - the call's environment
 * @returns {{ run: 'version' } | { run: 'build', main: URL, sourceMaps: boolean } | { run: 'sources' }}
 */
export function cliEntry(root, args, env) {
  if (args.length === 1 && (args[0] === '--version' || args[0] === '-V')) return { run: 'version' };
  const buildDir = new URL(`${env.HERMES_BUILD_DIR ?? 'dist'}/`, root);
  if (env.HERMES_FROM_SOURCES !== '1' && isCurrentBuild(root, buildDir)) {
    const command = args.find((a) => !a.startsWith('-'));
    const sourceMaps = Boolean(env.HERMES_DEBUG) || (command !== undefined && STACK_COMMANDS.includes(command));
    return { run: 'build', main: new URL('main.js', buildDir), sourceMaps };
  }
  return { run: 'sources' };
}

/** The commands that run until stopped and log errors with their stacks: a build runs them with source maps. */
export const STACK_COMMANDS = ['up', 'worker', 'gateway', 'mcp'];
