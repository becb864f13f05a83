/**
 * Benchmark (not a test) of one page of a list with many schedules stored, on a private Redis started for
 * the run (never 127.0.0.1:6379):
 *
 *   npx tsx ops/bench/list-page.ts [--schedules 100000] [--requests 200] [--limit 50] [--json]
 *
 * What is stored and timed: `./list-page-timing.ts`. Prints p50/p99/max in milliseconds as a Markdown table
 * with the load average; with `--json` its last line is
 * `{"schedules", "cron_jobs_page_p99_ms", "sessions_page_p99_ms", "cron_list_p99_ms", "list_page_p99_ms"}`
 * (the last the largest of the three). Target: p99 ≤ 200 ms at 100,000.
 */
import { runBench, type Percentiles } from './bench-support.ts';
import { listPageP99, timeListPages } from './list-page-timing.ts';

const args = process.argv.slice(2);
const arg = (name: string, def: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? Number(args[i + 1]) : def;
};
const SCHEDULES = arg('schedules', 100_000);
const REQUESTS = arg('requests', 200);
const LIMIT = arg('limit', 50);
const JSON_OUT = args.includes('--json');

async function main(): Promise<void> {
  const t = await timeListPages({ schedules: SCHEDULES, requests: REQUESTS, limit: LIMIT, say: (s) => process.stderr.write(`${s}\n`) });
  const r = (x: number) => Math.round(x * 10) / 10;
  const row = (what: string, p: Percentiles) => `| ${what} | ${r(p.p50)} | ${r(p.p99)} | ${r(p.max)} | ${p.count} |`;
  console.log(
    `\nOne page of ${LIMIT}, ${SCHEDULES} cron jobs and ${SCHEDULES} loops stored, node ${process.version}, load average ${t.loadAfter}\n`,
  );
  console.log('| list | p50 ms | p99 ms | max ms | pages |');
  console.log('|---|---|---|---|---|');
  console.log(row('GET /api/cron/jobs', t.jobs));
  console.log(row('GET /api/sessions', t.sessions));
  console.log(row('hermes cron list (in process: connect, page, print)', t.cronList));
  if (JSON_OUT) {
    console.log(
      JSON.stringify({
        schedules: SCHEDULES,
        cron_jobs_page_p99_ms: r(t.jobs.p99),
        sessions_page_p99_ms: r(t.sessions.p99),
        cron_list_p99_ms: r(t.cronList.p99),
        list_page_p99_ms: listPageP99(t),
      }),
    );
  }
}

runBench(main);
