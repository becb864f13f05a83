#!/usr/bin/env node
// The `hermes` command. Every call pays its start-up, so it loads only what the call needs:
// - `hermes --version` reads package.json and nothing else;
// - every command — the long-running `up`, `worker` and `gateway` included — runs the compiled CLI in
//   dist/ (cli/build.mjs, made by `npm ci`; or the folder `HERMES_BUILD_DIR` names) when it is there
//   and newer than every source it was made from: then it is the same code as the sources, and a
//   stack trace names the sources (source maps on);
// - with no current build, or `HERMES_FROM_SOURCES=1`, the TypeScript sources run through tsx (no
//   build step needed).
import { readFileSync } from 'node:fs';
import { isCurrentBuild } from './build-state.mjs';

const root = new URL('..', import.meta.url);
/** The build's folder: `dist/`, or the one `cli/build.mjs` was told to write (`HERMES_BUILD_DIR`, a folder directly under the checkout). */
const buildDir = new URL(`${process.env.HERMES_BUILD_DIR ?? 'dist'}/`, root);
const args = process.argv.slice(2);

if (args.length === 1 && (args[0] === '--version' || args[0] === '-V')) {
  process.stdout.write(`${JSON.parse(readFileSync(new URL('package.json', root), 'utf8')).version}\n`);
  process.exit(0);
}

if (process.env.HERMES_FROM_SOURCES !== '1' && isCurrentBuild(root, buildDir)) {
  process.setSourceMapsEnabled(true);
  await import(new URL('main.js', buildDir).href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('./main.ts');
}
