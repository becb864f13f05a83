/**
 * Self-fencing (docs/RELIABILITY.md, "A worker that cannot renew a job's lock stops its turn
 * first"): a worker cut off from Redis in the middle of a turn cannot renew the job's lock; it kills
 * the turn's command before the lock can lapse, so the worker that takes the job over never runs it
 * beside a still-running copy; the occurrence commits once, and nothing changes when the partition heals.
 *
 * The partitioned worker is a `hermes worker` child talking to Redis through a TCP proxy the test
 * black-holes (`support/tcp-proxy.ts`); the worker that takes over runs in this process, straight to
 * Redis. What is compared: the moment the command's process is seen gone (an upper bound) and the
 * moment the lock lapses at the earliest (read from Redis after the cut: its PTTL).
 */
import { describe } from 'vitest';
import { join } from 'node:path';
import { PRODUCT_LOCK, testEnv } from './support/env.ts';
import { clients, events, spawnWorker, startWorker, waitFor, waitForEvents } from './support/stack.ts';
import { startTcpProxy } from './support/tcp-proxy.ts';
import { it } from './support/cleanup.ts';
import { alive, lines, waitForFile } from './support/child-processes.ts';

describe('self-fencing', () => {
  it("a worker partitioned from Redis mid-turn kills its command before the job's lock can lapse; the worker that takes the job over runs it once, and the heal changes nothing", async ({
    cleanups,
    expect,
  }) => {
    // Lock 3 s, renewed every 1 s (the product's defaults); fenced 1 s before the lock surely lapses (room for a
    // loaded machine between the kill and this process seeing it; the default margin is 500 ms).
    const env = testEnv({ ...PRODUCT_LOCK, 'worker.fence_margin_ms': 1000 });
    cleanups.push(() => env.cleanup());
    const proxy = await startTcpProxy(env.redisUrl);
    cleanups.push(() => proxy.close());
    const c = clients(env);
    cleanups.push(() => c.close());
    const a = await spawnWorker(cleanups, env, { REDIS_URL: proxy.url });
    const pids = join(env.home, 'pids');
    const first = join(env.home, 'first-run');
    // The first run hangs (until it is killed); the run that takes over answers at once.
    await c.schedules.set(
      'fenced',
      'loop',
      { prompt: 'deploy', intervalSeconds: 30, times: 1, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: {
          kind: 'command',
          command: `echo $$ >> ${pids}; if [ ! -f ${first} ]; then touch ${first}; ${waitForFile(join(env.home, 'never'))}; fi; echo "deployed $HERMES_TICK"`,
          timeoutSeconds: 60,
        },
      },
    );
    const [started] = await waitForEvents(c, 'fenced', 'tick.started', 1, 30_000);
    expect(started!.data.pid).toBe(a.pid);
    const shell = Number(await waitFor(() => lines(pids)[0], 15_000, 'the command under way'));
    const [job] = await c.queues.ticks.getJobs(['active']);
    const lockKey = `${c.keys.bullPrefix}:ticks:${job!.id}:lock`;

    proxy.cut();
    // No renewal gets through from now on: the lock lapses at `before + pttl` at the earliest.
    const before = Date.now();
    const pttl = await c.redis.pttl(lockKey);
    expect(pttl).toBeGreaterThan(0);
    const lapsesAt = before + pttl;
    const b = await startWorker(env); // straight to Redis: takes the job over once the lock lapsed
    cleanups.push(() => b.drain());
    let killedAt: number | undefined;
    for (const deadline = Date.now() + 10_000; killedAt === undefined && Date.now() < deadline;) {
      if (!alive(shell)) killedAt = Date.now();
      else await new Promise((r) => setTimeout(r, 20));
    }
    expect(killedAt, 'the partitioned worker killed its command').toBeDefined();
    expect(killedAt!).toBeLessThan(lapsesAt);

    // The other worker runs the occurrence once, after the lock lapsed.
    const [reply] = await waitForEvents(c, 'fenced', 'reply', 1, 30_000);
    expect(reply!.data).toMatchObject({ occurrenceId: started!.data.occurrenceId, text: 'deployed 1', pid: process.pid });
    expect(lines(pids)).toHaveLength(2);

    // The partition heals: the fenced worker is back (its heartbeat), and nothing is committed or run again.
    const healedAt = Date.now();
    proxy.heal();
    await waitFor(
      async () => {
        const members = await c.redis.zrange(c.keys.workers, 0, -1, 'WITHSCORES');
        const i = members.findIndex((m) => m.includes(`:${a.pid}:`));
        return i >= 0 && Number(members[i + 1]) > healedAt ? true : undefined;
      },
      20_000,
      'the fenced worker back',
    );
    await waitFor(async () => ((await c.loops.get('fenced', 'loop'))?.status === 'finished' ? true : undefined), 15_000, 'loop finished');
    expect(await events(c, 'fenced', 'reply')).toHaveLength(1);
    expect(await events(c, 'fenced', 'tick.failed')).toEqual([]);
    expect(lines(pids)).toHaveLength(2);
  });
});
