/**
 * CLI start-up: how long a `hermes` call takes from exec to exit, against `node -e 0` in the same run.
 *
 *   npx tsx ops/bench/cli-startup.ts [--runs 10] [--json]
 *
 * Every CLI call pays start-up, so it is measured as a user meets it: `hermes --version`, `cron next @hourly`
 * (no Redis: `REDIS_URL` unset), `status` and `cron list` (three jobs stored), each run as the `#!` line of
 * cli/hermes.mjs runs it (Node with the line's options) as child processes, in rounds that interleave the
 * commands (so a busy spell of the machine falls on all of them alike), after one warm-up round that is not
 * counted. Each call is measured twice: wall time from spawn to exit, and the CPU time the child used (user +
 * system, from `process.resourceUsage()` in an exit hook the child loads with `--import`) — on a machine other
 * work keeps busy, wall time mostly measures the queue for a core and CPU time is the figure to compare. The
 * commands run the build in `dist/` (`npm run build`; `npm ci` makes it); `cron list` runs once more from the
 * sources (`HERMES_FROM_SOURCES=1`, tsx). `node -e 0` is the floor: what Node itself costs on this machine at
 * this moment; `over node` is a command's median minus the floor's.
 * Starts its own `redis-server` in a temporary folder — never a Redis it did not start.
 *
 * Targets (wall, median, idle 2-core machine): every command ≤ 300 ms, `--version` and `cron next`
 * ≤ 200 ms. `met_cpu` holds a command's CPU median to the same figure (the CPU equivalent on a loaded
 * machine). The load average is printed with the figures.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { startEmbeddedRedis } from '../../scheduler/store/redis/embedded-redis.ts';
import { launcherNodeOptions, runBench } from './bench-support.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
/** `hermes` as its `#!` line starts it: Node with the line's options, then the script. */
const HERMES = [...launcherNodeOptions(), join(ROOT, 'cli', 'hermes.mjs')];

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
}

/** Loaded into each child: on exit it writes the CPU time it used (user + system, ms) as the last line of stderr. */
const CPU_HOOK = `data:text/javascript,${encodeURIComponent(
  "process.on('exit',()=>{const u=process.resourceUsage();process.stderr.write('\\ncpu_ms '+(u.userCPUTime+u.systemCPUTime)/1000+'\\n')})",
)}`;

/** Wall time of one process from spawn to exit and the CPU time it used, ms. @throws when it exits non-zero */
function timed(args: string[], env: NodeJS.ProcessEnv): Promise<{ wallMs: number; cpuMs: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, ['--import', CPU_HOOK, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      const wallMs = performance.now() - t0;
      const cpu = /cpu_ms ([\d.]+)\n$/.exec(stderr);
      if (code === 0 && cpu) resolve({ wallMs, cpuMs: Number(cpu[1]) });
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
      await timed([...HERMES, 'cron', 'add', schedule, '--script', 'true', '--name', name], env);
    }
    if (!existsSync(join(ROOT, 'dist', 'build.json'))) throw new Error('no build in dist/: run `npm run build` first (npm ci does it)');
    const sources = { ...env, HERMES_FROM_SOURCES: '1' };
    const { REDIS_URL: _, ...noRedis } = env;
    const commands: Array<{ name: string; args: string[]; env?: NodeJS.ProcessEnv; targetMs?: number }> = [
      { name: 'node -e 0', args: ['-e', '0'] },
      { name: 'hermes --version', args: [...HERMES, '--version'], targetMs: 200 },
      { name: 'hermes cron next @hourly', args: [...HERMES, 'cron', 'next', '@hourly'], env: noRedis, targetMs: 200 },
      { name: 'hermes status', args: [...HERMES, 'status'], targetMs: 300 },
      { name: 'hermes cron list', args: [...HERMES, 'cron', 'list'], targetMs: 300 },
      // The same call without the build: the sources through tsx (what every call cost before it).
      { name: 'hermes cron list (sources, tsx)', args: [...HERMES, 'cron', 'list'], env: sources },
    ];
    const samples = new Map(commands.map((c) => [c.name, { wall: [] as number[], cpu: [] as number[] }]));
    const loadBefore = loadavg()[0]!;
    for (let round = -1; round < runs; round++) {
      for (const c of commands) {
        const t = await timed(c.args, c.env ?? env);
        if (round >= 0) {
          samples.get(c.name)!.wall.push(t.wallMs);
          samples.get(c.name)!.cpu.push(t.cpuMs);
        }
      }
    }
    const loadAfter = loadavg()[0]!;
    const floor = median(samples.get('node -e 0')!.wall);
    const cpuFloor = median(samples.get('node -e 0')!.cpu);
    const rows = commands.map((c) => {
      const { wall, cpu } = samples.get(c.name)!;
      const p50 = median(wall);
      const cpu50 = median(cpu);
      return {
        command: c.name,
        median_ms: Math.round(p50),
        min_ms: Math.round(Math.min(...wall)),
        max_ms: Math.round(Math.max(...wall)),
        over_node_ms: Math.round(p50 - floor),
        cpu_median_ms: Math.round(cpu50),
        cpu_over_node_ms: Math.round(cpu50 - cpuFloor),
        cpu_ratio_to_node: Number((cpu50 / cpuFloor).toFixed(2)),
        target_ms: c.targetMs ?? null,
        met: c.targetMs === undefined ? null : p50 <= c.targetMs,
        met_cpu: c.targetMs === undefined ? null : cpu50 <= c.targetMs,
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
    console.log('| command | wall median | min | max | over `node -e 0` | CPU median | CPU over `node -e 0` | target (wall / CPU) |');
    console.log('|---|---|---|---|---|---|---|---|');
    for (const r of rows) {
      const floorRow = r.command === 'node -e 0';
      const target = r.target_ms === null ? '—' : `≤ ${r.target_ms} ms: ${r.met ? 'met' : 'missed'} / ${r.met_cpu ? 'met' : 'missed'}`;
      console.log(
        `| \`${r.command}\` | ${r.median_ms} ms | ${r.min_ms} ms | ${r.max_ms} ms | ${floorRow ? '—' : `+${r.over_node_ms} ms`} | ${r.cpu_median_ms} ms | ${floorRow ? '—' : `+${r.cpu_over_node_ms} ms (×${r.cpu_ratio_to_node})`} | ${target} |`,
      );
    }
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  }
});
