// @ts-check
/**
 * `npm run test:mutation`: StrykerJS mutates the rule modules below one change at a time and runs the
 * tests of vitest.mutation.config.ts against each mutant (only those that cover it). On demand, not in CI.
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts', related: false },
  coverageAnalysis: 'perTest',
  concurrency: 2,
  // The rule modules (TypeScript only: the Lua scripts of the claim and the commit run inside Redis,
  // out of Stryker's reach).
  mutate: [
    'scheduler/cron/cron-engine.ts',
    'scheduler/cron/misfire.ts',
    'scheduler/cron/repeat-strategy.ts',
    'worker/tools/file-tools.ts',
    'scheduler/tools/tool-reach.ts',
    'worker/tools/http-tool-policy.ts',
    'worker/runtime/guarded-lookup.ts',
    'scheduler/delivery/webhook-policy.ts',
    'worker/tools/argument-schema.ts',
    'worker/context/transcript-messages.ts',
    'worker/context/compaction.ts',
    'scheduler/economy/notify.ts',
    'scheduler/economy/silent-reply.ts',
    'gateway/telegram/split-message.ts',
    'scheduler/schedule-policy/schedule-policy.ts',
  ],
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
