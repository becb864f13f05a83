/**
 * /heartbeat and /goal (issue: the full /loop, /heartbeat and /goal), with
 * field reports F5 and F6, and the priority of user input over goal turns
 * and ticks.
 */
import { writeFileSync } from 'node:fs';
import { describe, expect } from 'vitest';
import type { TestEnv } from './support/env.ts';
import {
  events,
  openTestClients,
  sleep,
  startWorker,
  waitFor,
  waitForEvents,
  waitWhileAdvancing,
  type TestClients,
} from './support/stack.ts';
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest, type ScriptedReply } from './support/fake-openai.ts';
import { enqueueInput } from '../scheduler/session/inbox.ts';
import { parseHeartbeatArgs } from '../scheduler/loop/heartbeat-command.ts';
import type { WorkerProcess } from '../worker/worker-process.ts';
import { it, type CleanUp } from './support/cleanup.ts';

const isJudge = (req: RecordedRequest) => req.messages[0]?.role === 'system' && req.messages[0].content.startsWith('You judge');

async function setup(
  cleanups: CleanUp[],
  overrides: Record<string, unknown>,
  answer: { turn: (req: RecordedRequest, n: number) => ScriptedReply; judge?: (n: number) => ScriptedReply },
): Promise<{ env: TestEnv; c: TestClients; model: FakeOpenAI }> {
  const model = await startFakeOpenAI();
  let turns = 0;
  let judges = 0;
  model.respond((req) =>
    isJudge(req) ? (answer.judge ?? (() => '{"verdict":"continue","reason":""}'))(++judges) : answer.turn(req, ++turns),
  );
  cleanups.push(() => model.close());
  const { env, c } = openTestClients(cleanups, {
    'agent.base_url': model.baseUrl,
    'agent.api_key': 'k',
    'heartbeat.min_interval_seconds': 1,
    ...overrides,
  });
  return { env, c, model };
}

async function worker(cleanups: CleanUp[], env: TestEnv): Promise<WorkerProcess> {
  const w = await startWorker(env);
  cleanups.push(() => w.drain());
  return w;
}

function say(c: TestClients, env: TestEnv, sessionId: string, text: string, id: string) {
  return enqueueInput(
    { redis: c.redis, keys: c.keys, queues: c.queues, maxChars: 10_000 },
    { sessionId, text, messageId: id, origin: { surface: 'chat' } },
  );
}

describe.concurrent('/heartbeat grammar', () => {
  const o = { minIntervalSeconds: 60, maxPromptChars: 1000 };
  it('accepts decimals and long unit names; F22: refuses intervals below the minimum and unknown units', () => {
    expect(parseHeartbeatArgs('every 1.5 hours report', o)).toMatchObject({ action: 'set', intervalSeconds: 5400, prompt: 'report' });
    expect(parseHeartbeatArgs('every 90 seconds ping', o)).toMatchObject({ intervalSeconds: 90 });
    expect(parseHeartbeatArgs('every 2h x', o)).toMatchObject({ intervalSeconds: 7200 });
    expect(() => parseHeartbeatArgs('every 10s x', o)).toThrow(
      'The interval 10s is below the heartbeat minimum of 1m (heartbeat.min_interval_seconds).',
    );
    expect(() => parseHeartbeatArgs('every 1x x', o)).toThrow(/"1x" is not an interval: unknown unit "x"/);
    expect(() => parseHeartbeatArgs('every -30m x', o)).toThrow(/"-30m" is not an interval: an interval has no sign/);
    for (const w of ['status', 'pause', 'resume']) expect(parseHeartbeatArgs(w, o)).toEqual({ action: w });
    expect(parseHeartbeatArgs('clear', o)).toEqual({ action: 'stop' });
    expect(() => parseHeartbeatArgs('every soon x', o)).toThrow(/Usage: \/heartbeat every/);
    expect(() => parseHeartbeatArgs('every 5m', o)).toThrow(/needs a prompt/);
  });
});

/**
 * How long a wait below goes on without a step (a model call, an event written) before it fails: beside two
 * other copies of the suite (load 25–30) a starved worker or test process takes seconds over a single step, so
 * a run of steps is waited for as long as they keep coming (`waitWhileAdvancing`), not for a fixed total.
 */
const STALL_MS = 60_000;

