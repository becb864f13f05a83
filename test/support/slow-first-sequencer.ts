/**
 * The order test files start in (`sequence.sequencer` in vitest.config.ts): the files that take longest
 * start first, so none of them starts last and decides the suite's end on its own.
 *
 * vitest orders files by the durations of its last run, which a clean checkout does not have (it then
 * starts the largest files first, and a short file that waits 45 s on a due time can start last).
 * The list below is the files that took longest in a full run (`npx vitest run --reporter=json
 * --outputFile=report.json`, each file's `endTime - startTime`), longest first; a file whose tests mostly
 * wait on real time belongs here once it takes over ~12 s. The other files keep vitest's own order.
 */
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** Measured on 2026-12-05 with 4 workers on 2 idle cores (seconds in the full run). */
export const SLOW_FILES: readonly string[] = [
  'test/held-tick-lock-lapse.test.ts', // 45
  'test/embedded-redis.test.ts', // 39
  'test/cron-semantics.test.ts', // 34
  'test/worker-crash.test.ts', // 29
  'test/held-ticks-drain.test.ts', // 27
  'test/gateway-telegram.test.ts', // 22
  'test/turn-slot-pools.test.ts', // 20
  'test/telegram-outbound.test.ts', // 18
  'test/loop-firing.test.ts', // 17
  'test/cli-ux.test.ts', // 16
  'test/redis-cluster.test.ts', // 16
  'test/gateway-discord.test.ts', // 15
  'test/context-window-loop.test.ts', // 14
  'test/gateway-slack.test.ts', // 14
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
