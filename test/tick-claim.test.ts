/**
 * A tick decides against the record as it is at claim time: a tick that read
 * the loop record, then saw an earlier tick commit before it started its own
 * turn, must not fire on what it read (no repeated tick number, and the
 * coalescing rule applied to the record the earlier tick left).
 *
 * The interleaving is forced, not hoped for: the processors run in this
 * process on real Redis and BullMQ jobs, and the later tick's read of the
 * record is held until the earlier tick has committed.
 */
import { describe, expect, it } from 'vitest';
import type { Job } from 'bullmq';
import { Redis } from 'ioredis';
import { bullJobId, Keys } from '../scheduler/store/keys.ts';
import { enqueueInput } from '../scheduler/session/inbox.ts';
import type { LoopRecord } from '../scheduler/loop/loop-state.ts';
import { TICK_JOB_NAME, type TickJobData } from '../scheduler/loop/tick-job.ts';
import { createLogger } from '../scheduler/logger.ts';
import { NO_SPEND } from '../scheduler/model-spend.ts';
import { BULLMQ_REDIS_OPTIONS } from '../scheduler/store/redis/connect.ts';
import { createWorkerDeps } from '../worker/create-worker-deps.ts';
import { processScheduleTick, type TickResult } from '../worker/loop/tick-processor.ts';
import { RunnerFactory } from '../worker/turn-runners/create-runner.ts';
import type { TurnRequest, TurnRunner } from '../worker/turn-runners/turn-runner.ts';
import type { WorkerDeps } from '../worker/worker-deps.ts';
import { testEnv } from './support/env.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { loopFixture } from './support/record-fixtures.ts';

const cleanups = cleanupAfterEach();

/**
 * A runner that replies `tick $HERMES_TICK` (`kind` as the loop's: command by default); with `holdFirst` the
 * first turn waits for `releaseFirst()`. `journals` has each turn's journal as the runner got it.
 */
function gatedRunner(holdFirst: boolean, kind: TurnRunner['kind'] = 'command') {
  const ticks: string[] = [];
  let releaseFirst!: () => void;
  let firstStarted!: () => void;
  const released = new Promise<void>((r) => (releaseFirst = r));
  const started = new Promise<void>((r) => (firstStarted = r));
  const journals: Array<TurnRequest['journal']> = [];
  const runner: TurnRunner = {
    kind,
    async run(req: TurnRequest) {
      ticks.push(req.env!.HERMES_TICK!);
      journals.push(req.journal);
      if (holdFirst && ticks.length === 1) {
        firstStarted();
        await released;
      }
      return { reply: `tick ${req.env!.HERMES_TICK}`, steps: [] };
    },
  };
  return { ticks, journals, runner, releaseFirst, firstStarted: started };
}

async function setUp(holdFirst = true, options: { shards?: number; sessionId?: string; agent?: boolean } = {}) {
  // An agent loop's turn needs a model to be configured (its context is fitted to the model's window); the runner never calls it.
  const env = testEnv({
    ...(options.shards ? { 'redis.shards': options.shards } : {}),
    ...(options.agent ? { 'agent.base_url': 'http://127.0.0.1:9/v1', 'agent.api_key': 'k' } : {}),
  });
  const redis = new Redis(env.redisUrl, { maxRetriesPerRequest: 3 });
  const queueConn = new Redis(env.redisUrl, BULLMQ_REDIS_OPTIONS);
  const gated = gatedRunner(holdFirst, options.agent ? 'agent' : 'command');
  // The product's runner factory (an agent turn's context is fitted through it), every turn run by `gated.runner`.
  const runners = new (class extends RunnerFactory {
    override forSpec(): TurnRunner {
      return gated.runner;
    }
  })(env.config);
  const deps = createWorkerDeps({ config: env.config, redis, queueConnection: queueConn, log: createLogger({ level: 'silent' }), runners });
  cleanups.push(async () => {
    for (const q of deps.queues.shards()) await q.ticks.obliterate({ force: true });
    await deps.queues.close();
    await deps.outboundTelegram.close();
    redis.disconnect();
    queueConn.disconnect();
    env.cleanup();
  });
  const sessionId = options.sessionId ?? 'stale';
  const stored = await deps.loops.put(
    loopFixture({
      sessionId,
      runner: options.agent ? { kind: 'agent' } : { kind: 'command', command: 'unused', timeoutSeconds: 10 },
      now: Date.now(),
    }),
    'absent',
  );
  return { deps, gated, sessionId, loopId: stored!.loopId };
}

/** A tick job of the loop for the occurrence due at `dueAt` (kept delayed: no BullMQ worker runs it, the test does). */
async function tickJob(deps: WorkerDeps, sessionId: string, loopId: string, dueAt: number): Promise<Job<TickJobData>> {
  const data: TickJobData = { type: 'schedule-tick', kind: 'loop', sessionId, loopId };
  return (await deps.queues
    .forSession(sessionId)
    .ticks.add(TICK_JOB_NAME, data, { jobId: bullJobId('test', sessionId, dueAt), delay: 3_600_000 })) as Job<TickJobData>;
}

