/**
 * How `hermes` starts (cli/hermes.mjs, cli/build.mjs; figures in docs/BENCHMARKS.md, "CLI start-up"):
 * `--version` reads only package.json; every other command — `up`, `worker` and `gateway` included — runs
 * the compiled CLI when the build is newer than every source it was made from (in `dist/`, or the folder
 * `HERMES_BUILD_DIR` names), and the sources otherwise (the rule: `cliEntry` in cli/build-state.mjs, run
 * in this process for its cases; three real calls show hermes.mjs follows it). The compiled CLI does what
 * the sources do, loads BullMQ only for a command that opens a queue, and the Redis client and the logger only
 * with a command's first connection (`cron next` has none).
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEnv, type TestEnv } from './support/env.ts';
import { ROOT } from './support/stack.ts';
import { cliEntry, isCurrentBuild } from '../cli/build-state.mjs';

const run = promisify(execFile);

/** A checkout of its own: the real hermes.mjs, a `main.ts` and a `dist/main.js` that say which ran. */
function fakeCheckout(): { root: string; hermes: string; touch(path: string, ms: number): void } {
  const root = mkdtempSync(join(tmpdir(), 'hermes-startup-'));
  mkdirSync(join(root, 'cli'));
  mkdirSync(join(root, 'dist'));
  symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'));
  cpSync(join(ROOT, 'cli', 'hermes.mjs'), join(root, 'cli', 'hermes.mjs'));
  cpSync(join(ROOT, 'cli', 'build-state.mjs'), join(root, 'cli', 'build-state.mjs'));
  writeFileSync(join(root, 'package.json'), JSON.stringify({ type: 'module', version: '9.8.7' }));
  writeFileSync(join(root, 'cli', 'main.ts'), "const from: string = 'sources';\nconsole.log(from, process.argv.slice(2).join(' '));\n");
  writeFileSync(join(root, 'dist', 'main.js'), "console.log('build', process.argv.slice(2).join(' '));\n");
  const builtAt = Date.now();
  writeFileSync(join(root, 'dist', 'build.json'), JSON.stringify({ built_at: builtAt, inputs: ['cli/main.ts', 'package.json'] }));
  const touch = (path: string, ms: number) => utimesSync(join(root, path), ms / 1000, ms / 1000);
  touch('cli/main.ts', builtAt - 60_000);
  touch('package.json', builtAt - 60_000);
  return { root, hermes: join(root, 'cli', 'hermes.mjs'), touch };
}

describe('which code a call runs', () => {
  it('--version reads package.json; every command, up, worker and gateway included, runs a current build; a stale or missing one runs the sources', () => {
    // The rule itself (cliEntry, what cli/hermes.mjs runs by), on a checkout's files and times.
    const c = fakeCheckout();
    try {
      const root = pathToFileURL(`${c.root}/`);
      const runs = (args: string[], env: Record<string, string> = {}) => {
        const entry = cliEntry(root, args, env);
        return entry.run === 'build' ? relative(c.root, fileURLToPath(entry.main)) : entry.run;
      };
      expect(runs(['--version'])).toBe('version');
      expect(runs(['-V'])).toBe('version');
      expect(runs(['--version', 'x'])).toBe('dist/main.js');
      expect(runs(['cron', 'list'])).toBe('dist/main.js');
      expect(runs(['status', '--json'])).toBe('dist/main.js');
      for (const cmd of ['up', 'worker', 'gateway']) expect(runs([cmd, '--no-chat'])).toBe('dist/main.js');
      expect(runs(['cron', 'list'], { HERMES_FROM_SOURCES: '1' })).toBe('sources');
      expect(runs(['worker'], { HERMES_FROM_SOURCES: '1' })).toBe('sources');
      expect(runs(['worker'], { HERMES_FROM_SOURCES: '0' })).toBe('dist/main.js');
      // HERMES_BUILD_DIR names another build folder under the checkout, held to the same rules.
      cpSync(join(c.root, 'dist'), join(c.root, 'other'), { recursive: true });
      expect(runs(['cron', 'list'], { HERMES_BUILD_DIR: 'other' })).toBe('other/main.js');
      expect(runs(['cron', 'list'], { HERMES_BUILD_DIR: 'missing' })).toBe('sources');
      // A source changed after the build: the build is not used until it is made again.
      c.touch('cli/main.ts', Date.now() + 5_000);
      expect(runs(['cron', 'list'])).toBe('sources');
      expect(runs(['worker'])).toBe('sources');
      c.touch('cli/main.ts', Date.now() - 60_000);
      expect(runs(['cron', 'list'])).toBe('dist/main.js');
      // A source the build names is gone, or there is no build record: the sources.
      writeFileSync(join(c.root, 'dist', 'build.json'), JSON.stringify({ built_at: Date.now(), inputs: ['cli/main.ts', 'cli/gone.ts'] }));
      expect(runs(['cron', 'list'])).toBe('sources');
      rmSync(join(c.root, 'dist', 'build.json'));
      expect(runs(['cron', 'list'])).toBe('sources');
    } finally {
      rmSync(c.root, { recursive: true, force: true });
    }
  });

  it('a build runs with source maps where a stack can be shown: the long-running commands and HERMES_DEBUG', () => {
    const c = fakeCheckout();
    try {
      const root = pathToFileURL(`${c.root}/`);
      const maps = (args: string[], env: Record<string, string> = {}) => {
        const entry = cliEntry(root, args, env);
        return entry.run === 'build' ? entry.sourceMaps : entry.run;
      };
      for (const cmd of ['up', 'worker', 'gateway', 'mcp']) expect(maps([cmd]), cmd).toBe(true);
      expect(maps(['up', '--no-chat'])).toBe(true);
      expect(maps(['cron', 'next', '@hourly'])).toBe(false);
      expect(maps(['status', '--json'])).toBe(false);
      // A short command prints a stack only with HERMES_DEBUG (cli/run-command.ts): then the maps are on.
      expect(maps(['cron', 'list'], { HERMES_DEBUG: '1' })).toBe(true);
      expect(maps(['cron', 'list'], { HERMES_DEBUG: '' })).toBe(false);
      // The command word is the first argument that is not an option; an argument naming `worker` is not it.
      expect(maps(['cron', 'add', 'every 2h', 'worker'])).toBe(false);
    } finally {
      rmSync(c.root, { recursive: true, force: true });
    }
  });

  it('cli/hermes.mjs runs what the rule says: package.json, the build or the sources (through tsx), with the arguments', async () => {
    const c = fakeCheckout();
    try {
      // The run's own choice of code (test/support/global-build.ts, HERMES_FROM_SOURCES) is not this checkout's.
      const { HERMES_BUILD_DIR: _runBuild, HERMES_FROM_SOURCES: _fromSources, ...base } = process.env;
      const hermes = async (args: string[], env: NodeJS.ProcessEnv = {}) =>
        (await run(process.execPath, [c.hermes, ...args], { env: { ...base, ...env } })).stdout.trim();
      // Three independent calls, at the same time.
      const [version, build, sources] = await Promise.all([
        hermes(['--version']),
        hermes(['cron', 'list']),
        hermes(['worker', '--no-chat'], { HERMES_FROM_SOURCES: '1' }),
      ]);
      expect(version).toBe('9.8.7');
      expect(build).toBe('build cron list');
      expect(sources).toBe('sources worker --no-chat');
    } finally {
      rmSync(c.root, { recursive: true, force: true });
    }
  });
});

