/**
 * What the benchmarks share: percentiles of a sample, Redis's CPU time, and the way a benchmark
 * script runs (an error ends it with exit code 1 and the error on stderr).
 */

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