/** Make the next gate read (`loops.readGate`: record, goal, pending input) hand back what it read only after `between()` has run. */
function holdNextRead(deps: WorkerDeps, between: () => Promise<unknown>): void {
  const realRead = deps.loops.readGate.bind(deps.loops);
  deps.loops.readGate = async (sessionId, kind) => {
    const read = await realRead(sessionId, kind);
    deps.loops.readGate = realRead;
    await between();
    return read;
  };
}

/** Claim occurrence `occurrenceId` of the session's loop over its record as stored, then let go of the lock and the mark. */
async function claimAlone(deps: WorkerDeps, sessionId: string, occurrenceId: string, readTranscript: boolean) {
  const loop = (await deps.loops.get(sessionId, 'loop'))!;
  const res = await deps.loops.claimTick(sessionId, 'loop', {
    expectedVersion: loop.version,
    goalVersion: null,
    pendingCount: 0,
    ttlMs: 60_000,
    mark: { occurrenceId, jobId: occurrenceId, startedAt: Date.now(), tick: 1, workerId: 'w' },
    lock: { holder: occurrenceId, ttlMs: 60_000 },
    started: { tick: 1, occurrenceId },
    readTranscript,
  });
  await deps.redis.del(deps.keys.turnLock(sessionId), deps.keys.scheduleInflight(sessionId, 'loop'));
  return res;
}

async function replies(deps: WorkerDeps, sessionId: string): Promise<string[]> {
  return (await deps.sessions.transcript(sessionId)).filter((m) => m.role === 'assistant').map((m) => m.content);
}

