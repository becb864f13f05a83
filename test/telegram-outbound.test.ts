/**
 * The Telegram outbound path under faults: per-chat order (parts of one reply
 * together, replies in queue order) within one gateway and across gateway
 * crashes; the outcome of every send reported back (session stream), with
 * permanent refusals failed at once and transient failures retried; for cron
 * deliveries into the run record, `cron runs`, `cron status` and `cron doctor`
 * (field report F17).
 */
import type { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe } from 'vitest';
import { Keys } from '../scheduler/store/keys.ts';
import { enqueueTelegramOutbound, outboundJobId, type TelegramOutboundData } from '../scheduler/delivery/outbound.ts';
import { DELIVERY_EVENT } from '../scheduler/delivery/outbound.ts';
import type { ChildGateway } from './support/child-gateway.ts';
import type { CleanUp } from './support/cleanup.ts';
import { childGateway as child, gateway, it, outboundQueue } from './support/telegram-harness.ts';
import { runCronCli } from './support/cron-cli.ts';
import { openCronService, startCronWorker } from './support/cron-worker.ts';
import { PRODUCT_LOCK, type TestEnv } from './support/env.ts';
import type { FakeTelegram } from './support/fake-telegram.ts';
import { telegramEnv } from './support/telegram-env.ts';
import { sleep, waitFor } from './support/wait-for.ts';

// Each test has its own local Telegram server (the `it` of test/support/telegram-harness.ts), Redis prefix and
// gateways, so the tests run side by side: most of their time is spent waiting for a gateway to start, a lock to
// lapse or a retry to come.

function setup(cleanups: CleanUp[], fake: FakeTelegram, overrides: Record<string, unknown> = {}): TestEnv {
  const env = telegramEnv(fake, { ...PRODUCT_LOCK, 'gateway.outbound_order_recheck_ms': 200, ...overrides });
  cleanups.push(() => env.cleanup());
  return env;
}

function producer(queue: Queue<TelegramOutboundData>) {
  return (chatId: string, occurrenceId: string, text: string) =>
    enqueueTelegramOutbound(queue, {
      platform: 'telegram',
      chatId,
      text,
      sessionId: `telegram:${chatId}`,
      occurrenceId,
    } satisfies TelegramOutboundData);
}

/** A reply of three parts whose texts start with `tag` and the part number. */
function threeParts(tag: string): string {
  return [`${tag}1 ${'a'.repeat(4090)}`, `${tag}2 ${'b'.repeat(4090)}`, `${tag}3 end`].join('\n');
}

/** The heads (tag and part number) of the texts `fake` was sent for `chatId`, in order. */
const heads = (fake: FakeTelegram, chatId: string) => fake.sent.filter((m) => m.chat_id === chatId).map((m) => m.text.split(' ')[0]);

describe.concurrent('per-chat order of outbound replies', () => {
  it('a notice queued after a long reply waits for all its parts; another chat is not held up', async ({ cleanups, fake, expect }) => {
    const env = setup(cleanups, fake);
    const send = producer(outboundQueue(cleanups, env));
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    fake.beforeSend = async (payload) => {
      if (String(payload.text).startsWith('R2 ')) await held; // part 2 of the long reply hangs in Telegram
    };
    await gateway(cleanups, env);
    await send('100', 'tick:a:1', threeParts('R'));
    await waitFor(() => heads(fake, '100').includes('R1'), 10_000, 'part 1 sent');
    await send('100', 'notice:a:1', 'N1 Loop finished');
    await send('100', 'tick:a:2', 'N2 next');
    await send('200', 'tick:b:1', 'X1 other chat');
    await waitFor(() => heads(fake, '200').length === 1, 10_000, 'the other chat is sent while chat 100 waits');
    // Chat 100's later replies must not overtake the held part (they wait behind it).
    await sleep(600);
    expect(heads(fake, '100')).toEqual(['R1']);
    release();
    await waitFor(() => heads(fake, '100').length === 5, 10_000, 'all of chat 100');
    expect(heads(fake, '100')).toEqual(['R1', 'R2', 'R3', 'N1', 'N2']);
  });

  it('across a gateway crash mid-reply: the rest of the reply first, then the replies queued after it, each once', async ({
    cleanups,
    fake,
    expect,
  }) => {
    const env = setup(cleanups, fake);
    const send = producer(outboundQueue(cleanups, env));
    fake.beforeSend = async (payload) => {
      if (String(payload.text).startsWith('R2 ')) await new Promise(() => {}); // never answered: the gateway dies meanwhile
    };
    const first = await child(cleanups, env);
    await send('300', 'tick:c:1', threeParts('R'));
    await waitFor(() => fake.sendCalls >= 2, 10_000, 'part 2 in flight');
    for (let i = 1; i <= 4; i++) await send('300', `tick:c:n${i}`, `N${i} later`);
    await sleep(300); // the later replies are taken by the gateway and wait behind the reply in flight
    expect(heads(fake, '300')).toEqual(['R1']);
    first.kill('SIGKILL');
    await first.exited;
    fake.beforeSend = undefined;
    await gateway(cleanups, env);
    await waitFor(() => heads(fake, '300').length >= 7, 30_000, 'every reply after the restart');
    await sleep(300);
    // R2 was sent into a connection that died with the gateway: the fake never answered and never recorded it.
    expect(heads(fake, '300')).toEqual(['R1', 'R2', 'R3', 'N1', 'N2', 'N3', 'N4']);
  });
});

