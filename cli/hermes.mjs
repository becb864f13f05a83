#!/usr/bin/env -S node --max-semi-space-size=64
// Node's options come from the line above, for every command (`env -S` splits it): 64 MB semi-spaces, a
// larger young generation for a worker's bursts. At the top of the hour garbage collection was a quarter of
// a worker's thread or more; with them it takes less, and a burst starts and commits sooner, for up to
// ~190 MB more memory while it lasts (docs/BENCHMARKS.md, "Top of the hour"). A short command never grows
// its young generation that far. Started as `node cli/hermes.mjs` (the systemd unit, compose.yaml), this
// line is not read: those set NODE_OPTIONS to the same options (test/deployment.test.ts holds them to it).
// The `hermes` command. Every call pays its start-up, so it loads only what the call needs:
// - `hermes --version` reads package.json and nothing else;
// - every command — the long-running `up`, `worker` and `gateway` included — runs the compiled CLI in
//   dist/ (cli/build.mjs, made by `npm ci`; or the folder `HERMES_BUILD_DIR` names) when it is there
//   and newer than every source it was made from: then it is the same code as the sources, and a
//   stack trace names the sources (source maps on where a stack can be shown: the long-running
//   commands and `HERMES_DEBUG`);
// - with no current build, or `HERMES_FROM_SOURCES=1`, the TypeScript sources run through tsx (no
//   build step needed).
// Which of the three a call runs is `cliEntry` (build-state.mjs).
import { readFileSync } from 'node:fs';
import { cliEntry } from './build-state.mjs';

const root = new URL('..', import.meta.url);
const entry = cliEntry(root, process.argv.slice(2), process.env);

if (entry.run === 'version') {
  process.stdout.write(`${JSON.parse(readFileSync(new URL('package.json', root), 'utf8')).version}\n`);
  process.exit(0);
}

if (entry.run === 'build') {
  if (entry.sourceMaps) process.setSourceMapsEnabled(true);
  await import(entry.main.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('./main.ts');
}