describe('tick claim against the record at claim time', () => {
  it('a tick that read the record before an earlier tick committed runs with the next tick number, not the same one', async () => {
    const { deps, gated, sessionId, loopId } = await setUp();
    const a = await tickJob(deps, sessionId, loopId, Date.now() - 1000);
    const aDone = processScheduleTick(a, undefined, undefined, deps);
    await gated.firstStarted; // tick A is mid-turn
    const b = await tickJob(deps, sessionId, loopId, Date.now() + 20); // due after A started: not covered by it
    holdNextRead(deps, async () => {
      gated.releaseFirst();
      await aDone; // A commits between B's read and B's claim
    });
    const resultB: TickResult = await processScheduleTick(b, undefined, undefined, deps);

    expect((await aDone).status).toBe('committed');
    expect(resultB.status).toBe('committed');
    expect(gated.ticks).toEqual(['1', '2']);
    expect(await replies(deps, sessionId)).toEqual(['tick 1', 'tick 2']);
    const loop = (await deps.loops.get(sessionId, 'loop')) as LoopRecord;
    expect(loop.ticksUsed).toBe(2);
    expect(await deps.loops.getInflight(sessionId, 'loop')).toBeNull();
  });

  it('a tick due before the earlier tick started is coalesced by it, even when it read the record before that tick committed', async () => {
    const { deps, gated, sessionId, loopId } = await setUp();
    const b = await tickJob(deps, sessionId, loopId, Date.now() - 500);
    const a = await tickJob(deps, sessionId, loopId, Date.now() - 1000);
    let aDone: Promise<TickResult> | undefined;
    holdNextRead(deps, async () => {
      // B has read the record; A (due earlier) now starts after B was due, and commits.
      aDone = processScheduleTick(a, undefined, undefined, deps);
      await gated.firstStarted;
      gated.releaseFirst();
      await aDone;
    });
    const resultB = await processScheduleTick(b, undefined, undefined, deps);

    expect((await aDone!).status).toBe('committed');
    expect(resultB).toEqual({ status: 'skipped', reason: 'coalesced' });
    expect(gated.ticks).toEqual(['1']);
    expect(await replies(deps, sessionId)).toEqual(['tick 1']);
    expect(((await deps.loops.get(sessionId, 'loop')) as LoopRecord).ticksUsed).toBe(1);
  });

  it("user input that arrives between a tick's read and its claim goes first: the tick does not run", async () => {
    const { deps, gated, sessionId, loopId } = await setUp(false);
    const a = await tickJob(deps, sessionId, loopId, Date.now() - 1000);
    holdNextRead(deps, () =>
      enqueueInput(
        { redis: deps.redis, keys: deps.keys, queues: deps.queues, maxChars: 1000 },
        { sessionId, text: 'hello', messageId: 'm1', origin: { surface: 'chat' } },
      ),
    );
    // Deferred: the job is put back (here it is not held by a worker, so moving it is refused).
    await expect(processScheduleTick(a, undefined, undefined, deps)).rejects.toThrow();
    expect(gated.ticks).toEqual([]);
    expect(await deps.loops.getInflight(sessionId, 'loop')).toBeNull();
  });

  it('a later tick waits for an earlier one whose worker died mid-turn, on any shard of the key space', async () => {
    const keys = new Keys('{probe}', { shards: 3 });
    const sessionId = ['s1', 's2', 's3', 's4', 's5'].find((id) => keys.shardOfSession(id) !== 0)!;
    const { deps, gated, loopId } = await setUp(false, { shards: 3, sessionId });
    const a = await tickJob(deps, sessionId, loopId, Date.now() - 2000);
    const b = await tickJob(deps, sessionId, loopId, Date.now() - 1000);
    // A was claimed and started on a worker that then died: its mark stays, its job is still queued.
    const loop = (await deps.loops.get(sessionId, 'loop'))!;
    const { occurrenceId } = deps.loops.occurrenceOf(a);
    expect(
      (
        await deps.loops.claimTick(sessionId, 'loop', {
          expectedVersion: loop.version,
          goalVersion: null,
          pendingCount: 0,
          ttlMs: 60_000,
          mark: { occurrenceId, jobId: a.id!, startedAt: Date.now(), tick: 1, workerId: 'dead' },
          lock: { holder: a.id!, ttlMs: 60_000 },
          started: { tick: 1, occurrenceId },
          readTranscript: true,
        })
      ).status,
    ).toBe('ok');
    // The dead worker's session lock has expired (it outlives no worker by more than its TTL); the mark stays.
    await deps.redis.del(deps.keys.turnLock(sessionId));
    // B is deferred (put back; here no worker holds it, so moving it is refused): it does not overtake A.
    await expect(processScheduleTick(b, undefined, undefined, deps)).rejects.toThrow();
    expect(gated.ticks).toEqual([]);
    expect((await deps.loops.getInflight(sessionId, 'loop'))?.occurrenceId).toBe(occurrenceId);
  });

  it('the claim reads the transcript for an agent turn only: a command turn runs on its new input alone', async () => {
    const { deps, sessionId } = await setUp(false);
    await deps.redis.rpush(deps.keys.transcript(sessionId), JSON.stringify({ role: 'user', content: 'earlier', at: 0, source: 'message' }));
    const claim = (occurrenceId: string, readTranscript: boolean) => claimAlone(deps, sessionId, occurrenceId, readTranscript);
    expect(await claim('o1', false)).toMatchObject({ status: 'ok', transcript: [] });
    expect(await claim('o2', true)).toMatchObject({ status: 'ok', transcript: [{ role: 'user', content: 'earlier' }] });
  });

  it("the claim answers the length of the occurrence's own journal, for an agent turn and a command turn alike", async () => {
    const { deps, sessionId } = await setUp(false);
    await deps.redis.rpush(deps.keys.transcript(sessionId), JSON.stringify({ role: 'user', content: 'earlier', at: 0, source: 'message' }));
    await deps.redis.rpush(deps.keys.turnJournal(sessionId, 'o2'), 'step 1', 'step 2');
    await deps.redis.rpush(deps.keys.turnJournal(sessionId, 'o3'), 'step 1');
    const claim = (occurrenceId: string, readTranscript: boolean) => claimAlone(deps, sessionId, occurrenceId, readTranscript);
    // o1 has no journal; o2's journal is not o1's (nor o3's): each claim counts its own occurrence's entries.
    expect(await claim('o1', true)).toMatchObject({ status: 'ok', journalEntries: 0, transcript: [{ content: 'earlier' }] });
    expect(await claim('o2', true)).toMatchObject({ status: 'ok', journalEntries: 2, transcript: [{ content: 'earlier' }] });
    expect(await claim('o3', false)).toMatchObject({ status: 'ok', journalEntries: 1, transcript: [] });
    expect(await claim('o4', false)).toMatchObject({ status: 'ok', journalEntries: 0, transcript: [] });
  });

  it('an agent tick whose claim found no journal starts its turn without reading one; one that found entries resumes from them', async () => {
    const { deps, gated, sessionId, loopId } = await setUp(false, { agent: true });
    let reads = 0;
    const realRead = deps.journals.read.bind(deps.journals);
    deps.journals.read = async (...args) => {
      reads++;
      return realRead(...args);
    };
    const fresh = await tickJob(deps, sessionId, loopId, Date.now() - 2000);
    expect((await processScheduleTick(fresh, undefined, undefined, deps)).status).toBe('committed');
    expect(reads).toBe(0);
    expect(gated.journals[0]?.replay.answers.size).toBe(0);
    // An earlier run of the next occurrence (due after the first ran: not coalesced by it) recorded a model
    // answer before its worker died.
    const retried = await tickJob(deps, sessionId, loopId, Date.now() + 20);
    const { occurrenceId } = deps.loops.occurrenceOf(retried);
    await deps.journals.append(sessionId, occurrenceId, { type: 'answer', round: 0, content: 'half', toolCalls: [], spend: NO_SPEND });
    expect((await processScheduleTick(retried, undefined, undefined, deps)).status).toBe('committed');
    expect(reads).toBe(1);
    expect(gated.journals[1]?.replay.answers.size).toBe(1);
  });
});
