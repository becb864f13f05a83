/**
 * CLI start-up: how long a `hermes` call takes from exec to exit, against `node -e 0` in the same run.
 *
 *   npx tsx ops/bench/cli-startup.ts [--runs 10] [--json]
 *
 * Every CLI call pays start-up, so it is measured as a user meets it: `node cli/hermes.mjs --version`
 * and `node cli/hermes.mjs cron list` (three jobs stored) as child processes, wall time from spawn
 * to exit, in rounds that interleave the commands (so a busy spell of the machine falls on all of
 * them alike), after one warm-up round that is not counted. `cron list` runs the build in `dist/`
 * (`npm run build`; `npm ci` makes it), and once more from the sources (`HERMES_FROM_SOURCES=1`,
 * tsx), which is what every call cost before the build. `node -e 0` is the floor: what Node
 * itself costs on this machine at this moment; `over node` is a command's median minus the floor's.
 * Starts its own `redis-server` in a temporary folder — never a Redis it did not start.
 *
 * Targets: `--version` ≤ 250 ms and `cron list` ≤ 600 ms at the median. On a loaded machine the
 * floor itself moves (`node -e 0` from about 40 ms idle to several hundred ms), so the load average
 * is printed with the figures.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { startEmbeddedRedis } from '../../scheduler/store/redis/embedded-redis.ts';
import { runBench } from './bench-support.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const HERMES = join(ROOT, 'cli', 'hermes.mjs');

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
}

/** Wall time of one process from spawn to exit, ms. @throws when it exits non-zero */
function timed(args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      const ms = performance.now() - t0;
      if (code === 0) resolve(ms);
      else reject(new Error(`node ${args.join(' ')} exited ${code}: ${stderr.trim()}`));
    });
  });
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

runBench(async () => {
  const runs = arg('runs', 10);
  const json = process.argv.includes('--json');
  const dir = mkdtempSync(join(tmpdir(), 'hermes-bench-redis-'));
  const home = mkdtempSync(join(tmpdir(), 'hermes-bench-home-'));
  const server = await startEmbeddedRedis({ dir, appendonly: false });
  try {
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      HERMES_HOME: home,
      REDIS_URL: server.url,
      HERMES_LOG_LEVEL: 'warn',
      TZ: 'UTC',
    };
    // Three jobs, so `cron list` prints a table (the command the user runs most).
    for (const [schedule, name] of [
      ['every 2h', 'disk'],
      ['weekdays at 9am', 'standup'],
      ['0 * * * *', 'mirrors'],
    ] as const) {
      await timed([HERMES, 'cron', 'add', schedule, '--script', 'true', '--name', name], env);
    }
    if (!existsSync(join(ROOT, 'dist', 'build.json'))) throw new Error('no build in dist/: run `npm run build` first (npm ci does it)');
    const sources = { ...env, HERMES_FROM_SOURCES: '1' };
    const commands: Array<{ name: string; args: string[]; env?: NodeJS.ProcessEnv; targetMs?: number }> = [
      { name: 'node -e 0', args: ['-e', '0'] },
      { name: 'hermes --version', args: [HERMES, '--version'], targetMs: 250 },
      { name: 'hermes cron list', args: [HERMES, 'cron', 'list'], targetMs: 600 },
      // The same call without the build: the sources through tsx (what every call cost before it).
      { name: 'hermes cron list (sources, tsx)', args: [HERMES, 'cron', 'list'], env: sources },
    ];
    const samples = new Map(commands.map((c) => [c.name, [] as number[]]));
    const loadBefore = loadavg()[0]!;
    for (let round = -1; round < runs; round++) {
      for (const c of commands) {
        const ms = await timed(c.args, c.env ?? env);
        if (round >= 0) samples.get(c.name)!.push(ms);
      }
    }
    const loadAfter = loadavg()[0]!;
    const floor = median(samples.get('node -e 0')!);
    const rows = commands.map((c) => {
      const xs = samples.get(c.name)!;
      const p50 = median(xs);
      return {
        command: c.name,
        median_ms: Math.round(p50),
        min_ms: Math.round(Math.min(...xs)),
        max_ms: Math.round(Math.max(...xs)),
        over_node_ms: Math.round(p50 - floor),
        target_ms: c.targetMs ?? null,
        met: c.targetMs === undefined ? null : p50 <= c.targetMs,
      };
    });
    const machine = {
      cores: cpus().length,
      node: process.version,
      load_1m_before: Number(loadBefore.toFixed(2)),
      load_1m_after: Number(loadAfter.toFixed(2)),
      runs,
    };
    if (json) {
      process.stdout.write(`${JSON.stringify({ machine, rows })}\n`);
      return;
    }
    console.log(
      `${machine.cores} cores, Node ${machine.node}, load average (1 min) ${machine.load_1m_before} before, ${machine.load_1m_after} after; medians of ${runs}\n`,
    );
    console.log('| command | median | min | max | over `node -e 0` | target |');
    console.log('|---|---|---|---|---|---|');
    for (const r of rows) {
      const target = r.target_ms === null ? '—' : `≤ ${r.target_ms} ms ${r.met ? 'met' : 'missed'}`;
      console.log(
        `| \`${r.command}\` | ${r.median_ms} ms | ${r.min_ms} ms | ${r.max_ms} ms | ${r.command === 'node -e 0' ? '—' : `+${r.over_node_ms} ms`} | ${target} |`,
      );
    }
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  }
});
