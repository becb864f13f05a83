/**
 * `holdWritesThisTurn`: the commands many callers issue in one turn of the event
 * loop leave the client in one write, unchanged (same replies, same order).
 */
import { describe, expect, it } from 'vitest';
import { holdWritesThisTurn, openRedisClient } from '../scheduler/store/redis/connection-factory.ts';
import type { Redis } from 'ioredis';
import { Keys } from '../scheduler/store/keys.ts';
import { TickClaim } from '../scheduler/loop/tick-claim.ts';
import { testEnv } from './support/env.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const cleanups = cleanupAfterEach();

/** Count the socket writes (system calls) of `client` while `fn` runs. */
async function countWrites(client: Redis, fn: () => Promise<unknown>): Promise<number> {
  const socket = client.stream as unknown as { _write: (...a: unknown[]) => void; _writev: (...a: unknown[]) => void };
  const write = socket._write,
    writev = socket._writev;
  let writes = 0;
  socket._write = function (this: unknown, ...a: unknown[]) {
    writes++;
    return write.apply(this, a);
  };
  socket._writev = function (this: unknown, ...a: unknown[]) {
    writes++;
    return writev.apply(this, a);
  };
  try {
    await fn();
  } finally {
    socket._write = write;
    socket._writev = writev;
  }
  return writes;
}

describe('holdWritesThisTurn', () => {
  it('the commands of one turn leave in one write, with the same replies in the same order', async () => {
    const env = testEnv();
    const client = openRedisClient({ kind: 'single', url: env.redisUrl }, 'commands') as Redis;
    cleanups.push(
      () => env.cleanup(),
      () => client.disconnect(),
    );
    await client.ping();
    const key = `${env.prefix}:held`;
    const run = () => Promise.all(Array.from({ length: 20 }, (_, i) => client.rpush(key, String(i))));
    const separate = await countWrites(client, run);
    expect(separate).toBe(20);
    let replies: number[] = [];
    const held = await countWrites(client, async () => {
      holdWritesThisTurn(client);
      replies = await run();
    });
    expect(held).toBe(1);
    expect(replies).toEqual(Array.from({ length: 20 }, (_, i) => 21 + i));
    expect(await client.lrange(key, 20, -1)).toEqual(Array.from({ length: 20 }, (_, i) => String(i)));
    // Writes are held for this turn only.
    expect(await countWrites(client, run)).toBe(20);
  });

  it('claim scripts sent in one turn (an aligned burst whose gates were read ahead) leave in one write', async () => {
    const env = testEnv();
    const client = openRedisClient({ kind: 'single', url: env.redisUrl }, 'commands') as Redis;
    cleanups.push(
      () => env.cleanup(),
      () => client.disconnect(),
    );
    await client.ping();
    const claims = new TickClaim(client, new Keys(env.prefix), env.config.worker.events_max_entries);
    const claimAll = () =>
      Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          claims.claimTick(`burst-${i}`, 'loop', {
            expectedVersion: 1,
            goalVersion: null,
            pendingCount: 0,
            mark: { occurrenceId: `o${i}`, jobId: `j${i}`, startedAt: Date.now(), tick: 1, workerId: 'w' },
            ttlMs: 60_000,
            lock: { holder: `j${i}`, ttlMs: 60_000 },
            started: {},
            readTranscript: true,
          }),
        ),
      );
    await claimAll(); // loads the script, so the counted round sends EVALSHA only
    let answers: { status: string }[] = [];
    const writes = await countWrites(client, async () => {
      answers = await claimAll();
    });
    expect(writes).toBe(1);
    // No record exists: every claim answered for itself, none was lost or mixed up.
    expect(answers.map((a) => a.status)).toEqual(Array.from({ length: 20 }, () => 'changed'));
  });
});
