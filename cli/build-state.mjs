// Whether a compiled CLI may run: the one rule `cli/hermes.mjs` starts by, and the test run's build
// (test/support/global-build.ts) checks with. Plain JavaScript, read at every `hermes` start.
import { readFileSync, statSync } from 'node:fs';

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
    for (const input of inputs) {
      if (statSync(new URL(input, root)).mtimeMs > builtAt) return false;
    }
    return true;
  } catch {
    return false;
  }
}
