import { defineConfig } from 'vitest/config';
import SlowFirstSequencer from './test/support/slow-first-sequencer.ts';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-redis.ts'],
    // Each file holds one of the machine's test slots while it runs, so copies of the suite side by side share
    // the cores instead of overloading them (test/support/machine-slots.ts).
    setupFiles: ['test/support/slot-setup.ts'],
    testTimeout: 120_000,
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
    // Six files at a time. The suite is CPU-bound on the 2-core machine it is measured on, and each worker
    // loads the product once: seven workers took 108.6 s and 200 CPU-s against 103.9 s and 181 CPU-s with six,
    // and beside a second copy of the suite more workers made tests that bound a wait fail. How each count was
    // measured, and where the suite's CPU goes: docs/BENCHMARKS.md, "Test suite".
    maxWorkers: 6,
  },
});