describe('how Node starts', () => {
  it('run as a command, `hermes` starts Node with the options of its `#!` line (64 MB semi-spaces), whatever the command', async () => {
    const c = fakeCheckout();
    try {
      writeFileSync(join(c.root, 'dist', 'main.js'), "console.log(process.execArgv.join(' '));\n");
      const { HERMES_BUILD_DIR: _runBuild, HERMES_FROM_SOURCES: _fromSources, NODE_OPTIONS: _options, ...base } = process.env;
      // Executed itself (as `npm link`, a global install or `./cli/hermes.mjs` run it), not through `node`.
      const [worker, list] = await Promise.all(
        [['worker'], ['cron', 'list']].map(async (args) => (await run(c.hermes, args, { env: base })).stdout.trim().split(' ')),
      );
      expect(worker).toContain('--max-semi-space-size=64');
      expect(list).toContain('--max-semi-space-size=64');
    } finally {
      rmSync(c.root, { recursive: true, force: true });
    }
  });
});

describe('the compiled CLI', () => {
  // The build the run's `hermes` calls use: the one this run made of the sources as they are
  // (test/support/global-build.ts), or `dist/` when it is current (made by `npm ci`); else one of its own.
  const runBuild =
    process.env.HERMES_BUILD_DIR ??
    (isCurrentBuild(pathToFileURL(`${ROOT}/`), pathToFileURL(join(ROOT, 'dist', '/'))) ? 'dist' : undefined);
  const dir = runBuild ?? `.build-test-${randomBytes(4).toString('hex')}`;
  let e: TestEnv;
  beforeAll(async () => {
    if (!runBuild) await run(process.execPath, [join(ROOT, 'cli', 'build.mjs')], { env: { ...process.env, HERMES_BUILD_DIR: dir } });
    e = testEnv();
  }, 120_000);
  afterAll(() => {
    if (!runBuild) rmSync(join(ROOT, dir), { recursive: true, force: true });
    e?.cleanup();
  });

  /** `node <build>/main.js …`, as `hermes.mjs` runs it. */
  const compiled = async (args: string[]) => {
    const r = await run(process.execPath, [join(ROOT, dir, 'main.js'), ...args], { env: e.childEnv }).catch(
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    return { code: 'code' in r && typeof r.code === 'number' ? r.code : 0, stdout: r.stdout, stderr: r.stderr };
  };

  it('records what it was made from, and runs cron, loop, goal and status like the sources', async () => {
    const record = JSON.parse(readFileSync(join(ROOT, dir, 'build.json'), 'utf8')) as { built_at: number; inputs: string[] };
    // The long-running commands' code and the files it reads next to itself are in it, so their change makes the build stale.
    expect(record.inputs).toEqual(
      expect.arrayContaining([
        'cli/main.ts',
        'cli/commands/cron.ts',
        'scheduler/cron/cron-service.ts',
        'worker/worker-process.ts',
        'gateway/gateway-process.ts',
        'gateway/console/static/console.js',
        'scheduler/store/redis/scripts/acquire-owned-1.lua',
        'package-lock.json',
      ]),
    );

    // The writes touch different records: at the same time.
    const [added, refused, loop, goal] = await Promise.all([
      compiled(['cron', 'add', 'every 2h', '--script', 'true', '--name', 'disk']),
      compiled(['cron', 'add', 'every 10s', 'x']),
      compiled(['loop', '10m', 'check', 'the', 'build']),
      compiled(['goal', 'ship', 'it']),
    ]);
    expect(added).toMatchObject({ code: 0, stdout: expect.stringContaining('Added cron job:') });
    expect(refused).toMatchObject({ code: 2, stderr: expect.stringMatching(/^hermes: .*below the minimum of 1m/) });
    expect(loop).toMatchObject({ code: 0, stdout: expect.stringMatching(/^Loop set: every 10m/) });
    expect(goal).toMatchObject({ code: 0, stdout: expect.stringMatching(/^Goal set/) });
    const [list, status] = await Promise.all([compiled(['cron', 'list']), compiled(['status'])]);
    expect(list).toMatchObject({ code: 0, stderr: '' });
    expect(list.stdout).toMatch(/^[0-9a-f]{12} {2}disk {2}every 2h /m);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(/^main +loop +active +every 10m/m);
    expect(status.stdout).toMatch(/^main +ship it +active/m);
    expect(status.stdout).toMatch(/^[0-9a-f]{12} {2}disk /m);
    expect(await compiled(['cron', 'pause', 'disk'])).toMatchObject({ code: 0, stdout: expect.stringMatching(/^Paused /) });
  }, 60_000);

  it('cron next loads no Redis client and no logger (they load with the first connection); status does', async () => {
    // Node's own modules a call loaded, printed at exit: ioredis needs tls and dns, pino worker_threads.
    const hook = `data:text/javascript,${encodeURIComponent(
      "process.on('exit',()=>process.stderr.write('\\nloaded '+JSON.stringify(process.moduleLoadList)+'\\n'))",
    )}`;
    const builtins = async (args: string[]) => {
      const { stderr } = await run(process.execPath, ['--import', hook, join(ROOT, dir, 'main.js'), ...args], { env: e.childEnv });
      const list = JSON.parse(/\nloaded (.*)\n$/.exec(stderr)![1]!) as string[];
      return ['tls', 'dns', 'worker_threads'].filter((m) => list.includes(`NativeModule ${m}`));
    };
    const [next, status] = await Promise.all([builtins(['cron', 'next', '@hourly']), builtins(['status'])]);
    expect(next).toEqual([]);
    expect(status).toEqual(['tls', 'dns', 'worker_threads']);
  }, 60_000);

  it('the packages a call may not need load on first use: yaml with a config.yaml, node-cron with housekeeping settings, BullMQ not for cron next or cron list', async () => {
    // The build's own packages a call loaded (dist/vendor/*.cjs, through Node's require cache), printed at exit.
    const hook = `data:text/javascript,${encodeURIComponent(
      "import { createRequire } from 'node:module'; const r = createRequire('/'); process.on('exit',()=>process.stderr.write('\\nvendor '+JSON.stringify(Object.keys(r.cache).filter((f)=>/[\\/]vendor[\\/]/.test(f)).map((f)=>f.replace(/.*[\\/]/,'')).sort())+'\\n'))",
    )}`;
    const vendor = async (args: string[], env: NodeJS.ProcessEnv = e.childEnv) => {
      const { stderr } = await run(process.execPath, ['--import', hook, join(ROOT, dir, 'main.js'), ...args], { env });
      return JSON.parse(/\nvendor (.*)\n$/.exec(stderr)![1]!) as string[];
    };
    const home = mkdtempSync(join(tmpdir(), 'hermes-startup-home-'));
    try {
      writeFileSync(join(home, 'config.yaml'), 'loops:\n  max_ticks: 7\n', { mode: 0o600 });
      const withFile = { ...e.childEnv, HERMES_HOME: home };
      const [bare, file, housekeeping] = await Promise.all([
        vendor(['cron', 'next', '@hourly']),
        vendor(['cron', 'next', '@hourly'], withFile),
        vendor(['cron', 'next', '@hourly'], { ...withFile, HERMES_HOUSEKEEPING_WORKERS_CRON: '*/7 * * * *' }),
      ]);
      expect(bare).toEqual([]);
      expect(file).toEqual(['yaml.cjs']);
      expect(housekeeping).toEqual(['node-cron.cjs', 'yaml.cjs']);
      expect(await vendor(['cron', 'list'])).toEqual([]);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }, 60_000);
});
