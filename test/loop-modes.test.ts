/**
 * The full /loop (issue: the full /loop, /heartbeat and /goal): self-paced
 * cadence, --until judged by a model, a judge that keeps failing.
 */
import { describe } from 'vitest';
import type { TestEnv } from './support/env.ts';
import { startWorkerStack, waitFor, waitForEvents, type TestClients } from './support/stack.ts';
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest, type ScriptedReply } from './support/fake-openai.ts';
import { telegramOutboundQueue } from '../scheduler/delivery/outbound.ts';
import { it, type CleanUp } from './support/cleanup.ts';

const isJudge = (req: RecordedRequest) => req.messages[0]?.role === 'system' && req.messages[0].content.startsWith('You judge');

async function setup(
  cleanups: CleanUp[],
  overrides: Record<string, unknown>,
  answer: { turn: (n: number) => ScriptedReply; judge?: (n: number) => ScriptedReply },
): Promise<{ env: TestEnv; c: TestClients; model: FakeOpenAI }> {
  const model = await startFakeOpenAI();
  let turns = 0;
  let judges = 0;
  model.respond((req) => (isJudge(req) ? (answer.judge ?? (() => '{"verdict":"continue","reason":""}'))(++judges) : answer.turn(++turns)));
  cleanups.push(() => model.close());
  const { env, c } = await startWorkerStack(cleanups, { 'agent.base_url': model.baseUrl, 'agent.api_key': 'k', ...overrides });
  return { env, c, model };
}

const loopSpec = (prompt: string, intervalSeconds: number | null, extra: { times?: number; until?: string } = {}) => ({
  prompt,
  intervalSeconds,
  times: extra.times ?? null,
  until: extra.until ?? null,
  notes: [],
});
const chat = { origin: { surface: 'chat' as const }, runner: { kind: 'agent' as const } };

describe.concurrent('self-paced /loop', () => {
  it('delays double while the reply is unchanged (floor, 2×, then the ceiling where 4× would pass it) and snap back to the floor on a change', async ({
    cleanups,
    expect,
  }) => {
    // floor 1 s, ceiling 3 s stand in for 60 s and 900 s: the same rule, in seconds instead of minutes
    // (the whole ladder 60, 120, 240, 480, 900 is pinned in loop-state.test.ts)
    const replies = ['build running', 'Build running', 'build  running 10:41', 'build GREEN', 'build GREEN'];
    const { c } = await setup(
      cleanups,
      { 'loops.self_paced_floor_seconds': 1, 'loops.self_paced_ceiling_seconds': 3 },
      { turn: (n) => replies[n - 1] ?? 'build GREEN' },
    );
    await c.schedules.set('sp', 'loop', loopSpec('watch the build', null), chat);
    const r = (await waitForEvents(c, 'sp', 'reply', 5, 30_000)).slice(0, 5);
    // Each tick is due exactly its delay after the previous one finished, and starts no earlier.
    const delays = r.slice(1).map((e, i) => Number(e.data.dueAt) - Number(r[i]!.data.finishedAt));
    expect(delays).toEqual([1000, 2000, 3000, 1000]);
    for (const e of r.slice(1)) expect(Number(e.data.startedAt)).toBeGreaterThanOrEqual(Number(e.data.dueAt));
    expect((await c.loops.get('sp', 'loop'))!.mode).toBe('self-paced');
  });
});

describe.concurrent('self-paced /loop status', () => {
  it('shows when the next tick is due instead of "next: pending"', async ({ cleanups, expect }) => {
    const { c } = await setup(
      cleanups,
      { 'loops.self_paced_floor_seconds': 600, 'loops.self_paced_ceiling_seconds': 900 },
      { turn: () => 'all quiet' },
    );
    await c.schedules.set('sps', 'loop', loopSpec('watch the queue', null), chat);
    await waitForEvents(c, 'sps', 'reply', 1);
    await waitFor(async () => ((await c.loops.get('sps', 'loop'))?.ticksUsed === 1 ? true : undefined), 10_000);
    const line = await c.schedules.status('sps', 'loop');
    expect(line).not.toContain('pending');
    expect(line).toMatch(/next in (9|10)m/); // the floor after the first tick
  });
});

