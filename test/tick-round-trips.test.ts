/**
 * The per-tick path is cheap when many ticks are due together: after the gate
 * read, a tick takes the session lock, claims, marks itself in flight, tells
 * clients it started and reads an agent turn's transcript in one script, and commits and
 * frees the session lock in one more. The lock and claim rules stay those of
 * separate steps: a busy session writes nothing, and the commit frees the lock
 * only while it is still the tick's.
 *
 * The processors run in this process on real Redis and real BullMQ jobs; the
 * product client's commands are recorded by name (scripts by their file).
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DelayedError, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { bullJobId } from '../scheduler/store/keys.ts';
import { TICK_JOB_NAME, type TickJobData } from '../scheduler/loop/tick-job.ts';
import { createLogger } from '../scheduler/logger.ts';
import { BULLMQ_REDIS_OPTIONS } from '../scheduler/store/redis/connect.ts';
import { luaScript } from '../scheduler/store/redis/lua-script.ts';
import { createWorkerDeps } from '../worker/create-worker-deps.ts';
import { processScheduleTick } from '../worker/loop/tick-processor.ts';
import type { RunnerFactory } from '../worker/turn-runners/create-runner.ts';
import type { TurnRunner } from '../worker/turn-runners/turn-runner.ts';
import type { WorkerDeps } from '../worker/worker-deps.ts';
import { testEnv } from './support/env.ts';
import { enqueueInput } from '../scheduler/session/inbox.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { loopFixture } from './support/record-fixtures.ts';

const cleanups = cleanupAfterEach();

/** Script names by the SHA1 ioredis sends them under (EVALSHA). */
const SCRIPT_BY_SHA = new Map(
  [
    'claim-tick-8.lua',
    'commit-turn-7.lua',
    'acquire-owned-1.lua',
    'renew-owned-1.lua',
    'release-owned-1.lua',
    'release-inflight-1.lua',
  ].map((f) => [createHash('sha1').update(luaScript(f).lua).digest('hex'), f.replace(/-\d+\.lua$/, '')]),
);

async function setUp(runner: TurnRunner) {
  const env = testEnv();
  const redis = new Redis(env.redisUrl, { maxRetriesPerRequest: 3 });
  const queueConn = new Redis(env.redisUrl, BULLMQ_REDIS_OPTIONS);
  const runners = { agent: runner, forSpec: () => runner } as unknown as RunnerFactory;
  const deps = createWorkerDeps({ config: env.config, redis, queueConnection: queueConn, log: createLogger({ level: 'silent' }), runners });
  cleanups.push(async () => {
    await deps.queues.ticks.obliterate({ force: true });
    await deps.queues.close();
    await deps.outboundTelegram.close();
    redis.disconnect();
    queueConn.disconnect();
    env.cleanup();
  });
  const sessionId = 'cheap';
  const stored = await deps.loops.put(
    loopFixture({ sessionId, runner: { kind: 'command', command: 'unused', timeoutSeconds: 10 }, now: Date.now() }),
    'absent',
  );
  return { deps, redis, sessionId, loopId: stored!.loopId };
}

const replyRunner: TurnRunner = { kind: 'command', run: async (req) => ({ reply: `tick ${req.env!.HERMES_TICK}`, steps: [] }) };

/** A tick job of the loop due at `dueAt` (kept delayed: no BullMQ worker runs it, the test does). */
async function tickJob(deps: WorkerDeps, sessionId: string, loopId: string, dueAt: number): Promise<Job<TickJobData>> {
  const data: TickJobData = { type: 'schedule-tick', kind: 'loop', sessionId, loopId };
  return (await deps.queues.ticks.add(TICK_JOB_NAME, data, {
    jobId: bullJobId('test', sessionId, dueAt),
    delay: 3_600_000,
  })) as Job<TickJobData>;
}

/** Record the commands `redis` sends while `fn` runs: lower-case names, scripts by file name. */
async function recordCommands(redis: Redis, fn: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  const real = redis.sendCommand.bind(redis);
  redis.sendCommand = (command: { name: string; args: unknown[] }, ...rest: unknown[]) => {
    const name = command.name.toLowerCase();
    seen.push(name === 'evalsha' ? (SCRIPT_BY_SHA.get(String(command.args[0])) ?? 'evalsha') : name);
    return (real as (...a: unknown[]) => unknown)(command, ...rest);
  };
  try {
    await fn();
  } finally {
    redis.sendCommand = real;
  }
  return seen;
}

