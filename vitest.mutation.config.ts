/**
 * The tests `npm run test:mutation` (stryker.config.js) runs against each mutant of the rule modules:
 * the files that pin those rules and need no Redis, so a mutant is judged in a fraction of a second.
 */
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: [
      'test/cron-rules.test.ts',
      'test/cron-grammar.test.ts',
      'test/tool-sandbox.test.ts',
      'test/tool-file-race.test.ts',
      'test/compaction.test.ts',
      'test/notify.test.ts',
      'test/silent-reply.test.ts',
      'test/split-message.test.ts',
      'test/transcript-messages.test.ts',
      'test/webhook-policy.test.ts',
      'test/guarded-lookup.test.ts',
      'test/discord-delivery-target.test.ts',
      'test/schedule-policy.test.ts',
      'test/argument-schema.test.ts',
      'test/cron-engine.test.ts',
      'test/file-tools.test.ts',
    ],
    testTimeout: 30_000,
  },
});