describe.concurrent('--until', () => {
  it('done → finished after the judge says so', async ({ cleanups, expect }) => {
    const { c, model } = await setup(
      cleanups,
      {},
      {
        turn: (n) => `check ${n}`,
        judge: (n) => (n < 2 ? '{"verdict":"continue","reason":"still red"}' : '{"verdict":"done","reason":"green"}'),
      },
    );
    await c.schedules.set('u1', 'loop', loopSpec('check CI', 1, { until: 'the build is green' }), chat);
    await waitFor(async () => ((await c.loops.get('u1', 'loop'))?.status === 'finished' ? true : undefined), 10_000);
    const loop = await c.loops.get('u1', 'loop');
    expect(loop).toMatchObject({ ticksUsed: 2, statusReason: 'condition met: the build is green' });
    const judgeCall = model.requests.find(isJudge)!;
    expect(judgeCall.messages[1]!.content).toContain('Stop condition: the build is green');
  });

  it('blocked → paused with the reason', async ({ cleanups, expect }) => {
    const { c } = await setup(
      cleanups,
      {},
      { turn: () => 'token expired', judge: () => '{"verdict":"blocked","reason":"needs a new CI token"}' },
    );
    await c.schedules.set('u2', 'loop', loopSpec('check CI', 1, { until: 'green' }), chat);
    await waitFor(async () => ((await c.loops.get('u2', 'loop'))?.status === 'paused' ? true : undefined), 10_000);
    expect(await c.loops.get('u2', 'loop')).toMatchObject({ ticksUsed: 1, statusReason: 'blocked: needs a new CI token' });
    const notices = await waitForEvents(c, 'u2', 'notice', 1); // the notice follows the commit
    expect(notices.at(-1)!.data.text).toBe('Loop paused: blocked: needs a new CI token.');
  });

  it('a judge that fails every call pauses the loop with a clear message instead of spending the budget', async ({ cleanups, expect }) => {
    const { c } = await setup(cleanups, {}, { turn: () => 'still checking', judge: () => ({ status: 500, message: 'judge down' }) });
    await c.schedules.set('u3', 'loop', loopSpec('check CI', 1, { until: 'green' }), chat);
    await waitFor(async () => ((await c.loops.get('u3', 'loop'))?.status === 'paused' ? true : undefined), 15_000);
    const loop = await c.loops.get('u3', 'loop');
    expect(loop!.ticksUsed).toBe(3);
    expect(loop!.statusReason).toMatch(/--until judge failed 3 times in a row .*500/);
    expect(loop!.maxTicks).toBe(100);
  });
});

describe.concurrent('a loop whose turns keep failing', () => {
  it('F19: the model answers 500 to every call → after 3 failed ticks in a row the loop pauses with a notice naming the error; /loop resume continues', async ({
    cleanups,
    expect,
  }) => {
    let healthy = false;
    const { c, model } = await setup(cleanups, {}, { turn: () => (healthy ? 'all green' : { status: 500, message: 'upstream exploded' }) });
    const route = {
      origin: { surface: 'telegram' as const, route: { platform: 'telegram', chatId: '4242' } },
      runner: { kind: 'agent' as const },
    };
    await c.schedules.set('f19', 'loop', loopSpec('check the build', 1), route);
    await waitFor(async () => ((await c.loops.get('f19', 'loop'))?.status === 'paused' ? true : undefined), 15_000, 'paused');
    const loop = (await c.loops.get('f19', 'loop'))!;
    expect(loop).toMatchObject({ ticksUsed: 3, failureStreak: 3, lastError: expect.stringMatching(/500.*upstream exploded/) });
    expect(loop.statusReason).toMatch(
      /^3 failed ticks in a row; last error: The model endpoint answered 500: .*upstream exploded.*\. \/loop resume continues$/,
    );
    expect((await waitForEvents(c, 'f19', 'tick.failed', 3)).map((e) => e.data.tick)).toEqual([1, 2, 3]);
    const [notice] = await waitForEvents(c, 'f19', 'notice', 1);
    expect(notice!.data.text).toMatch(/^Loop paused: 3 failed ticks in a row; last error: .*upstream exploded/);
    expect(model.requests).toHaveLength(3); // no fourth call: the budget is not burnt
    // Each failed tick is told to the route; the third by the pause notice.
    const outbound = telegramOutboundQueue(c.keys, c.redis);
    cleanups.push(() => outbound.close());
    const sent = await waitFor(
      async () => {
        const jobs = await outbound.getJobs(['waiting', 'delayed', 'prioritized']);
        return jobs.length >= 3 ? jobs.sort((a, b) => a.timestamp - b.timestamp).map((j) => j.data.text) : undefined;
      },
      5_000,
      'three route notices',
    );
    expect(sent).toEqual([
      'Loop tick #1 failed: The model endpoint answered 500: upstream exploded. Next try in 1s. It pauses after 3 failures in a row (1 so far).',
      'Loop tick #2 failed: The model endpoint answered 500: upstream exploded. Next try in 1s. It pauses after 3 failures in a row (2 so far).',
      expect.stringMatching(/^Loop paused: 3 failed ticks in a row; last error: /),
    ]);

    healthy = true;
    expect(await c.schedules.resume('f19', 'loop')).toMatch(/^Loop resumed/);
    await waitForEvents(c, 'f19', 'reply', 1);
    await waitFor(async () => ((await c.loops.get('f19', 'loop'))?.failureStreak === 0 ? true : undefined), 5_000, 'streak reset');
    expect((await c.loops.get('f19', 'loop'))!.status).toBe('active');
  });
});
