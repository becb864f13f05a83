import { defineConfig } from 'vitest/config';
import SlowFirstSequencer from './test/support/slow-first-sequencer.ts';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-redis.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // The files that take longest start first (test/support/slow-first-sequencer.ts says how they were measured).
    sequence: { sequencer: SlowFirstSequencer },
    // One module graph per worker process instead of one per file: each file's own code runs fresh,
    // the product modules and libraries it imports are loaded once per worker. Half the suite's CPU
    // went to importing them again for every file (`import` 746 s of 610 s wall on a loaded machine,
    // 20 s without isolation; user+sys CPU 238 s → 144 s). Tests keep no state in modules they share:
    // each builds its own environment (test/support/env.ts) and stops what it started.
    isolate: false,
    // Most test time is waiting on real processes, timers and Redis, not CPU: four files at a time
    // take the suite from ~136 s to ~101 s on 2 idle cores (~133 s with a second suite running,
    // 0 failures either way); the tests wait on events, not on time, so they hold under that load.
    // Measured again with isolate: false (106 files): 4 workers 158 s, 8 workers 117 s on a quiet
    // machine; beside a second suite 6 and 8 workers each failed timing-bound tests once (up-banner's
    // "exits at once", cron-fleet's duplicate job, v1-handback's lock loss). Again on 2026-12-05
    // (108 files, 947 tests, nearly idle): 4 workers 171 s, 6 workers 113 s, 8 workers 115 s, 0 failures;
    // but 6 beside a second suite failed turn-slot-pools' backlog split once (one worker of the two took
    // 115 of 200 overdue ticks, against a bound of 110), so 4 stayed until that test held there too.
    // Six now: the four tests that failed beside a second suite wait on what they assert, not on a time a
    // loaded machine passes (turn-slot-pools, up-banner, v1-handback), and cron-fleet's was a product race
    // (an overlap skip claimed ahead of its twin's run), fixed. Measured on 2026-12-05 (110 files, 953
    // tests), `time npx vitest run`, while other work kept the machine busy (no idle figure could be had):
    // 204 s (load 3 → 10; user 234 s, sys 25 s), 0 failures; 251 s (load 7 → 15), one failure since fixed
    // (held-ticks-drain's loops ticked again after 60 s); beside a second copy of the suite 324 s and 326 s
    // (load 24), redis-cluster-failover failed once (a turn on a surviving master ran twice, committed
    // once). Later, with chromium installed and the CLI's short commands compiled for child processes
    // (test/support/global-build.ts), nearly idle (load 2.2–2.4 at the start): 132 s and 129 s (user+sys
    // 218 s and 209 s: the suite is CPU-bound on 2 cores), 952 tests, 0 failures; beside `.ci/run` on a
    // clean clone, 212 s with 0 failures (the clone: 2 failures, both fixed since: fake-clock's time
    // racing past a tool timeout, and the failover bound), then 305 s and 315 s (load 14), 0 failures in both.
    // With `up`, `worker` and `gateway` run from the build too (cli/hermes.mjs): alone 133 s, 117 s, 134 s
    // (user+sys 210 s, 180 s, 213 s), beside `.ci/run` on a clean clone 195 s and 215 s; 0 failures in all.
    // Later on 2026-12-05 (112 files, 962 tests; fewer `hermes` processes in the CLI files, test programs
    // bundled, one browser; a per-file CPU table of the suite is in docs/BENCHMARKS.md, "Test suite"), nearly
    // idle: 127 s and 137 s (user+sys 179 s, 207 s): six files run from start to end, CPU-bound on 2 cores;
    // 8 workers 126 s (user+sys 211 s). Beside `.ci/run` on a clean clone (load ~15): 240 s, the clone 230 s, with
    // three failures between them, all in cluster and fleet tests (a loop on a surviving master without 3
    // ticks in 25 s after a failover, a cron occurrence coalesced after its predecessor's retry, a `/v1` 503;
    // the last fixed in the test). With the final code, `.ci/run` on a clean clone alone: 143 s, 963 passed;
    // a second clean clone's `.ci/run` beside the suite here: 204 s and 203 s, 963 passed in both.
    maxWorkers: 6,
  },
});
