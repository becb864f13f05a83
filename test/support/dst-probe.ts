/**
 * Prints, as JSON, the next fire times of every case of test/fixtures/dst.json
 * as computed by each path that decides fire times: the engine, the
 * `hermes cron next` preview and the BullMQ repeat strategy. Run by
 * test/cron-dst.test.ts in a child process with a different `TZ`, the cases file
 * as its argument (test/support/test-programs.ts bundles it for the run).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { isoUtc, nextOccurrences } from '../../scheduler/cron/cron-engine.ts';
import { previewSchedule } from '../../scheduler/cron/preview.ts';
import { cronRepeatStrategy, encodePattern } from '../../scheduler/cron/repeat-strategy.ts';

export interface DstCase {
  pattern: string;
  tz: string;
  from: string;
  expect: string[];
  why: string;
}

/** The shared cases file. */
export const DST_CASES = fileURLToPath(new URL('../fixtures/dst.json', import.meta.url));

/** The DST cases (docs/DESIGN.md §7; copied from the shared cases file), from `file` (default DST_CASES). */
export function dstCases(file = DST_CASES): DstCase[] {
  return (JSON.parse(readFileSync(file, 'utf8')) as { cases: DstCase[] }).cases;
}

/** The fire times of one case through each path. */
export function probe(c: DstCase): { engine: string[]; preview: string[]; strategy: string[] } {
  const from = Date.parse(c.from);
  const n = c.expect.length;
  const preview = previewSchedule(c.pattern, { tz: c.tz, fromMs: from, count: n, minIntervalSeconds: 60 });
  const engine = nextOccurrences(preview.schedule, c.tz, from, n).map(isoUtc);
  const strategy: string[] = [];
  let millis = from;
  for (let i = 0; i < n; i++) {
    const next = cronRepeatStrategy(millis, { pattern: encodePattern(preview.schedule), tz: c.tz });
    if (next === undefined) break;
    strategy.push(isoUtc(next));
    millis = next;
  }
  return { engine, preview: preview.times.map(isoUtc), strategy };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  process.stdout.write(
    JSON.stringify({
      tz: process.env.TZ,
      offset: new Date('2025-10-05T02:00:00Z').getTimezoneOffset(),
      results: dstCases(process.argv[2]).map(probe),
    }),
  );
}