describe.concurrent('at least once per part', () => {
  it('a part Telegram accepted just before the gateway died is sent again after the restart: twice, never lost, still in order', async ({
    cleanups,
    fake,
    expect,
  }) => {
    const env = setup(cleanups, fake);
    const send = producer(outboundQueue(cleanups, env));
    let victim: ChildGateway | undefined;
    fake.afterAccept = async (_message, n) => {
      if (n !== 1 || !victim) return;
      victim.kill('SIGKILL'); // Telegram took part 1; the gateway dies before it reads the answer
      await victim.exited;
    };
    victim = await child(cleanups, env);
    await send('400', 'tick:w:1', threeParts('R'));
    await victim.exited;
    fake.afterAccept = undefined;
    await gateway(cleanups, env);
    await waitFor(() => heads(fake, '400').length >= 4, 30_000, 'the reply after the restart');
    await sleep(300);
    expect(heads(fake, '400')).toEqual(['R1', 'R1', 'R2', 'R3']);
    const redis = new Redis(env.redisUrl);
    cleanups.push(() => redis.disconnect());
    const recorded = await redis.hgetall(new Keys(env.prefix).outboundSent('tick:w:1'));
    expect([0, 1, 2].map((i) => recorded[String(i)])).toEqual(fake.sent.slice(1).map((m) => String(m.message_id)));
  });
});

describe.concurrent('one sender per reply', () => {
  it('a send whose job lock was lost stops, and the reply is finished by the copy that took it over: each part once', async ({
    cleanups,
    fake,
    expect,
  }) => {
    const env = setup(cleanups, fake);
    const send = producer(outboundQueue(cleanups, env));
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let r2Calls = 0;
    fake.beforeSend = async (payload) => {
      if (String(payload.text).startsWith('R2 ') && ++r2Calls === 1) await held; // the first copy's part 2 hangs
    };
    await gateway(cleanups, env);
    await send('500', 'tick:l:1', threeParts('R'));
    await waitFor(() => r2Calls === 1, 10_000, 'part 2 in flight');
    // The job's lock disappears (as when this process stalls longer than the lock): its renewal fails.
    const redis = new Redis(env.redisUrl);
    cleanups.push(() => redis.disconnect());
    await redis.del(`${env.prefix}:outbound-telegram:${outboundJobId('tick:l:1')}:lock`);
    await waitFor(() => heads(fake, '500').length >= 3, 20_000, 'the reply finished by the copy that took the job over');
    release(); // the first copy's request is answered only now: it must have been stopped
    await sleep(500);
    expect(heads(fake, '500')).toEqual(['R1', 'R2', 'R3']);
  });
});

