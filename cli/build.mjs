#!/usr/bin/env node
/**
 * Compiles the `hermes` commands into `dist/` once, so each call starts in a fraction of the time
 * (docs/BENCHMARKS.md, "CLI start-up"). `npm ci` / `npm install` run it (`prepare`); `npm run build`
 * runs it by hand. Nothing else needs it: without a build, or with one older than any source it was
 * made from, `cli/hermes.mjs` runs the TypeScript sources through tsx as before.
 *
 * What it makes: `dist/main.js` and its chunks — `cli/main.ts` and everything it imports, the
 * dependencies included, bundled by esbuild as ES modules (one file to parse instead of hundreds to
 * resolve and load; most of a call's time went there). The long-running commands (`up`, `worker`,
 * `gateway`) are in it too, in chunks only they load: a build is used only while it is newer than every
 * source it was made from, so it runs the same code as the sources. `dist/scripts/` holds the Lua
 * scripts and `dist/static/` the console's own files (both read next to the code that loads them),
 * `*.map` the source maps (`hermes.mjs` turns them on, so a stack trace names the TypeScript sources),
 * and `dist/build.json` the sources the build was made from and when (`hermes.mjs` compares their
 * modification times with it).
 *
 *   node cli/build.mjs               build; exit 1 on failure
 *   node cli/build.mjs --if-possible build; on failure say why and exit 0 (install must not fail)
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUNDLE_OPTIONS, copyRuntimeFiles, EXTERNAL, ownSources, WITHOUT_ZOD_LOCALES } from './build-options.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
/** Where the build goes: `dist/`, or (tests) another folder directly under the checkout, named by `HERMES_BUILD_DIR`. */
const OUT = join(ROOT, process.env.HERMES_BUILD_DIR ?? 'dist');
const ifPossible = process.argv.includes('--if-possible');

/**
 * Packages most calls never use, each in the CLI as a module of lazy stand-ins for its exports, which
 * load the real package (bundled on its own as `dist/vendor/<name>.cjs`) the first time one is used —
 * constructed, called or read. A stand-in passes `new`, calls, property reads and `instanceof` to the
 * real export.
 * - `bullmq`, two thirds of the CLI's code: the commands that only read records (`cron list`,
 *   `cron runs`, `status`) never open a queue (`HermesQueues` opens its queues on first use);
 * - `yaml`: read only when `$HERMES_HOME/config.yaml` exists;
 * - `node-cron`: `housekeeping.workers_cron`, checked only when that section is given or read
 *   (scheduler/config/config.ts), and a worker's housekeeping.
 */
const LAZY_PACKAGES = ['bullmq', 'yaml', 'node-cron'];

function lazyPackageSource(pkg, names) {
  return [
    "import { createRequire } from 'node:module';",
    'let real;',
    `const load = () => (real ??= createRequire(import.meta.url)(${JSON.stringify(`./vendor/${pkg}.cjs`)}));`,
    'function lazy(name) {',
    '  const proxy = new Proxy(function () {}, {',
    '    construct: (_t, args, newTarget) => Reflect.construct(load()[name], args, newTarget === proxy ? load()[name] : newTarget),',
    '    apply: (_t, self, args) => Reflect.apply(load()[name], self, args),',
    '    get: (_t, p) => Reflect.get(load()[name], p),',
    '    has: (_t, p) => p in load()[name],',
    '    getPrototypeOf: () => Reflect.getPrototypeOf(load()[name]),',
    '  });',
    '  return proxy;',
    '}',
    ...names.map((n) => `export const ${n} = lazy(${JSON.stringify(n)});`),
  ].join('\n');
}

async function main() {
  const started = Date.now();
  const { build } = await import('esbuild');
  const { createRequire } = await import('node:module');
  const require = createRequire(import.meta.url);
  const exportNames = (pkg) => Object.keys(require(pkg)).filter((n) => /^[A-Za-z_$][\w$]*$/.test(n) && n !== 'default');
  const lazyPackages = {
    name: 'lazy-packages',
    setup(b) {
      const filter = new RegExp(`^(${LAZY_PACKAGES.map((p) => p.replace(/[-/]/g, '\\$&')).join('|')})$`);
      b.onResolve({ filter }, (args) => ({ path: args.path, namespace: 'lazy-packages' }));
      b.onLoad({ filter: /.*/, namespace: 'lazy-packages' }, (args) => ({
        contents: lazyPackageSource(args.path, exportNames(args.path)),
        loader: 'js',
        resolveDir: ROOT,
      }));
    },
  };
  rmSync(OUT, { recursive: true, force: true });
  const result = await build({
    ...BUNDLE_OPTIONS,
    entryPoints: [join(ROOT, 'cli', 'main.ts')],
    outdir: OUT,
    splitting: true,
    entryNames: '[name]',
    chunkNames: '[name]-[hash]',
    plugins: [lazyPackages, WITHOUT_ZOD_LOCALES],
  });
  // Each lazy package on its own, loaded by its stand-ins above when a command first uses it.
  for (const pkg of LAZY_PACKAGES) {
    await build({
      stdin: { contents: `module.exports = require(${JSON.stringify(pkg)});`, resolveDir: ROOT, loader: 'js' },
      outfile: join(OUT, 'vendor', `${pkg}.cjs`),
      bundle: true,
      format: 'cjs',
      platform: 'node',
      target: 'node20',
      external: EXTERNAL,
      minify: true,
      legalComments: 'none',
      logLevel: 'error',
    });
  }
  // The Lua scripts and the console's files, read next to the code that loads them.
  const copied = copyRuntimeFiles(ROOT, OUT);
  const sources = ownSources(result.metafile);
  const inputs = [...sources, ...copied, 'cli/build.mjs', 'cli/build-options.mjs', 'package.json', 'package-lock.json'];
  mkdirSync(OUT, { recursive: true });
  writeFileSync(join(OUT, 'build.json'), `${JSON.stringify({ built_at: started, inputs }, null, 1)}\n`);
  process.stdout.write(`hermes: compiled the CLI into ${relative(ROOT, OUT)}/ (${sources.length} sources, ${Date.now() - started} ms)\n`);
}

main().catch((err) => {
  rmSync(OUT, { recursive: true, force: true });
  process.stderr.write(
    `hermes: the CLI was not compiled (${err instanceof Error ? err.message.split('\n')[0] : String(err)}); it runs from the sources, which starts slower.\n`,
  );
  process.exitCode = ifPossible ? 0 : 1;
});
