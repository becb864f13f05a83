// What every esbuild bundle of this code needs, whatever its entry: the CLI's (cli/build.mjs) and the
// test run's child programs (test/support/test-programs.ts). Plain JavaScript, read by both builds.
import { cpSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/** Packages left to Node's own loader: optional native parts. */
export const EXTERNAL = ['msgpackr-extract'];

/** Lets bundled CommonJS packages use `require`, `__filename` and `__dirname` in an ES module. */
export const BANNER = [
  "import { createRequire as __hermesRequire } from 'node:module';",
  "import { fileURLToPath as __hermesPath } from 'node:url';",
  'const require = __hermesRequire(import.meta.url);',
  'const __filename = __hermesPath(import.meta.url);',
  "const __dirname = __filename.slice(0, __filename.lastIndexOf('/'));",
].join(' ');

/**
 * esbuild options of a bundle: ES modules for Node 20 with their dependencies, minified (names kept),
 * with source maps that name the TypeScript files (without their text).
 */
export const BUNDLE_OPTIONS = {
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external: EXTERNAL,
  banner: { js: BANNER },
  metafile: true,
  minify: true,
  // Classes and functions keep their names: node-fetch (grammy's fetch on Node) takes a signal for an
  // AbortSignal only when its class is named so, and with minified names every Telegram request
  // failed ("Network request for 'getMe' failed!": "Expected signal to be an instanceof AbortSignal").
  keepNames: true,
  sourcemap: true,
  sourcesContent: false,
  legalComments: 'none',
  logLevel: 'error',
};

/**
 * An esbuild plugin that leaves zod's translations of its error messages out (`zod/v4/locales/index.js`,
 * more than half of zod's code): the code uses zod's English messages only (the one locale zod itself
 * loads, `locales/en.js`), and every call that loads the configuration would otherwise compile the rest.
 * `z.locales` is then an empty namespace.
 */
export const WITHOUT_ZOD_LOCALES = {
  name: 'without-zod-locales',
  setup(b) {
    b.onResolve({ filter: /\/locales\/index\.js$/ }, (args) =>
      /[/\\]zod[/\\]v4[/\\]/.test(args.importer) ? { path: 'zod-locales', namespace: 'without-zod-locales' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'without-zod-locales' }, () => ({ contents: 'export {};', loader: 'js' }));
  },
};

/**
 * Copy what the code reads next to itself into the bundle's folder `out`: the Lua scripts into
 * `scripts/` (lua-script.ts) and the console's script and styles into `static/` (gateway/console/assets.ts).
 * @param {string} root - the checkout
 * @param {string} out - the bundle's folder
 * @returns {string[]} the copied files, as paths under `root` (sources of the build)
 */
export function copyRuntimeFiles(root, out) {
  const copied = [];
  for (const [from, to] of [
    ['scheduler/store/redis/scripts', 'scripts'],
    ['gateway/console/static', 'static'],
  ]) {
    cpSync(join(root, from), join(out, to), { recursive: true });
    copied.push(...readdirSync(join(root, from)).map((f) => `${from}/${f}`));
  }
  return copied;
}

/**
 * The sources a build was made from, from esbuild's metafile: its inputs outside `node_modules`
 * (the dependencies are covered by package-lock.json).
 * @param {{ inputs: Record<string, unknown> }} metafile
 * @returns {string[]} paths under the checkout
 */
export function ownSources(metafile) {
  return Object.keys(metafile.inputs).filter((p) => !p.includes('node_modules/') && !p.includes(':'));
}
