/**
 * The order test files start in (`sequence.sequencer` in vitest.config.ts): the files that take longest
 * start first, so none of them starts last and decides the suite's end on its own.
 *
 * vitest orders files by the durations of its last run, which a clean checkout does not have (it then
 * starts the largest files first, and a short file that waits 45 s on a due time can start last).
 * The list below is the files that took longest in a full run (`npx vitest run --reporter=json
 * --outputFile=report.json`, each file's `endTime - startTime`), longest first; a file whose tests mostly
 * wait on real time or start processes belongs here once it takes over ~10 s in such a run. The other
 * files keep vitest's own order.
 */
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Measured on 2026-12-05 in a full run with six workers on 2 cores, nearly idle otherwise (the run itself
 * CPU-bound most of the time), after the tests of most long files were made to run side by side: seconds in
 * that run, longest first.
 */
export const SLOW_FILES: readonly string[] = [
  'test/cron-semantics.test.ts', // 29 (measured after its timed tests were set apart again)
  'test/context-window-loop.test.ts', // 25
  'test/claim-ahead-attack.test.ts', // 22
  'test/redis-cluster.test.ts', // 21
  'test/held-ticks-drain.test.ts', // 19
  'test/held-tick-lock-lapse.test.ts', // 19
  'test/embedded-redis.test.ts', // 19
  'test/loop-firing.test.ts', // 18
  'test/gateway-telegram.test.ts', // 18
  'test/worker-crash.test.ts', // 13
  'test/redis-cluster-failover.test.ts', // 11
  'test/reshard.test.ts', // 11
  'test/telegram-outbound.test.ts', // 11
  'test/loop-failure-backoff.test.ts', // 11
  'test/gateway-discord.test.ts', // 10
  'test/cli-ux.test.ts', // 10
];

export default class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (f: TestSpecification): number => {
      const i = SLOW_FILES.findIndex((name) => f.moduleId.endsWith(`/${name}`));
      return i === -1 ? SLOW_FILES.length : i;
    };
    // Array.prototype.sort is stable: the files not listed keep vitest's order after the listed ones.
    return sorted.sort((a, b) => rank(a) - rank(b));
  }
}
