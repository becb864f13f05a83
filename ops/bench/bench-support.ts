/**
 * What the benchmarks share: percentiles of a sample, Redis's CPU time, the Node options a worker
 * runs with, and the way a benchmark script runs (an error ends it with exit code 1 and the error on
 * stderr).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** p50, p99 and max (nearest rank below) of `samples`, and how many there were. */
export interface Percentiles {
  p50: number;
  p99: number;
  max: number;
  count: number;
}

/** Percentiles of `samples` (any unit; the samples are not changed). */
export function percentiles(samples: number[]): Percentiles {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  return { p50: at(0.5), p99: at(0.99), max: s[s.length - 1]!, count: s.length };
}

/**
 * CPU seconds the Redis server has spent since it started (`used_cpu_sys + used_cpu_user` of
 * `INFO cpu`): a difference of two readings over a burst, divided by its occurrences, is the
 * benchmarks' "Redis CPU per occurrence" (docs/BENCHMARKS.md).
 */
export async function redisCpuSeconds(redis: { info(section: 'cpu'): Promise<string> }): Promise<number> {
  const info = await redis.info('cpu');
  return Number(/used_cpu_sys:([\d.]+)/.exec(info)![1]) + Number(/used_cpu_user:([\d.]+)/.exec(info)![1]);
}

/** Run a benchmark's `main`; an error is printed and ends the process with exit code 1. */
export function runBench(main: () => Promise<void>): void {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}

/**
 * The Node options `hermes` starts with: those of the `#!` line of `cli/hermes.mjs` (the rule is told there),
 * e.g. `['--max-semi-space-size=64']`.
 * @throws Error when that line is not `#!/usr/bin/env -S node` followed by options
 */
export function launcherNodeOptions(): string[] {
  const shebang = readFileSync(new URL('../../cli/hermes.mjs', import.meta.url), 'utf8').split('\n', 1)[0]!;
  const m = /^#!\/usr\/bin\/env -S node((?: --\S+)*)$/.exec(shebang);
  if (!m) throw new Error(`cli/hermes.mjs starts with an unexpected line: ${shebang}`);
  return m[1]!.split(' ').filter(Boolean);
}

/**
 * For a benchmark that runs its worker in its own process: run this script again, with the same arguments, under
 * the Node options `hermes` starts a worker with (`launcherNodeOptions`), unless it already runs under them;
 * the parent then exits with the child's code. So the worker measured is the one `hermes worker` runs, and
 * raw BullMQ, measured in the same process, runs under the same options.
 */
export function underLauncherNodeOptions(): void {
  const missing = launcherNodeOptions().filter(
    (o) => !process.execArgv.includes(o) && !(process.env.NODE_OPTIONS ?? '').split(/\s+/).includes(o),
  );
  if (missing.length === 0) return;
  const child = spawnSync(process.execPath, [...process.execArgv, ...missing, ...process.argv.slice(1)], { stdio: 'inherit' });
  process.exit(child.status ?? 1);
}
