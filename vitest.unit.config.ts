/**
 * `npm run test:unit`: the tests that need no Redis and start no process, for a fast loop while
 * working (the whole suite is `npm test`). A test file is a unit test when it uses none of the
 * stack's helpers below; the list is worked out from the files, so a new pure test joins by itself.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';
import { SlowUnitFirstSequencer } from './test/support/slow-first-sequencer.ts';

/** What makes a test file need Redis or processes (a `CommandRunner` runs its command in a shell). */
const NEEDS_STACK =
  /support\/(env|stack|agent-stack|armed-loops|cron-worker|v1-worker|telegram-harness|child-gateway|gateway-child|redis-cluster|redis-sentinel|cron-cli|terminal)\b|inject\(|node:child_process|startGateway|WorkerProcess|CommandRunner\b/;

const unit = readdirSync('test')
  // `*-race.test.ts` run for a fixed time (seconds): they belong to the whole suite.
  .filter((f) => f.endsWith('.test.ts') && !f.endsWith('-race.test.ts'))
  .filter((f) => !NEEDS_STACK.test(readFileSync(`test/${f}`, 'utf8')))
  .map((f) => `test/${f}`);

export default defineConfig({
  test: {
    include: unit,
    testTimeout: 30_000,
    pool: 'forks',
    // The slowest files first (test/support/slow-first-sequencer.ts, SLOW_UNIT_FILES).
    sequence: { sequencer: SlowUnitFirstSequencer },
    // Two workers, one per core, each importing the product modules once (isolate: false). The tier is
    // import-bound: four workers imported them twice as often and took more time, not less (2026-12-07,
    // 2 cores under load 14–22: 4 workers 27–37 s and 17–18 CPU-s, 3 workers 31 s and 20 CPU-s, 2 workers
    // 25–27 s and 14.5–15 CPU-s). The slowest file, model-calls, mostly waits on its fake clock; it starts
    // first, so the other worker takes the short files meanwhile.
    maxWorkers: 2,
    isolate: false,
  },
});