// Up to 300 s a test: on a loaded machine a few turns a second apart took longer than the 10 s once allowed.
describe.concurrent('/heartbeat', { timeout: 300_000 }, () => {
  it('F5: set a heartbeat, stop every process, start a worker only (no client) → the heartbeat fires', async ({ cleanups, expect }) => {
    const { env, c } = await setup(cleanups, {}, { turn: (_r, n) => `nothing new (${n})` });
    const first = await worker(cleanups, env);
    await say(c, env, 'hb', '/heartbeat every 1s anything new?', 'm1');
    await waitForEvents(c, 'hb', 'reply', 1);
    await first.drain();
    const before = (await events(c, 'hb', 'reply')).length;
    await sleep(1_500); // every process stopped for more than an interval (a span of time, not an outcome)
    expect((await events(c, 'hb', 'reply')).length).toBe(before);
    const restartAt = Date.now();
    await worker(cleanups, env); // a bare worker: no client attached, no gateway
    const after = await waitForEvents(c, 'hb', 'reply', before + 2, STALL_MS);
    const heartbeatTicks = after.filter((e) => e.data.kind === 'heartbeat');
    expect(heartbeatTicks.length).toBe(after.length);
    // missed ticks coalesced into one: exactly one tick was due before the restart, then the cadence
    const since = after.slice(before);
    expect(since.filter((e) => Number(e.data.dueAt) < restartAt)).toHaveLength(1);
    expect(Number(since[1]!.data.dueAt)).toBeGreaterThanOrEqual(restartAt);
  });

  it('tells the agent it is a check-in, to answer briefly and not invent work; no LOOP_COMPLETE or budget', async ({
    cleanups,
    expect,
  }) => {
    const { env, c, model } = await setup(cleanups, { 'loops.max_ticks': 1 }, { turn: () => 'LOOP_COMPLETE' });
    await worker(cleanups, env);
    await say(c, env, 'hb2', '/hb every 1s check the inbox', 'm1');
    // Past loops.max_ticks 1, and LOOP_COMPLETE both times: waited for while the ticks' model calls and replies come.
    await waitWhileAdvancing(
      async () => {
        const replies = await events(c, 'hb2', 'reply');
        return { done: replies.length >= 2 ? true : undefined, at: `${model.requests.length}/${replies.length}` };
      },
      STALL_MS,
      '2 replies on hb2 (model calls/replies)',
    );
    expect((await c.loops.get('hb2', 'heartbeat'))!.status).toBe('active');
    const input = model.requests.find((r) => !isJudge(r))!.messages.at(-1)!.content;
    expect(input).toMatch(/\[Heartbeat #1\]/);
    expect(input).toMatch(/do not invent work/);
  });
});

describe.concurrent('re-sending the same schedule', () => {
  it('F18: an identical /heartbeat sent again fires no extra turn and says when it fires next; a changed prompt replaces it and fires now', async ({
    cleanups,
    expect,
  }) => {
    const { env, c, model } = await setup(
      cleanups,
      {},
      { turn: (req) => `ok: ${req.messages.at(-1)!.content.includes('anything new?') ? 'first' : 'second'}` },
    );
    await worker(cleanups, env);
    await say(c, env, 'hb-same', '/heartbeat every 1m anything new?', 'm1');
    await waitForEvents(c, 'hb-same', 'reply', 1);
    const set = (await c.loops.get('hb-same', 'heartbeat'))!;
    await say(c, env, 'hb-same', '/heartbeat every 1m anything new?', 'm2');
    const notices = await waitForEvents(c, 'hb-same', 'notice', 2);
    expect(notices[1]!.data.text).toMatch(
      /^Heartbeat already set: every 1m · next in (\d+s|1m)\. Send a different prompt or interval to replace it\.$/,
    );
    // Nothing was re-armed: the same heartbeat, one tick used, its next tick a minute after the first.
    const after = (await c.loops.get('hb-same', 'heartbeat'))!;
    expect(after).toMatchObject({ loopId: set.loopId, ticksUsed: 1, version: set.version });
    expect(await c.loops.nextDueAt(after)).toBeGreaterThan(Date.now() + 45_000);
    expect(model.requests.length).toBe(1);

    await say(c, env, 'hb-same', '/heartbeat every 1m anything else?', 'm3');
    const replies = await waitForEvents(c, 'hb-same', 'reply', 2);
    expect(replies[1]!.data.text).toBe('ok: second');
    expect((await events(c, 'hb-same', 'notice'))[2]!.data.text).toMatch(/Replaced the previous heartbeat/);
    expect((await c.loops.get('hb-same', 'heartbeat'))!.loopId).not.toBe(set.loopId);
  });

  it('F18: the same for /loop; a changed interval replaces it', async ({ cleanups, expect }) => {
    const { env, c, model } = await setup(cleanups, {}, { turn: () => 'ok' });
    await worker(cleanups, env);
    await say(c, env, 'loop-same', '/loop 10m check the build', 'm1');
    await waitForEvents(c, 'loop-same', 'reply', 1);
    await say(c, env, 'loop-same', '/loop 10m check the build', 'm2');
    const notices = await waitForEvents(c, 'loop-same', 'notice', 2);
    expect(notices[1]!.data.text).toMatch(/^Loop already set: every 10m · next in (9m\d*s?|10m)\. /);
    expect(model.requests.length).toBe(1);
    await say(c, env, 'loop-same', '/loop 20m check the build', 'm3');
    await waitForEvents(c, 'loop-same', 'reply', 2);
    expect((await c.loops.get('loop-same', 'loop'))!.intervalSeconds).toBe(1200);
  });
});

describe.concurrent('/goal', { timeout: 300_000 }, () => {
  it('sets a goal with its budget, runs continuation turns until the judge says done', async ({ cleanups, expect }) => {
    const { env, c, model } = await setup(
      cleanups,
      {},
      {
        turn: (_r, n) => `step ${n}`,
        judge: (n) => (n < 3 ? '{"verdict":"continue","reason":"more to do"}' : '{"verdict":"done","reason":"tests green"}'),
      },
    );
    await worker(cleanups, env);
    await say(c, env, 'g1', '/goal get the test suite green', 'm1');
    const notice = (await waitForEvents(c, 'g1', 'notice', 1))[0]!;
    expect(notice.data.text).toBe('Goal set (20-turn budget): get the test suite green');
    // Three turns and three verdicts: waited for while the model is called.
    await waitWhileAdvancing(
      async () => ({
        done: (await events(c, 'g1', 'notice')).some((e) => e.data.text === 'Goal achieved: get the test suite green') ? true : undefined,
        at: model.requests.length,
      }),
      STALL_MS,
      'the goal achieved (model calls)',
    );
    const replies = await events(c, 'g1', 'reply');
    expect(replies.map((e) => e.data.text)).toEqual(['step 1', 'step 2', 'step 3']);
    expect(replies.every((e) => e.data.source === 'goal')).toBe(true);
  });

  it('F6: after the budget is used, /goal resume runs a continuation turn with no user message', async ({ cleanups, expect }) => {
    const { env, c, model } = await setup(cleanups, { 'goals.max_turns': 2 }, { turn: (_r, n) => `step ${n}` });
    await worker(cleanups, env);
    await say(c, env, 'g2', '/goal keep going', 'm1');
    // Two turns, each judged: waited for while the model is called.
    await waitWhileAdvancing(
      async () => ({
        done:
          (await c.sessions.readEvents('g2', '0')).some((e) => /Goal paused: turn budget of 2 used/.test(String(e.data.text))) || undefined,
        at: model.requests.length,
      }),
      STALL_MS,
      'the goal paused at its turn budget (model calls)',
    );
    expect((await events(c, 'g2', 'reply')).length).toBe(2);
    const userMessagesBefore = model.requests.filter((r) => !isJudge(r)).length;
    await say(c, env, 'g2', '/goal resume', 'm2');
    const replies = await waitForEvents(c, 'g2', 'reply', 3, STALL_MS);
    expect(replies[2]!.data.source).toBe('goal');
    expect(replies[2]!.data.text).toBe(`step ${userMessagesBefore + 1}`);
    const notices = (await events(c, 'g2', 'notice')).map((e) => String(e.data.text));
    expect(notices).toContain('Goal resumed (2 turn(s) left); the next turn is queued.');
  });

  it('a judge that never gives a valid verdict pauses the goal after goals.max_consecutive_failures turns, naming the error', async ({
    cleanups,
    expect,
  }) => {
    const { env, c, model } = await setup(cleanups, {}, { turn: (_r, n) => `step ${n}`, judge: () => 'not a verdict' });
    await worker(cleanups, env);
    await say(c, env, 'g4', '/goal keep going', 'm1');
    // Three turns, each judged: waited for while the model is called.
    const paused = await waitWhileAdvancing(
      async () => ({
        done: (await events(c, 'g4', 'notice')).find((e) => String(e.data.text).startsWith('Goal paused')),
        at: model.requests.length,
      }),
      STALL_MS,
      'the goal paused (model calls)',
    );
    expect(String(paused.data.text)).toMatch(
      /^Goal paused: 3 goal turns in a row got no verdict \(last error: .+\); \/goal resume tries again\.$/,
    );
    expect((await events(c, 'g4', 'reply')).map((e) => e.data.text)).toEqual(['step 1', 'step 2', 'step 3']);
    const record = JSON.parse((await c.redis.get(c.keys.goal('g4')))!) as { status: string; turnsUsed: number; failures: number };
    expect(record).toMatchObject({ status: 'paused', turnsUsed: 3, failures: 3 });
    expect(model.requests.filter((r) => !isJudge(r))).toHaveLength(3);
  });

  it('loop ticks wait while a goal is active and not parked, then resume', async ({ cleanups, expect }) => {
    const { env, c } = await setup(
      cleanups,
      {},
      {
        turn: (req, n) => ({ delayMs: 300, text: req.messages.at(-1)!.content.includes('[Goal turn') ? `goal step ${n}` : `tick ${n}` }),
        judge: (n) => (n < 4 ? '{"verdict":"continue","reason":""}' : '{"verdict":"done","reason":""}'),
      },
    );
    await worker(cleanups, env);
    await c.schedules.set(
      'g3',
      'loop',
      { prompt: 'check', intervalSeconds: 1, times: null, until: null, notes: [] },
      { origin: { surface: 'chat' }, runner: { kind: 'agent' } },
    );
    await waitForEvents(c, 'g3', 'reply', 1);
    await say(c, env, 'g3', '/goal finish the release', 'm1');
    await waitFor(
      async () => ((await events(c, 'g3', 'notice')).some((e) => String(e.data.text).startsWith('Goal achieved')) ? true : undefined),
      STALL_MS,
    );
    const all = await c.sessions.readEvents('g3', '0', { count: 10_000 });
    const setAt = all.findIndex((e) => e.type === 'notice' && String(e.data.text).startsWith('Goal set'));
    const doneAt = all.findIndex((e) => e.type === 'notice' && String(e.data.text).startsWith('Goal achieved'));
    const between = all.slice(setAt + 1, doneAt);
    expect(between.filter((e) => e.type === 'reply' && e.data.source === 'goal')).toHaveLength(4);
    // at most one tick that had already started before the goal's first turn
    expect(between.filter((e) => e.type === 'tick.started').length).toBeLessThanOrEqual(1);
    await waitFor(
      async () =>
        (await c.sessions.readEvents('g3', all.at(-1)!.id)).some((e) => e.type === 'reply' && e.data.source === 'tick') ? true : undefined,
      STALL_MS,
      'ticks after the goal',
    );
  });
});

describe.concurrent('user input first', { timeout: 300_000 }, () => {
  it('a user message sent during a tick runs before the next tick', async ({ cleanups, expect }) => {
    // The user turn lasts longer than an interval, so the next tick falls due during it.
    const { env, c } = await setup(
      cleanups,
      {},
      { turn: (req) => ({ delayMs: 1100, text: `answer to: ${req.messages.at(-1)!.content.slice(0, 20)}` }) },
    );
    await worker(cleanups, env);
    const release = `${env.home}/release`;
    cleanups.push(() => writeFileSync(release, ''));
    // Tick 1 stays mid-turn until the user's message is queued (later ticks find the file and go on).
    await c.schedules.set(
      'pri',
      'loop',
      { prompt: 'slow check', intervalSeconds: 1, times: null, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: {
          kind: 'command',
          command: `while [ ! -f ${release} ]; do sleep 0.05; done; echo "tick $HERMES_TICK"`,
          timeoutSeconds: 10,
        },
      },
    );
    const [started] = await waitForEvents(c, 'pri', 'tick.started', 1);
    await say(c, env, 'pri', 'what is the status?', 'u1');
    writeFileSync(release, '');
    const userReply = await waitFor(
      async () => (await events(c, 'pri', 'reply')).find((e) => e.data.source === 'message'),
      STALL_MS,
      'user reply',
    );
    await waitFor(
      async () => ((await events(c, 'pri', 'reply')).filter((e) => e.data.source === 'tick').length >= 2 ? true : undefined),
      STALL_MS,
    );
    const ticks = (await events(c, 'pri', 'reply')).filter((e) => e.data.source === 'tick');
    expect(ticks[0]!.data.occurrenceId).toBe(started!.data.occurrenceId); // the running tick finished
    // the next tick started only after the user's turn had finished, though it was due during it
    expect(Number(ticks[1]!.data.startedAt)).toBeGreaterThanOrEqual(Number(userReply.data.finishedAt));
    expect(Number(userReply.data.startedAt)).toBeGreaterThanOrEqual(Number(ticks[0]!.data.finishedAt));
  });
});
