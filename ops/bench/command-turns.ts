/**
 * Benchmark (not a test): how many command turns at once a worker process should run — the
 * measurement behind the default of `worker.max_command_turns`.
 *
 *   npx tsx ops/bench/command-turns.ts [--turns 200] [--at-once 1,2,4,8,16,32] [--command 'echo ok'] [--json]
 *
 * Runs `--turns` command turns through the product's command runner (`/bin/sh -c` in a process group
 * of its own, with its backstop: what a `--run` tick or a cron `--script` costs the host) with
 * `--at-once` of them running at a time, for each value in the same run, and measures turns per
 * second and the worker's event-loop delay (p99 of a 10 ms timer's lateness) meanwhile. Ratios are
 * against 1 at a time. Last line with `--json`: one object per value,
 * [{"at_once","turns_per_s","loop_delay_p99_ms"}, …].
 */
import { loadavg } from 'node:os';
import { CommandRunner } from '../../worker/turn-runners/command-runner.ts';
import { percentiles, runBench } from './bench-support.ts';

const args = process.argv.slice(2);
const arg = (name: string, def: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : def;
};
const TURNS = Number(arg('turns', '200'));
const AT_ONCE = arg('at-once', '1,2,4,8,16,32').split(',').map(Number);
const COMMAND = arg('command', 'echo ok');
const JSON_OUT = args.includes('--json');

async function measure(atOnce: number): Promise<{ at_once: number; turns_per_s: number; loop_delay_p99_ms: number }> {
  const runner = new CommandRunner(COMMAND, 30_000);
  const delays: number[] = [];
  let last = performance.now();
  const probe = setInterval(() => {
    const now = performance.now();
    delays.push(Math.max(0, now - last - 10));
    last = now;
  }, 10);
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: atOnce }, async () => {
      while (next < TURNS) {
        next++;
        await runner.run({ sessionId: 'bench', messages: [{ role: 'user', content: 'tick' }], signal: new AbortController().signal });
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  clearInterval(probe);
  return {
    at_once: atOnce,
    turns_per_s: Number((TURNS / seconds).toFixed(1)),
    loop_delay_p99_ms: Number(percentiles(delays.length ? delays : [0]).p99.toFixed(1)),
  };
}

async function main(): Promise<void> {
  process.stderr.write(
    `command turns: ${TURNS} × \`${COMMAND}\`; load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}\n`,
  );
  const rows = [];
  for (const n of AT_ONCE) rows.push(await measure(n));
  process.stderr.write(
    `load average after: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}\n`,
  );
  if (!JSON_OUT) {
    console.log('| at once | turns/s | × 1 at a time | event-loop delay p99 ms |');
    console.log('|---|---|---|---|');
    for (const r of rows)
      console.log(`| ${r.at_once} | ${r.turns_per_s} | ${(r.turns_per_s / rows[0]!.turns_per_s).toFixed(2)} | ${r.loop_delay_p99_ms} |`);
  }
  console.log(JSON.stringify(rows));
}

runBench(main);