describe.concurrent('outcome of every send, reported back', () => {
  it("403 blocked: one attempt, reported failed and not retried; the chat's next reply still goes", async ({ cleanups, fake, expect }) => {
    const env = setup(cleanups, fake);
    const queue = outboundQueue(cleanups, env);
    const send = producer(queue);
    fake.refuseChat('222', 403, 'Forbidden: bot was blocked by the user');
    await gateway(cleanups, env);
    await send('222', 'tick:d:1', 'to a chat that blocked the bot');
    const redis = new Redis(env.redisUrl);
    cleanups.push(() => redis.disconnect());
    const stream = new Keys(env.prefix).events('telegram:222');
    const events = await waitFor(
      async () => {
        const all = await redis.xrange(stream, '-', '+');
        return all.length > 0 ? all : null;
      },
      10_000,
      'delivery event',
    );
    const [, fields] = events[0]!;
    expect(fields[1]).toBe(DELIVERY_EVENT);
    expect(JSON.parse(fields[3]!)).toMatchObject({
      status: 'failed',
      occurrenceId: 'tick:d:1',
      errorCode: 403,
      willRetry: false,
      attempts: 1,
      error: expect.stringContaining('bot was blocked by the user'),
    });
    // The job ended failed, a final state: BullMQ schedules no further attempt.
    const jobId = outboundJobId('tick:d:1');
    await waitFor(async () => (await queue.getJobState(jobId)) === 'failed', 5000, 'the send job failed');
    expect((await queue.getJob(jobId))!.attemptsMade).toBe(1);
    expect(fake.refusedSends.get('222')).toBe(1);
    // The failed reply holds nothing up: the chat's next reply is sent to Telegram (and refused again).
    await send('222', 'tick:d:2', 'the next reply');
    await waitFor(() => fake.refusedSends.get('222') === 2, 10_000, 'the next reply attempted');
  });

  it('a transient failure (502) is reported with willRetry and retried with backoff, then reported sent with the message id', async ({
    cleanups,
    fake,
    expect,
  }) => {
    const env = setup(cleanups, fake);
    const send = producer(outboundQueue(cleanups, env));
    fake.failNextSends(1, 502, 'Bad Gateway');
    await gateway(cleanups, env);
    await send('333', 'tick:e:1', 'after a hiccup');
    await waitFor(() => fake.sent.length === 1, 15_000, 'sent on the retry');
    const redis = new Redis(env.redisUrl);
    cleanups.push(() => redis.disconnect());
    const stream = new Keys(env.prefix).events('telegram:333');
    const outcomes = await waitFor(
      async () => {
        const all = (await redis.xrange(stream, '-', '+')).map(([, f]) => JSON.parse(f[3]!));
        return all.length === 2 ? all : null;
      },
      10_000,
      'two delivery events',
    );
    expect(outcomes[0]).toMatchObject({ status: 'failed', errorCode: 502, willRetry: true, attempts: 1 });
    expect(outcomes[1]).toEqual(expect.objectContaining({ status: 'sent', messageIds: [fake.sent[0]!.message_id], attempts: 2 }));
  });
});

describe.concurrent('F17: cron deliveries that fail are recorded', () => {
  it('a chat that blocked the bot (403): one attempt, the run says failed with the reason; status and doctor show it; the other chat is sent', async ({
    cleanups,
    fake,
    expect,
  }) => {
    const env = setup(cleanups, fake, { 'cron.min_interval_seconds': 1 });
    fake.refuseChat('222', 403, 'Forbidden: bot was blocked by the user');
    await gateway(cleanups, env);
    const worker = await startCronWorker(env.config);
    cleanups.push(() => worker.close());
    const api = openCronService(env.config);
    cleanups.push(() => api.close());
    const cli = (...args: string[]) => runCronCli(env.config, args);
    expect(
      (await cli('add', 'every 1h', '--script', 'echo digest of the day', '--name', 'digest', '--deliver', 'telegram:222,telegram:333'))
        .code,
    ).toBe(0);
    const job = await api.service.get('digest');
    expect((await cli('run', 'digest')).code).toBe(0);
    const run = await waitFor(
      async () => {
        const [r] = await api.store.runs(job.id, 1);
        return r && r.deliveries.every((d) => d.status === 'sent' || d.status === 'failed') ? r : null;
      },
      15_000,
      'both deliveries reported',
    );
    expect(run.deliveries).toEqual([
      expect.objectContaining({
        target: 'telegram:222',
        status: 'failed',
        will_retry: false,
        attempts: 1,
        error: 'Telegram refused the reply (403 Forbidden: bot was blocked by the user).',
      }),
      expect.objectContaining({ target: 'telegram:333', status: 'sent', message_ids: [fake.sent[0]!.message_id], attempts: 1 }),
    ]);
    expect(fake.sent.map((m) => [m.chat_id, m.text])).toEqual([['333', 'digest of the day']]);
    await sleep(1500); // a retry of the refused send (backoff 1 s) would have come by now
    expect(fake.refusedSends.get('222')).toBe(1);

    const runs = await cli('runs', 'digest');
    expect(runs.stdout.split('\n')[1]).toMatch(/digest +manual +ok .* failed,sent +digest of the day$/);
    const status = await cli('status');
    expect(status.stdout).toMatch(/deliveries {5}1 failed, 1 sent \(recent runs\)/);
    expect(status.stdout).toContain(
      `failed deliveries\n  ${job.id}  digest  telegram:222: Telegram refused the reply (403 Forbidden: bot was blocked by the user).`,
    );
    const doctor = await cli('doctor');
    expect(doctor.code).toBe(1);
    expect(doctor.stdout).toContain(
      `${job.id}: last delivery to telegram:222 failed (not retried): Telegram refused the reply (403 Forbidden: bot was blocked by the user).`,
    );
  });
});
