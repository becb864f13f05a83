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
 * Measured on 2026-12-05 in full runs with six workers on 2 cores, nearly idle otherwise: seconds in such a
 * run and the share of a core the file kept busy meanwhile (its worker's CPU and its children's, from
 * `/proc/self/stat`, over its wall time), longest first — except that the first six start together, and
 * those are the three files that mostly wait on real time (a due time, a lapsing lock) next to three that
 * keep the cores busy. Six waiting files at once left the cores half idle for ten seconds at the start.
 */
export const SLOW_FILES: readonly string[] = [
  'test/claim-ahead-attack.test.ts', // 36 s, 0.06 of a core
  'test/held-tick-lock-lapse.test.ts', // 30, 0.07
  'test/cron-semantics.test.ts', // 29, 0.10
  'test/redis-cluster.test.ts', // 21, 0.44
  'test/embedded-redis.test.ts', // 19, 0.56
  'test/console.test.ts', // 19, 0.37
  'test/context-window-loop.test.ts', // 24, 0.28
  'test/loop-firing.test.ts', // 20, 0.13
  'test/held-ticks-drain.test.ts', // 19, 0.26
  'test/cli-ux.test.ts', // 16, 0.40
  'test/scheduler-upsert.test.ts', // 16, 0.23
  'test/up-banner.test.ts', // 14, 0.37
  'test/worker-crash.test.ts', // 14, 0.26
  'test/gateway-telegram.test.ts', // 14, 0.27
  'test/reshard.test.ts', // 13, 0.38
  'test/cron-fleet.test.ts', // 12
  'test/turn-economy.test.ts', // 11
  'test/loop-failure-backoff.test.ts', // 11
  'test/cli-startup.test.ts', // 11
  'test/redis-cluster-failover.test.ts', // 11, 0.50
  'test/gateway-discord.test.ts', // 10
  'test/cron-economy.test.ts', // 10
  'test/telegram-poll-lease.test.ts', // 10
  'test/loop-modes.test.ts', // 9
  'test/telegram-outbound.test.ts', // 8
  'test/redis-sentinel.test.ts', // 8
  'test/command-env.test.ts', // 8
];

/**
 * The unit tier's slowest files (`npm run test:unit`, vitest.unit.config.ts), longest first: each mostly waits,
 * on a fake clock stepped in real milliseconds (model-calls) or on real timers (sleep-until), or imports much
 * (the TypeScript compiler: v1-param-table). Started first, they wait beside the short files instead of after them.
 */
export const SLOW_UNIT_FILES: readonly string[] = [
  'test/model-calls.test.ts',
  'test/sleep-until.test.ts',
  'test/cron-grammar.test.ts',
  'test/config.test.ts',
  'test/v1-param-table.test.ts',
];

/** A sequencer that starts `slowFiles` first, in their order; the other files keep vitest's order after them. */
function slowFirst(slowFiles: readonly string[]): typeof BaseSequencer {
  return class extends BaseSequencer {
    override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
      const sorted = await super.sort(files);
      const rank = (f: TestSpecification): number => {
        const i = slowFiles.findIndex((name) => f.moduleId.endsWith(`/${name}`));
        return i === -1 ? slowFiles.length : i;
      };
      // Array.prototype.sort is stable: the files not listed keep vitest's order after the listed ones.
      return sorted.sort((a, b) => rank(a) - rank(b));
    }
  };
}

/** The whole suite's order (vitest.config.ts). */
const SlowFirstSequencer = slowFirst(SLOW_FILES);
export default SlowFirstSequencer;

/** The unit tier's order (vitest.unit.config.ts). */
export const SlowUnitFirstSequencer = slowFirst(SLOW_UNIT_FILES);
