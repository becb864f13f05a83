/**
 * Claim ahead (worker/loop/claim-ahead.ts): a held tick is claimed `worker.claim_lead_ms` before its due
 * time and its turn starts at the due time, never before. The claim is the point the tick is ordered
 * at: a `/stop` after it stops the turn before it reaches the model; a drain before the due time hands
 * the tick back and frees the session's turn lock at once, and the tick runs once, elsewhere.
 * The leads are seconds here so that a loaded machine still acts inside the window.
 */
import { describe } from 'vitest';
import { events, openTestClients, startWorker, waitFor, waitForEvents, type TestClients } from './support/stack.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { enqueueInput } from '../scheduler/session/inbox.ts';
import { formatEvent } from '../cli/event-format.ts';
import type { SessionEvent } from '../scheduler/session/session-store.ts';
import { it, type CleanUp } from './support/cleanup.ts';

const LEADS = { 'worker.prefetch_lead_ms': 6_000, 'worker.claim_lead_ms': 4_000 };
const LOOP = { prompt: 'watch the build', intervalSeconds: 3600, times: null, until: null, notes: [] };

/** Epoch ms of a stream entry (its id's first part): when Redis wrote it. */
const writtenAt = (e: SessionEvent) => Number(e.id.split('-')[0]);

async function setup(cleanups: CleanUp[], overrides: Record<string, unknown> = LEADS) {
  const model = await startFakeOpenAI();
  const calledAt: number[] = [];
  model.respond(() => {
    calledAt.push(Date.now());
    return 'build green';
  });
  cleanups.push(() => model.close());
  const { env, c } = openTestClients(cleanups, { 'agent.base_url': model.baseUrl, 'agent.api_key': 'k', ...overrides });
  const worker = async () => {
    const w = await startWorker(env);
    cleanups.push(() => w.drain());
    return w;
  };
  return { c, calledAt, worker };
}

async function setLoop(c: TestClients, sessionId: string): Promise<{ started: SessionEvent; dueAt: number }> {
  await c.schedules.set(sessionId, 'loop', LOOP, { origin: { surface: 'chat' }, runner: { kind: 'agent' } });
  const [started] = await waitForEvents(c, sessionId, 'tick.started', 1, 15_000);
  return { started: started!, dueAt: Number(started!.data.dueAt) };
}

describe.concurrent('claim ahead of the due time', () => {
  it('claims the tick ahead and starts its turn at the due time, not before', async ({ cleanups, expect }) => {
    const { c, calledAt, worker } = await setup(cleanups);
    await worker();
    const { started, dueAt } = await setLoop(c, 'ahead');
    expect(writtenAt(started)).toBeLessThan(dueAt); // claimed ahead
    expect(Number(started.data.startedAt)).toBe(dueAt); // announced for the due time
    expect(started.data.claimedAhead).toBe(true);
    // `hermes chat` says what happened: claimed, to start at the due time (not "started, late 0 ms").
    expect(formatEvent(started)).toContain('claimed, starts at its due time');
    const [reply] = await waitForEvents(c, 'ahead', 'reply', 1, 15_000);
    expect(reply!.data.text).toBe('build green');
    expect(calledAt).toHaveLength(1);
    expect(calledAt[0]).toBeGreaterThanOrEqual(dueAt); // the model was called at the due time, not at the claim
    expect(Number(reply!.data.startedAt)).toBeGreaterThanOrEqual(dueAt);
  });

  it('claims at the due time with claim_lead_ms 0', async ({ cleanups, expect }) => {
    const { c, worker } = await setup(cleanups, { ...LEADS, 'worker.claim_lead_ms': 0 });
    await worker();
    const { started, dueAt } = await setLoop(c, 'at-due');
    expect(writtenAt(started)).toBeGreaterThanOrEqual(dueAt);
    expect(started.data.claimedAhead).toBeUndefined();
    expect(formatEvent(started)).toMatch(/started \(due .*, late \d+ ms/);
    await waitForEvents(c, 'at-due', 'reply', 1, 15_000);
  });

  it('a /stop after the claim stops the tick as it starts: the model is never called', async ({ cleanups, expect }) => {
    const { c, calledAt, worker } = await setup(cleanups);
    await worker();
    const { dueAt } = await setLoop(c, 'stopped');
    await enqueueInput(
      { redis: c.redis, keys: c.keys, queues: c.queues, maxChars: 10_000 },
      { sessionId: 'stopped', text: '/stop', messageId: 'm1', origin: { surface: 'chat' } },
    );
    await waitFor(async () => (await c.loops.get('stopped', 'loop'))?.status !== 'active', 10_000, 'the loop stopped');
    expect(Date.now()).toBeLessThan(dueAt); // stopped between the claim and the due time
    const [failed] = await waitForEvents(c, 'stopped', 'tick.failed', 1, 15_000);
    expect(failed!.data.error).toBe('Stopped by /stop.');
    expect(calledAt).toEqual([]);
    expect(await events(c, 'stopped', 'reply')).toEqual([]);
  });

  it('a drain before the due time hands the claimed tick back and frees the turn lock; it runs once, on another worker', async ({
    cleanups,
    expect,
  }) => {
    const { c, calledAt, worker } = await setup(cleanups);
    const a = await worker();
    const { dueAt } = await setLoop(c, 'handed-back');
    expect(await c.redis.get(c.keys.turnLock('handed-back'))).not.toBeNull(); // the claim took it
    await a.drain();
    expect(Date.now()).toBeLessThan(dueAt);
    expect(await c.redis.get(c.keys.turnLock('handed-back'))).toBeNull();
    const b = await worker();
    const [reply] = await waitForEvents(c, 'handed-back', 'reply', 1, 20_000);
    expect(reply!.data.worker).toBe(b.deps.workerId);
    expect(Number(reply!.data.startedAt)).toBeGreaterThanOrEqual(dueAt);
    await waitFor(async () => (await c.queues.ticks.getJobCounts('active')).active === 0, 10_000, 'the tick job done');
    expect(await events(c, 'handed-back', 'reply')).toHaveLength(1);
    expect(calledAt).toHaveLength(1);
  });
});
