import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-redis.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Most test time is waiting on real processes, timers and Redis, not CPU: four files at a time
    // take the suite from ~136 s to ~101 s on 2 idle cores (~133 s with a second suite running,
    // 0 failures either way); the tests wait on events, not on time, so they hold under that load.
    maxWorkers: 4,
  },
});
