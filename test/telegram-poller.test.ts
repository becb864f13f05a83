/**
 * The poll loop's own policies (gateway/telegram/poller.ts), with the real
 * grammY client against the local Bot API and a real Redis: a batch whose
 * storage fails stays unconfirmed and is fetched and stored again after the
 * backoff (store before confirm); stop() ends a retry wait at once.
 */
import { Api } from 'grammy';
import type { Update } from 'grammy/types';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { Keys } from '../scheduler/store/keys.ts';
import { PollLease } from '../gateway/telegram/poll-lease.ts';
import { TelegramPoller, pollBackoffMs } from '../gateway/telegram/poller.ts';
import { startFakeTelegram, type FakeTelegram } from './support/fake-telegram.ts';
import { testEnv } from './support/env.ts';
import { sleep, waitFor } from './support/wait-for.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { passUntil } from './support/fake-clock.ts';

const log = pino({ level: 'silent' });
const cleanups = cleanupAfterEach();

async function setup(options: {
  retryInitialMs: number;
  store: (u: Update) => Promise<unknown>;
}): Promise<{ fake: FakeTelegram; poller: TelegramPoller; redis: Redis; offsetKey: string; leaseKey: string }> {
  const env = testEnv();
  cleanups.push(() => env.cleanup());
  const fake = await startFakeTelegram();
  cleanups.push(() => fake.close());
  const redis = new Redis(env.redisUrl);
  cleanups.push(() => void redis.disconnect());
  const keys = new Keys(env.prefix);
  const offsetKey = keys.telegramOffset('1');
  const leaseKey = keys.telegramPollLease('1');
  const lease = new PollLease(redis, leaseKey, 'poller-test', 3000, log);
  const poller = new TelegramPoller({
    api: new Api('1:test', { apiRoot: fake.apiRoot }),
    lease,
    redis,
    offsetKey,
    store: options.store,
    timeoutSeconds: 1,
    retryInitialMs: options.retryInitialMs,
    retryMaxMs: 60_000,
    endpoint: {
      name: 'Telegram',
      url: fake.apiRoot,
      urlSetting: 'TELEGRAM_API_ROOT',
      tokenSetting: 'TELEGRAM_BOT_TOKEN',
      tokenInPath: true,
    },
    onFatal: () => {},
    log,
  });
  cleanups.push(() => poller.stop());
  return { fake, poller, redis, offsetKey, leaseKey };
}

/**
 * Put the poller's waits on a fake clock: `setTimeout` and `Date` (the retry waits, the fake Bot API's
 * long poll and its request times). The lease's renewal (`setInterval`) stays real, like Redis's TTL.
 */
function fakeClock(): void {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  cleanups.push(() => vi.useRealTimers());
}

/** The product's first retry wait (`gateway.poll_retry_initial_seconds`, 1 s). */
const RETRY_INITIAL_MS = 1000;

describe('Telegram poll loop', () => {
  it('the retry wait doubles per failed round up to the maximum', () => {
    expect([1, 2, 3, 4, 5, 6].map((n) => pollBackoffMs(n, 1000, 30_000))).toEqual([1000, 2000, 4000, 8000, 16_000, 30_000]);
    expect(pollBackoffMs(500, 1000, 30_000)).toBe(30_000);
  });

  it('a batch whose storage fails is not confirmed: Telegram delivers it again and it is stored, in order, after the backoff', async () => {
    const stored: number[] = [];
    let failures = 1;
    const { fake, poller, redis, offsetKey } = await setup({
      retryInitialMs: 300,
      store: async (u) => {
        // The second update of the first batch fails once: the first was stored, the batch is not confirmed.
        if (stored.length === 1 && failures > 0) {
          failures--;
          throw new Error('Redis refused the write');
        }
        stored.push(u.update_id);
      },
    });
    const a = fake.pushMessage({ fromId: 1, text: 'one' });
    const b = fake.pushMessage({ fromId: 1, text: 'two' });
    poller.start();
    await waitFor(() => stored.includes(b), 10_000, 'both updates stored');
    // The failed round confirmed nothing: both updates were delivered again.
    expect(fake.deliveries.get(a)).toBe(2);
    expect(fake.deliveries.get(b)).toBe(2);
    // Stored again on the second delivery (the inbox dedupes by update id); never out of order.
    expect(stored).toEqual([a, a, b]);
    await waitFor(async () => Number(await redis.get(offsetKey)) === b + 1, 5_000, 'offset confirmed past the batch');
    await waitFor(() => fake.confirmedOffset === b + 1, 5_000, 'Telegram told at the next getUpdates');
    expect(fake.pending).toEqual([]);
  });

  it('a 429 on getUpdates waits the retry_after Telegram names, not the shorter backoff', async () => {
    const stored: number[] = [];
    const { fake, poller } = await setup({ retryInitialMs: RETRY_INITIAL_MS, store: async (u) => void stored.push(u.update_id) });
    fake.rateLimitPollsNext(1, 30);
    const a = fake.pushMessage({ fromId: 1, text: 'one' });
    fakeClock();
    poller.start();
    await passUntil(() => stored.includes(a), 'stored after the 429');
    expect(fake.rateLimited).toBe(1);
    // The first poll got the 429; the next one came no sooner than retry_after (30 s), not after 1 s.
    expect(fake.pollTimes[1]! - fake.pollTimes[0]!).toBeGreaterThanOrEqual(30_000);
  });

  it('a batch that keeps failing to store waits longer each round (the backoff doubles; a fetch alone does not reset it)', async () => {
    let storeFailures = 3;
    const stored: number[] = [];
    const { fake, poller } = await setup({
      retryInitialMs: RETRY_INITIAL_MS,
      store: async (u) => {
        if (storeFailures > 0) {
          storeFailures--;
          throw new Error('Redis refused the write');
        }
        stored.push(u.update_id);
      },
    });
    const a = fake.pushMessage({ fromId: 1, text: 'one' });
    fakeClock();
    poller.start();
    await passUntil(() => stored.includes(a), 'stored after three failed rounds');
    const gaps = fake.pollTimes.slice(1, 4).map((t, i) => t - fake.pollTimes[i]!);
    expect(gaps[0]).toBeGreaterThanOrEqual(RETRY_INITIAL_MS);
    expect(gaps[1]).toBeGreaterThanOrEqual(2 * RETRY_INITIAL_MS);
    expect(gaps[2]).toBeGreaterThanOrEqual(4 * RETRY_INITIAL_MS);
  });

  it('stop() ends a retry wait at once and releases the lease', async () => {
    let storeCalls = 0;
    const { fake, poller, redis, leaseKey } = await setup({
      retryInitialMs: 60_000,
      store: async () => {
        storeCalls++;
        throw new Error('Redis refused the write');
      },
    });
    fake.pushMessage({ fromId: 1, text: 'one' });
    poller.start();
    await waitFor(() => storeCalls === 1, 10_000, 'batch fetched and its storage failed');
    await sleep(100); // now in the 60 s retry wait
    expect(poller.polling).toBe(true);
    expect(await redis.get(leaseKey)).toBe('poller-test');
    const t0 = Date.now();
    await poller.stop();
    expect(Date.now() - t0).toBeLessThan(10_000); // not the 60 s retry wait
    expect(poller.polling).toBe(false);
    expect(await redis.get(leaseKey)).toBeNull();
    expect(fake.pending).toHaveLength(1);
  });
});
