/**
 * Running turns bounded per pool (docs/OPERATIONS.md, "Held ticks and running turns"): the `agent`
 * and `command` pools of turn slots hold their own limits, and a restarted fleet shares an overdue
 * backlog within those limits.
 *
 * Each test has its own Redis prefix, workers and model, so the two run side by side (most of their time is
 * spent waiting for turns that last a second or more).
 */
import { describe } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { testEnv, type TestEnv } from './support/env.ts';
import { clients, events, startWorker, waitFor, type TestClients } from './support/stack.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { addLoop, addLoops } from './support/armed-loops.ts';
import type { RunnerSpec } from '../scheduler/session/origin.ts';
import { it, type CleanUp } from './support/cleanup.ts';

function env(cleanups: CleanUp[], overrides: Record<string, unknown>): { env: TestEnv; c: TestClients } {
  const e = testEnv(overrides);
  const c = clients(e);
  cleanups.push(
    () => e.cleanup(),
    () => c.close(),
  );
  return { env: e, c };
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

describe.concurrent('running turns, bounded per pool', () => {
  it('the agent and command pools hold their own limits: more agent turns than max_command_turns at once, never more command turns than theirs', async ({
    cleanups,
    expect,
  }) => {
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
    const { env: e, c } = env(cleanups, {
      'agent.base_url': model.baseUrl,
      'agent.api_key': 'k',
      'worker.max_agent_turns': 6,
      'worker.max_command_turns': 2,
    });
    const log = join(e.home, 'commands.log');
    const worker = await startWorker(e);
    cleanups.push(() => worker.drain());
    const due = Date.now() + 2500;
    const command: RunnerSpec = { kind: 'command', command: `echo + >> ${log}; sleep 1; echo - >> ${log}; echo done`, timeoutSeconds: 30 };
    await addLoops(12, (i) => addLoop(c, `pools-${i}`, i < 6 ? { kind: 'agent' } : command, due));
    await waitFor(
      async () => {
        for (let i = 0; i < 12; i++) if ((await events(c, `pools-${i}`, 'reply')).length < 1) return undefined;
        return true;
      },
      30_000,
      'a reply from each of the 12 loops',
    );
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

  it('a restarted fleet of 2 workers splits a backlog of 150 overdue ticks: neither takes more than its share plus one batch', async ({
    cleanups,
    expect,
  }) => {
    const model = await startFakeOpenAI();
    // Turns of a second, 25 at a time per worker: each worker comes back for more three times. Few rounds, because
    // the two workers share this process's event loop: on a loaded machine one of them finishes its round a little
    // sooner now and then, and that lead adds up with every round (ten rounds of ten turns drifted by 15).
    model.respond(() => ({ delayMs: 1000, text: 'ok' }));
    cleanups.push(() => model.close());
    const batch = 25;
    const ticks = 150;
    const { env: e, c } = env(cleanups, { 'agent.base_url': model.baseUrl, 'agent.api_key': 'k', 'worker.max_agent_turns': batch });
    // The fleet is down while the ticks come due.
    const due = Date.now() + 500;
    await addLoops(ticks, (i) => addLoop(c, `backlog-${i}`, { kind: 'agent' }, due));
    await new Promise((r) => setTimeout(r, Math.max(0, due + 1000 - Date.now())));
    const workers = await Promise.all([startWorker(e), startWorker(e)]);
    for (const w of workers) cleanups.push(() => w.drain());
    const ranBy = await waitFor(
      async () => {
        const by = new Map<string, number>();
        for (let i = 0; i < ticks; i++) {
          const replies = await events(c, `backlog-${i}`, 'reply');
          if (replies.length === 0) return undefined;
          expect(replies).toHaveLength(1);
          const w = String(replies[0]!.data.worker);
          by.set(w, (by.get(w) ?? 0) + 1);
        }
        return by;
      },
      60_000,
      'the overdue ticks to run',
    );
    const counts = workers.map((w) => ranBy.get(w.deps.workerId) ?? 0);
    expect(counts[0]! + counts[1]!).toBe(ticks);
    for (const n of counts) expect(n).toBeLessThanOrEqual(ticks / 2 + batch);
    for (const w of workers) expect(w.deps.turns.slots.peak('agent')).toBeLessThanOrEqual(batch);
  });
});
