/**
 * Job scheduler field reports F1–F3 (public bug reports, named in the test titles), through
 * the product's schedule store and service.
 */
import { describe, expect, it } from 'vitest';
import { waitFor } from './support/wait-for.ts';
import {
  events,
  openTestClients,
  pendingSchedulerJobs,
  runHermes,
  sleep,
  startWorker,
  waitForEvents,
  type TestClients,
} from './support/stack.ts';
import type { LoopRecord } from '../scheduler/loop/loop-state.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { loopFixture } from './support/record-fixtures.ts';

const cleanups = cleanupAfterEach();

async function storedLoop(c: TestClients, sessionId: string): Promise<LoopRecord> {
  const record = loopFixture({
    loopId: 'fixed-id',
    sessionId,
    intervalSeconds: 1,
    runner: { kind: 'command', command: 'echo tick', timeoutSeconds: 5 },
    now: Date.now(),
  });
  return (await c.loops.put(record, 'absent'))!;
}

/**
 * Exactly one pending job of `schedulerId` while the worker runs. BullMQ adds a scheduler's next job only after
 * the current one has moved to active, so for a moment (longer on a loaded machine) none is pending: sample
 * until `until` (epoch ms), never more than one, and it comes back to exactly one.
 */
async function expectOnePendingJob(c: TestClients, schedulerId: string, until: number): Promise<void> {
  const counts: number[] = [];
  do {
    counts.push((await pendingSchedulerJobs(c, schedulerId)).length);
    await sleep(25);
  } while (Date.now() < until);
  expect(Math.max(...counts)).toBe(1);
  await waitFor(async () => (await pendingSchedulerJobs(c, schedulerId)).length === 1, 5_000, 'one pending job');
}

describe('job scheduler upserts', () => {
  it('F1: upserting the same schedule twice back to back, with a worker running, leaves exactly one pending job; ticks 1 s apart', async () => {
    const { env, c } = openTestClients(cleanups);
    const w = await startWorker(env);
    cleanups.push(() => w.drain());
    const record = await storedLoop(c, 'f1');
    // Due 5 s on, so the first job is released 4 s on (the lead): the three upserts land before a worker can take it
    // even on a loaded machine. An upsert after that would be a wake of the loop, which fires again by design
    // (`firstJobAt`, scheduler/loop/prefetch-lead.ts); beside two other copies of the suite the third one came 322 ms
    // after the first, when a due time 1 s on had its job released 200 ms after arming.
    const now = Date.now();
    await Promise.all([c.loops.arm(record, now + 5000), c.loops.arm(record, now + 5000)]);
    await c.loops.arm(record, now + 5000);
    expect(await pendingSchedulerJobs(c, 'loop:f1')).toHaveLength(1);
    const replies = await waitForEvents(c, 'f1', 'reply', 3, 30_000);
    await expectOnePendingJob(c, 'loop:f1', Date.now() + 1_000);
    const dues = replies.slice(0, 3).map((e) => Number(e.data.dueAt));
    expect(dues[1]! - dues[0]!).toBe(1000);
    expect(dues[2]! - dues[1]!).toBe(1000);
    expect(new Set(replies.map((e) => e.data.occurrenceId)).size).toBe(replies.length);
  });

  it('F2: removing a schedule and adding it again under the same id leaves exactly one pending job, and it fires', async () => {
    const { env, c } = openTestClients(cleanups);
    const record = await storedLoop(c, 'f2');
    await c.loops.arm(record, Date.now() + 500);
    expect(await pendingSchedulerJobs(c, 'loop:f2')).toHaveLength(1);
    await c.loops.removeScheduler('f2', 'loop');
    expect(await pendingSchedulerJobs(c, 'loop:f2')).toHaveLength(0);
    await c.loops.arm(record, Date.now() + 500);
    expect(await pendingSchedulerJobs(c, 'loop:f2')).toHaveLength(1);
    const w = await startWorker(env);
    cleanups.push(() => w.drain());
    await waitForEvents(c, 'f2', 'reply', 1, 5_000);
  });

  it('F3: four processes setting the same loop at once leave exactly one pending job, and it keeps firing at its cadence', async () => {
    const { env, c } = openTestClients(cleanups);
    const args = ['loop', '1s', 'same prompt', '--session', 'f3', '--run', 'echo tick'];
    const results = await Promise.all([1, 2, 3, 4].map(() => runHermes(env, args)));
    for (const r of results) expect(r.code, r.stderr).toBe(0);
    expect(await pendingSchedulerJobs(c, 'loop:f3')).toHaveLength(1);
    const record = await c.loops.get('f3', 'loop');
    const scheduler = await c.queues.ticks.getJobScheduler('loop:f3');
    expect(scheduler?.template?.data?.loopId).toBe(record!.loopId); // record and scheduler agree
    const w = await startWorker(env);
    cleanups.push(() => w.drain());
    const replies = await waitForEvents(c, 'f3', 'reply', 3, 10_000);
    // The first tick was due before the worker started (and may have run late, covering the next
    // occurrence); from the second tick on the cadence is exact.
    expect(Number(replies[2]!.data.dueAt) - Number(replies[1]!.data.dueAt)).toBe(1000);
    await expectOnePendingJob(c, 'loop:f3', Number(replies[2]!.data.dueAt) + 2_000);
    const dues = (await events(c, 'f3', 'reply')).map((e) => Number(e.data.dueAt));
    expect(new Set(dues).size).toBe(dues.length); // each occurrence fired once
    expect((await events(c, 'f3', 'reply')).every((e) => e.data.text === 'tick')).toBe(true);
  }, 120_000); // four hermes processes start at once: seconds of CPU each, far more on a loaded machine

  it('a worker re-arms an active loop whose job scheduler is missing (crash between the two writes)', async () => {
    const { env, c } = openTestClients(cleanups);
    await storedLoop(c, 'orphan');
    expect(await c.queues.ticks.getJobScheduler('loop:orphan')).toBeUndefined();
    const w = await startWorker(env);
    cleanups.push(() => w.drain());
    expect(await c.queues.ticks.getJobScheduler('loop:orphan')).toBeDefined();
    await waitForEvents(c, 'orphan', 'reply', 1, 5_000);
  });
});
