/**
 * Held ticks and running turns, bounded separately (docs/OPERATIONS.md, "Held ticks and running
 * turns"): the `agent` and `command` pools of turn slots hold their own limits; a held tick whose
 * lock lapsed while its worker was starved (event loop blocked longer than the lock) is not fired
 * twice; a drain hands its held ticks back at once; a restarted fleet shares an overdue backlog.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { testEnv, type TestEnv } from './support/env.ts';
import { clients, events, spawnWorker, startWorker, waitFor, type TestClients } from './support/stack.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { createLoop, type RunnerSpec } from '../scheduler/loop/loop-state.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const cleanups = cleanupAfterEach();

/** Store and arm a loop every `intervalSeconds`, its first tick due at `firstDueAt`. */
async function addLoop(c: TestClients, sessionId: string, runner: RunnerSpec, firstDueAt: number, intervalSeconds = 60): Promise<void> {
  const record = createLoop({
    kind: 'loop', loopId: `l-${sessionId}`, sessionId, prompt: 'check', intervalSeconds, times: null, until: null,
    maxTicks: 0, selfPacedFloorSeconds: 60, runner, origin: { surface: 'cli' }, now: Date.now(),
  });
  const stored = await c.loops.put(record, 'any');
  await c.loops.arm(stored!, firstDueAt);
}

/** Add `n` loops, 32 at a time. */
async function addLoops(c: TestClients, n: number, add: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: 32 }, async () => {
    while (next < n) await add(next++);
  }));
}

/** Most lines `+` not yet matched by a `-` at any point of the log (processes running at once). */
function mostAtOnce(log: string): number {
  let now = 0;
  let most = 0;
  for (const line of log.split('\n')) {
    if (line === '+') most = Math.max(most, ++now);
    if (line === '-') now--;
  }
  return most;
}

function env(overrides: Record<string, unknown>): { env: TestEnv; c: TestClients } {
  const e = testEnv(overrides);
  const c = clients(e);
  cleanups.push(() => e.cleanup(), () => c.close());
  return { env: e, c };
}