describe('the tick path in few round trips', () => {
  it('a tick reads the gate, then starts in one script and commits in one more (lock, claim, event, transcript, release inside them)', async () => {
    const { deps, redis, sessionId, loopId } = await setUp(replyRunner);
    // A first tick loads the scripts (EVALSHA misses once per script and server).
    expect((await processScheduleTick(await tickJob(deps, sessionId, loopId, Date.now() - 2000), undefined, undefined, deps)).status).toBe(
      'committed',
    );
    const second = await tickJob(deps, sessionId, loopId, Date.now() + 20);
    let result: unknown;
    const commands = await recordCommands(redis, async () => {
      result = await processScheduleTick(second, undefined, undefined, deps);
    });
    expect(result).toMatchObject({ status: 'committed' });
    // The lock's background renewal may run during a slow turn; it is not part of the path.
    const path = commands.filter((c) => c !== 'renew-owned');
    // Gate: the record and the goal, whether user input is pending (one round trip); then the two scripts.
    expect([...path].sort()).toEqual(['claim-tick', 'commit-turn', 'exists', 'mget']);
    expect(path.slice(2)).toEqual(['claim-tick', 'commit-turn']);
    const events = (await deps.sessions.readEvents(sessionId, '0')).filter((e) => e.data.tick === 2);
    expect(events.map((e) => e.type)).toEqual(['tick.started', 'reply']);
    expect(await deps.lock.holder(sessionId)).toBeNull();
    expect(await deps.loops.getInflight(sessionId, 'loop')).toBeNull();
  });

  it('ticks that wake together share one gate read; a session with pending input among them is read exactly and waits', async () => {
    const { deps, redis, sessionId: warmUp, loopId: warmUpLoop } = await setUp(replyRunner);
    const sessions = Array.from({ length: 12 }, (_, i) => `burst-${i}`);
    const loopIds = new Map<string, string>();
    for (const sessionId of sessions) {
      const stored = await deps.loops.put(
        loopFixture({
          loopId: `L-${sessionId}`,
          sessionId,
          runner: { kind: 'command', command: 'unused', timeoutSeconds: 10 },
          now: Date.now(),
        }),
        'absent',
      );
      loopIds.set(sessionId, stored!.loopId);
    }
    // Load the scripts first (EVALSHA misses once per script and server).
    expect((await processScheduleTick(await tickJob(deps, warmUp, warmUpLoop, Date.now() - 2000), undefined, undefined, deps)).status).toBe(
      'committed',
    );
    const waiting = sessions[5]!;
    await enqueueInput(
      { redis, keys: deps.keys, queues: deps.queues, maxChars: 1000 },
      {
        sessionId: waiting,
        text: 'first, me',
        messageId: 'm1',
        origin: { surface: 'cli' },
      },
    );
    // Due already: all 12 reach their gate in the same turn of the event loop, as ticks released by one timer do.
    const due = Date.now() - 1000;
    const jobs = await Promise.all(sessions.map((s) => tickJob(deps, s, loopIds.get(s)!, due)));
    let deferredTo: number | undefined;
    jobs[5]!.moveToDelayed = async (timestamp: number) => {
      deferredTo = timestamp;
    };
    const results: Array<PromiseSettledResult<unknown>> = [];
    const commands = await recordCommands(redis, async () => {
      results.push(...(await Promise.allSettled(jobs.map((job) => processScheduleTick(job, undefined, undefined, deps)))));
    });
    const path = commands.filter((c) => c !== 'renew-owned');
    // All 12 gates in one MGET and one EXISTS; a session has input, so the group's counts are read (12 ZCARDs).
    expect(path.filter((c) => c === 'mget')).toHaveLength(1);
    expect(path.filter((c) => c === 'exists')).toHaveLength(1);
    expect(path.filter((c) => c === 'zcard')).toHaveLength(12);
    expect(path.filter((c) => c === 'claim-tick')).toHaveLength(11);
    expect(path.filter((c) => c === 'commit-turn')).toHaveLength(11);
    expect(results[5]).toMatchObject({ status: 'rejected', reason: expect.any(DelayedError) });
    expect(deferredTo).toBeGreaterThan(due);
    for (const [i, r] of results.entries()) if (i !== 5) expect(r).toMatchObject({ status: 'fulfilled', value: { status: 'committed' } });
    expect((await deps.loops.get(waiting, 'loop'))!.ticksUsed).toBe(0);
    expect((await deps.loops.get(sessions[6]!, 'loop'))!.ticksUsed).toBe(1);
  });

  it('a tick whose session another job is using writes nothing and is deferred', async () => {
    const { deps, redis, sessionId, loopId } = await setUp(replyRunner);
    await redis.set(deps.keys.turnLock(sessionId), 'another-job', 'PX', 60_000);
    const job = await tickJob(deps, sessionId, loopId, Date.now() - 1000);
    // Not taken by a BullMQ worker here, so record the hand-back instead of moving an active job.
    let deferredTo: number | undefined;
    job.moveToDelayed = async (timestamp: number) => {
      deferredTo = timestamp;
    };
    await expect(processScheduleTick(job, undefined, undefined, deps)).rejects.toBeInstanceOf(DelayedError);
    expect(deferredTo).toBeGreaterThan(Date.now() - 60_000);
    expect(await deps.lock.holder(sessionId)).toBe('another-job');
    expect(await deps.loops.getInflight(sessionId, 'loop')).toBeNull();
    expect(await deps.sessions.readEvents(sessionId, '0')).toEqual([]);
    expect((await deps.loops.get(sessionId, 'loop'))!.ticksUsed).toBe(0);
  });

  it("the commit frees the session lock only while it is still the tick's", async () => {
    let takeOver!: () => Promise<void>;
    const runner: TurnRunner = {
      kind: 'command',
      async run(req) {
        await takeOver();
        return { reply: `tick ${req.env!.HERMES_TICK}`, steps: [] };
      },
    };
    const { deps, redis, sessionId, loopId } = await setUp(runner);
    // Mid-turn the lock passes to another job (as after an expiry); the commit must leave it to that job.
    takeOver = async () => {
      expect(await deps.lock.holder(sessionId)).not.toBeNull();
      await redis.set(deps.keys.turnLock(sessionId), 'another-job', 'PX', 60_000);
    };
    const result = await processScheduleTick(await tickJob(deps, sessionId, loopId, Date.now() - 1000), undefined, undefined, deps);
    expect(result).toMatchObject({ status: 'committed' });
    expect(await deps.lock.holder(sessionId)).toBe('another-job');
  });
});
