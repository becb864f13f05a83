/**
 * `npm run test:unit`: the tests that need no Redis and start no process, for a fast loop while
 * working (the whole suite is `npm test`). A test file is a unit test when it uses none of the
 * stack's helpers below; the list is worked out from the files, so a new pure test joins by itself.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';

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
    // As in vitest.config.ts: the slowest files (model-calls, sleep-until) mostly wait on timers, so
    // they run beside the others, in workers that import the product modules once.
    maxWorkers: 4,
    isolate: false,
  },
});