describe('held ticks and running turns, bounded separately', () => {
  it('the agent and command pools hold their own limits: more agent turns than max_command_turns at once, never more command turns than theirs', async () => {
    const model = await startFakeOpenAI();
    let calls = 0;
    let mostCalls = 0;
    model.respond(async () => {
      mostCalls = Math.max(mostCalls, ++calls);
      await new Promise((r) => setTimeout(r, 1500));
      calls--;
      return 'checked';
    });
    cleanups.push(() => model.close());
    const { env: e, c } = env({
      'agent.base_url': model.baseUrl, 'agent.api_key': 'k', 'worker.max_agent_turns': 6, 'worker.max_command_turns': 2,
    });
    const log = join(e.home, 'commands.log');
    const worker = await startWorker(e);
    cleanups.push(() => worker.drain());
    const due = Date.now() + 2500;
    const command: RunnerSpec = { kind: 'command', command: `echo + >> ${log}; sleep 1; echo - >> ${log}; echo done`, timeoutSeconds: 30 };
    await addLoops(c, 12, (i) => addLoop(c, `pools-${i}`, i < 6 ? { kind: 'agent' } : command, due));
    await waitFor(async () => {
      for (let i = 0; i < 12; i++) if ((await events(c, `pools-${i}`, 'reply')).length < 1) return undefined;
      return true;
    }, 30_000, 'a reply from each of the 12 loops');
    const { slots } = worker.deps.turns;
    // Six agent turns ran together (> max_command_turns), the six commands two at a time.
    expect(mostCalls).toBeGreaterThan(2);
    expect(mostCalls).toBeLessThanOrEqual(6);
    expect(slots.peak('agent')).toBeGreaterThan(2);
    expect(slots.peak('agent')).toBeLessThanOrEqual(6);
    expect(mostAtOnce(readFileSync(log, 'utf8'))).toBe(2);
    expect(slots.peak('command')).toBe(2);
    for (let i = 6; i < 12; i++) expect((await events(c, `pools-${i}`, 'reply'))[0]!.data.text).toBe('done');
  });

  it('a held tick whose worker is starved longer than its lock (event loop blocked) is not fired twice', async () => {
    // The first worker holds one tick at most: once it holds this one it has no fetch waiting on the queue, so
    // when the tick goes back to the queue the other worker is the one woken for it.
    const { env: e, c } = env({
      'worker.prefetch_lead_ms': 40_000, 'worker.lock_duration_ms': 1000, 'worker.lock_renew_ms': 400, 'worker.stalled_interval_ms': 500,
      'worker.max_held_ticks': 1,
    });
    const starved = await startWorker(e);
    cleanups.push(() => starved.drain());
    // Due in 42 s: released at once and held by the only worker there is.
    const due = Date.now() + 42_000;
    await addLoop(c, 'starved', { kind: 'command', command: 'sleep 1; echo once', timeoutSeconds: 30 }, due);
    await waitFor(() => (starved.deps.turns.admission.held === 1 ? true : undefined), 15_000, 'the tick held by the first worker');
    const other = await spawnWorker(e, { HERMES_WORKER_MAX_HELD_TICKS: '4096' });
    cleanups.push(() => { if (other.exitCode === null) other.kill('SIGKILL'); });
    // Starve the first worker: no lock renewal for 3.5 s, so its lock lapses, the stall check puts the job back
    // and the other worker takes it (and holds it until it is due).
    const until = Date.now() + 3500;
    while (Date.now() < until);
    // The copy the starved worker held never starts a turn: it lets the tick go as soon as it runs again.
    await waitFor(() => (starved.deps.turns.admission.held === 0 ? true : undefined), 10_000, 'the starved worker to let the tick go');
    await waitFor(async () => ((await events(c, 'starved', 'reply')).length > 0 ? true : undefined), due - Date.now() + 20_000, 'the tick to run');
    await new Promise((r) => setTimeout(r, 2000)); // a second copy's turn (1 s) would have committed by now
    expect(await events(c, 'starved', 'tick.started')).toHaveLength(1);
    const replies = await events(c, 'starved', 'reply');
    expect(replies).toHaveLength(1);
    expect(replies[0]!.data).toMatchObject({ text: 'once', pid: other.pid });
  }, 120_000);

  it('a drain with 500 held ticks hands them back within a second, and another worker runs each once', async () => {
    const model = await startFakeOpenAI();
    cleanups.push(() => model.close());
    const { env: e, c } = env({ 'agent.base_url': model.baseUrl, 'agent.api_key': 'k', 'worker.prefetch_lead_ms': 20_000 });
    const first = await startWorker(e);
    cleanups.push(() => first.drain());
    // Released 20 s before they are due, 5 s from now (every loop is in place by then), and held until due.
    const due = Date.now() + 25_000;
    await addLoops(c, 500, (i) => addLoop(c, `held-${i}`, { kind: 'agent' }, due));
    await waitFor(() => (first.deps.turns.admission.held === 500 ? true : undefined), 20_000, '500 held ticks');
    expect(await c.queues.ticks.getActiveCount()).toBe(500);
    const drainedAt = Date.now();
    const drained = first.drain();
    await waitFor(async () => ((await c.queues.ticks.getActiveCount()) === 0 ? true : undefined), 5_000, 'every held tick handed back');
    const handBackMs = Date.now() - drainedAt;
    await drained;
    expect(handBackMs).toBeLessThan(1000);
    expect(first.deps.turns.admission.held).toBe(0);
    const second = await startWorker(e);
    cleanups.push(() => second.drain());
    await waitFor(async () => {
      for (let i = 0; i < 500; i += 1) if ((await events(c, `held-${i}`, 'reply')).length < 1) return undefined;
      return true;
    // How fast 500 turns run is not what this pins (a loaded machine takes longer): that each runs, once.
    }, due - Date.now() + 120_000, 'every handed-back tick to run');
    for (let i = 0; i < 500; i++) expect(await events(c, `held-${i}`, 'reply')).toHaveLength(1);
    for (let i = 0; i < 500; i += 50) {
      const started = await events(c, `held-${i}`, 'tick.started');
      expect(new Set(started.map((s) => s.data.occurrenceId)).size).toBe(1);
      expect(Number(started[0]!.data.startedAt)).toBeGreaterThanOrEqual(due);
    }
  }, 240_000);

  it('a restarted fleet of 2 workers splits a backlog of 200 overdue ticks: neither takes more than its share plus one batch', async () => {
    const model = await startFakeOpenAI();
    // Turns of a second: ten at a time per worker, so the two workers' start a few hundred ms apart moves little.
    model.respond(() => ({ delayMs: 1000, text: 'ok' }));
    cleanups.push(() => model.close());
    const batch = 10;
    const { env: e, c } = env({ 'agent.base_url': model.baseUrl, 'agent.api_key': 'k', 'worker.max_agent_turns': batch });
    // The fleet is down while 200 ticks come due.
    const due = Date.now() + 500;
    await addLoops(c, 200, (i) => addLoop(c, `backlog-${i}`, { kind: 'agent' }, due));
    await new Promise((r) => setTimeout(r, Math.max(0, due + 1000 - Date.now())));
    const workers = await Promise.all([startWorker(e), startWorker(e)]);
    for (const w of workers) cleanups.push(() => w.drain());
    const ranBy = await waitFor(async () => {
      const by = new Map<string, number>();
      for (let i = 0; i < 200; i++) {
        const replies = await events(c, `backlog-${i}`, 'reply');
        if (replies.length === 0) return undefined;
        expect(replies).toHaveLength(1);
        const w = String(replies[0]!.data.worker);
        by.set(w, (by.get(w) ?? 0) + 1);
      }
      return by;
    }, 60_000, 'the 200 overdue ticks to run');
    const counts = workers.map((w) => ranBy.get(w.deps.workerId) ?? 0);
    expect(counts[0]! + counts[1]!).toBe(200);
    for (const n of counts) expect(n).toBeLessThanOrEqual(100 + batch);
    for (const w of workers) expect(w.deps.turns.slots.peak('agent')).toBeLessThanOrEqual(batch);
  });
});
