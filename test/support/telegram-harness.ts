/**
 * The per-test set-up every Telegram test shares: a fresh local Telegram server for each test, clean-ups
 * run last-registered-first after it, and gateways (in-process or as a child process) that are stopped by
 * those clean-ups.
 *
 * Call {@link useTelegramHarness} once at the top of a test file; it registers vitest's `beforeEach` and
 * `afterEach`, so hooks the file registers after it see the server already started.
 */
import { afterEach, beforeEach } from 'vitest';
import type { Logger } from 'pino';
import { startGateway, type Gateway } from '../../gateway/gateway-process.ts';
import { createLogger } from '../../scheduler/logger.ts';
import { spawnGateway, type ChildGateway } from './child-gateway.ts';
import type { TestEnv } from './env.ts';
import { startFakeTelegram, type FakeTelegram } from './fake-telegram.ts';

/** What a Telegram test file works with. */
export interface TelegramHarness {
  /** The running test's local Telegram server. @throws Error outside a test */
  readonly fake: FakeTelegram;
  /** Functions run after the test, last registered first, before the server closes. */
  readonly cleanups: Array<() => unknown>;
  /** An in-process gateway on `env`, closed after the test. */
  readonly gateway: (env: TestEnv, log?: Logger) => Promise<Gateway>;
  /** A `hermes gateway` child process on `env`, SIGKILLed after the test (and awaited). */
  readonly child: (env: TestEnv) => Promise<ChildGateway>;
}

/** Register the per-test Telegram set-up in the calling test file. */
export function useTelegramHarness(): TelegramHarness {
  let fake: FakeTelegram | undefined;
  const cleanups: TelegramHarness['cleanups'] = [];
  beforeEach(async () => {
    fake = await startFakeTelegram();
  });
  afterEach(async () => {
    for (const fn of cleanups.splice(0).reverse()) await fn();
    await fake?.close();
    fake = undefined;
  });
  return {
    get fake() {
      if (!fake) throw new Error('the local Telegram server runs only inside a test');
      return fake;
    },
    cleanups,
    async gateway(env, log = createLogger({ level: env.config.log_level })) {
      const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log });
      cleanups.push(() => gw.close());
      return gw;
    },
    async child(env) {
      const c = await spawnGateway(env.childEnv);
      cleanups.push(async () => {
        c.kill('SIGKILL');
        await c.exited;
      });
      return c;
    },
  };
}
