/**
 * The programs tests start as child processes of their own, run by `node` (not by `hermes`): a gateway a
 * test can SIGKILL (gateway-child.ts), an MCP server speaking stdio (mcp-counter-server.ts), and probes
 * run under another process's settings (dst-probe.ts, jitter-probe.ts). Through tsx a start costs
 * ~2 CPU-s for the gateway (1.9–2.3 measured; compiled ~0.65), most of it compiling and resolving hundreds
 * of modules. So the test run bundles them once, as cli/build.mjs bundles the CLI (same esbuild options,
 * cli/build-options.mjs), into `.build-test-programs-<id>/` under the checkout (a folder of its own, made
 * afresh by every run from the sources as they are, removed after it) and names it to the test workers
 * (`HERMES_TEST_PROGRAMS_DIR`).
 *
 * `programArgs` is the one place a test gets a program's `node` arguments: the bundle while it is current
 * (cli/build-state.mjs, the CLI's rule: newer than every source it was made from), otherwise the source
 * through tsx — with no bundle (a run that could not make one, `HERMES_FROM_SOURCES=1`) or when a
 * source was edited since, so a stale bundle never runs.
 */
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BUNDLE_OPTIONS, copyRuntimeFiles, ownSources } from '../../cli/build-options.mjs';
import { isCurrentBuild } from '../../cli/build-state.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Each program's name (its bundle is `<name>.js`) and source. */
const PROGRAMS = {
  'gateway-child': 'test/support/gateway-child.ts',
  'mcp-counter-server': 'test/support/mcp-counter-server.ts',
  'dst-probe': 'test/support/dst-probe.ts',
  'jitter-probe': 'test/support/jitter-probe.ts',
} as const;

export type TestProgram = keyof typeof PROGRAMS;

/** Names the run's bundle folder (under the checkout) to the test workers. */
const DIR_ENV = 'HERMES_TEST_PROGRAMS_DIR';

/**
 * `node`'s arguments that run `program` (spawn `process.execPath` with them, then the program's own):
 * its bundle when current, with source maps on (a stack trace names the TypeScript files), else its
 * source through tsx (node with tsx as a loader: the pid started is the program's own).
 */
export function programArgs(program: TestProgram): string[] {
  const dir = process.env[DIR_ENV];
  if (dir && process.env.HERMES_FROM_SOURCES !== '1' && isCurrentBuild(pathToFileURL(`${ROOT}/`), pathToFileURL(join(ROOT, dir, '/')))) {
    return ['--enable-source-maps', join(ROOT, dir, `${program}.js`)];
  }
  return ['--import', 'tsx', join(ROOT, PROGRAMS[program])];
}

/**
 * Bundle the programs for this run (global set-up, before any test file runs); resolves with the
 * clean-up. A build that fails leaves the programs on tsx (slower, same behaviour), with the reason on stderr.
 */
export async function buildTestPrograms(): Promise<() => void> {
  if (process.env.HERMES_FROM_SOURCES === '1') return () => {};
  const started = Date.now();
  const dir = `.build-test-programs-${randomBytes(4).toString('hex')}`;
  const out = join(ROOT, dir);
  const remove = () => rmSync(out, { recursive: true, force: true });
  try {
    const { build } = await import('esbuild');
    const result = await build({
      ...BUNDLE_OPTIONS,
      absWorkingDir: ROOT,
      entryPoints: Object.fromEntries(Object.entries(PROGRAMS).map(([name, source]) => [name, join(ROOT, source)])),
      outdir: out,
      // Chunks beside the entries: code that reads files next to itself (copyRuntimeFiles) finds them from any of them.
      splitting: true,
      chunkNames: '[name]-[hash]',
    });
    const copied = copyRuntimeFiles(ROOT, out);
    const inputs = [
      ...ownSources(result.metafile),
      ...copied,
      'test/support/test-programs.ts',
      'cli/build-options.mjs',
      'package.json',
      'package-lock.json',
    ];
    writeFileSync(join(out, 'build.json'), `${JSON.stringify({ built_at: started, inputs }, null, 1)}\n`);
  } catch (err) {
    remove();
    process.stderr.write(
      `test programs not bundled (${err instanceof Error ? err.message.split('\n')[0] : String(err)}); they run through tsx\n`,
    );
    return () => {};
  }
  // Set before any test file runs: the worker processes inherit it.
  process.env[DIR_ENV] = dir;
  return () => {
    delete process.env[DIR_ENV];
    remove();
  };
}
