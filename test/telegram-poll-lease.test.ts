/**
 * The one-poller-per-bot-token lease across crashes (docs/DESIGN.md §8): a gateway
 * restarted after a SIGKILL polls again within 5 s of its start (from its start
 * resolving, as a process prints READY, to the getUpdates that serves the waiting
 * message), with the lease at its default length, while two live gateways still
 * never poll at once. The gateway that crashes is a process; its successor runs
 * in-process.
 */
import { Redis } from 'ioredis';
import { beforeEach, describe, expect, it } from 'vitest';
import { botIdOf } from '../gateway/telegram/telegram-adapter.ts';
import { configSchema } from '../scheduler/config/config.ts';
import { Keys } from '../scheduler/store/keys.ts';
import type { FakeTelegram } from './support/fake-telegram.ts';
import { useTelegramHarness } from './support/telegram-harness.ts';
import { ALLOWED_USER, BOT_TOKEN, readInbox, telegramEnv } from './support/telegram-env.ts';
import { waitFor } from './support/wait-for.ts';

const harness = useTelegramHarness();
const { cleanups, child, gateway } = harness;
let fake: FakeTelegram;
beforeEach(() => {
  fake = harness.fake;
});

describe('poll lease after a crash', () => {
  it('a gateway restarted after SIGKILL polls again within 5 s of its start (default lease)', async () => {
    const defaultTtl = configSchema().parse({}).gateway.poll_lease_ttl_seconds;
    const env = telegramEnv(fake, { 'gateway.poll_lease_ttl_seconds': defaultTtl, 'gateway.poll_timeout_seconds': 25 });
    cleanups.push(() => env.cleanup());
    const reader = await readInbox(env);
    cleanups.push(() => reader.close());
    const redis = new Redis(env.redisUrl);
    cleanups.push(() => redis.disconnect());
    const leaseKey = new Keys(env.prefix).telegramPollLease(botIdOf(BOT_TOKEN));

    const first = await child(env);
    await waitFor(async () => (await redis.get(leaseKey)) === first.instanceId && fake.polling, 15_000, 'first gateway polls');
    fake.pushMessage({ fromId: ALLOWED_USER, text: 'before the crash' });
    await waitFor(() => reader.seen.length === 1, 10_000, 'first message');
    // Kill it right after a renewal, so its lease has (almost) its whole time to live left. A renewal
    // is the time to live going up between two samples (the gateway also renews when it polls again
    // after a batch, so the first sample may already be a fresh, full one).
    let last = await redis.pttl(leaseKey);
    await waitFor(
      async () => {
        const pttl = await redis.pttl(leaseKey);
        const renewed = pttl > last;
        last = pttl;
        return renewed;
      },
      10_000,
      'a lease renewal',
    );
    first.kill('SIGKILL');
    await first.exited;

    // The promise is measured from the restarted gateway's start to the moment the fake Telegram
    // answers its getUpdates with the waiting message: the poll itself, not the inbox reader's latency.
    let servedAt = 0;
    const pushed = fake.pushMessage({ fromId: ALLOWED_USER, text: 'after the restart' });
    fake.onUpdatesServed = (updates) => {
      if (servedAt === 0 && updates.some((u) => u.update_id === pushed)) servedAt = Date.now();
    };
    const second = await gateway(env);
    const readyAt = Date.now();
    await waitFor(() => reader.seen.length === 2, 10_000, 'message after the restart');
    expect(servedAt).toBeGreaterThan(0);
    expect(servedAt - readyAt).toBeLessThanOrEqual(5_000);
    expect(await redis.get(leaseKey)).toBe(second.instanceId);
    expect(reader.seen.map((d) => d.text)).toEqual(['before the crash', 'after the restart']);
  });
});
