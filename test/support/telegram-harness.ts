/**
 * The per-test set-up every Telegram test shares: a fresh local Telegram server for each test, clean-ups
 * run last-registered-first after it, and gateways (in-process or as a child process) that are stopped by
 * those clean-ups.
 *
 * Tests that run side by side take `it` from here (each test's own server and clean-ups, as fixtures) and pass
 * their `cleanups` to {@link gateway}, {@link childGateway} and {@link outboundQueue}. Files whose tests run one
 * at a time may call {@link useTelegramHarness} once at the top instead; it registers vitest's `beforeEach` and
 * `afterEach`, so hooks the file registers after it see the server already started.
 */
import { afterEach, beforeEach } from 'vitest';
import type { Logger } from 'pino';
import type { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { startGateway, type Gateway } from '../../gateway/gateway-process.ts';
import { telegramOutboundQueue, type TelegramOutboundData } from '../../scheduler/delivery/outbound.ts';
import { createLogger } from '../../scheduler/logger.ts';
import { Keys } from '../../scheduler/store/keys.ts';
import { spawnGateway, type ChildGateway } from './child-gateway.ts';
import { it as withCleanups, type CleanUp } from './cleanup.ts';
import type { TestEnv } from './env.ts';
import { startFakeTelegram, type FakeTelegram } from './fake-telegram.ts';

/** vitest's `it` with the test's own clean-ups and its own local Telegram server (`fake`), closed after them. */
export const it = withCleanups.extend<{ fake: FakeTelegram }>({
  fake: async ({ cleanups }, use) => {
    const fake = await startFakeTelegram();
    cleanups.push(() => fake.close()); // the first clean-up pushed, so the last run: after the gateways stop
    await use(fake);
  },
});

/** An in-process gateway on `env`, closed by `cleanups`. */
export async function gateway(
  cleanups: CleanUp[],
  env: TestEnv,
  log: Logger = createLogger({ level: env.config.log_level }),
): Promise<Gateway> {
  const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log });
  cleanups.push(() => gw.close());
  return gw;
}

/** A `hermes gateway` child process on `env`, SIGKILLed (and awaited) by `cleanups`. */
export async function childGateway(cleanups: CleanUp[], env: TestEnv): Promise<ChildGateway> {
  const c = await spawnGateway(env.childEnv);
  cleanups.push(async () => {
    c.kill('SIGKILL');
    await c.exited;
  });
  return c;
}

/** The Telegram outbound queue of `env` on a connection of its own, closed by `cleanups`. */
export function outboundQueue(cleanups: CleanUp[], env: TestEnv): Queue<TelegramOutboundData> {
  const connection = new Redis(env.redisUrl, { maxRetriesPerRequest: null });
  const queue = telegramOutboundQueue(new Keys(env.prefix), connection);
  cleanups.push(async () => {
    await queue.close();
    connection.disconnect();
  });
  return queue;
}

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
    gateway: (env, log) => gateway(cleanups, env, log),
    child: (env) => childGateway(cleanups, env),
  };
}
