/**
 * Signed webhooks that wake a loop (`hooks.<name>.action: wake_loop`, docs/GATEWAY.md "Webhooks") on a
 * real gateway, Redis, BullMQ, worker and the fake model: the loop's next tick runs now instead of an
 * hour later, a `--until` condition is judged after it (the loop finishes when the judge says it is
 * met), one tick per delivery id; a self-paced loop wakes too; a loop that is not active, or a
 * heartbeat that is not there, is refused and the delivery not taken.
 */
import { describe } from 'vitest';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { hermesSignature } from '../gateway/hooks/hook-signature.ts';
import { createLogger } from '../scheduler/logger.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import type { TestEnv } from './support/env.ts';
import { startFakeOpenAI, type RecordedRequest } from './support/fake-openai.ts';
import { events, startWorkerStack, waitFor, waitForEvents, type TestClients } from './support/stack.ts';

const SECRET = 'wake-hook-secret-0123456789';
const isJudge = (req: RecordedRequest) => req.messages[0]?.role === 'system' && req.messages[0].content.startsWith('You judge');
const chat = { origin: { surface: 'chat' as const }, runner: { kind: 'agent' as const } };
const spec = (prompt: string, intervalSeconds: number | null, until: string | null = null) => ({
  prompt,
  intervalSeconds,
  times: null,
  until,
  notes: [],
});

async function postHook(gw: Gateway, name: string, delivery: string) {
  const body = JSON.stringify({ deploy: { state: 'finished' } });
  const res = await fetch(`${gw.httpAddress.url}/hooks/${name}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-hermes-signature': hermesSignature(SECRET, body, Math.floor(Date.now() / 1000)),
      'x-hermes-delivery': delivery,
    },
    body,
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

async function stack(
  cleanups: CleanUp[],
  overrides: Record<string, unknown>,
  judge: (n: number) => string = () => '{"verdict":"continue","reason":"not yet"}',
): Promise<{ env: TestEnv; c: TestClients; gw: Gateway }> {
  const model = await startFakeOpenAI();
  let turns = 0;
  let judges = 0;
  model.respond((req) => (isJudge(req) ? judge(++judges) : `check ${++turns}`));
  cleanups.push(() => model.close());
  const { env, c } = await startWorkerStack(cleanups, {
    'agent.base_url': model.baseUrl,
    'agent.api_key': 'k',
    'api_server.port': 0,
    'api_server.key': 'wake-test-key-0123456789',
    ...overrides,
  });
  const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: 'silent' }) });
  cleanups.push(() => gw.close());
  return { env, c, gw };
}

const ticksUsed = async (c: TestClients, session: string, n: number) =>
  await waitFor(
    async () => ((await c.loops.get(session, 'loop'))?.ticksUsed === n ? true : undefined),
    20_000,
    `${n} tick(s) of ${session}`,
  );

describe.concurrent('webhooks that wake a loop', () => {
  it('a loop every hour ticks now on a signed delivery; its --until is judged after that tick and ends it; a replay wakes nothing', async ({
    cleanups,
    expect,
  }) => {
    const { c, env, gw } = await stack(
      cleanups,
      {
        'hooks.deploy': { session: 'ops', action: 'wake_loop', secret: SECRET },
        'hooks.beat': { session: 'ops', action: 'wake_loop', schedule: 'heartbeat', secret: SECRET },
      },
      (n) => (n < 2 ? '{"verdict":"continue","reason":"still deploying"}' : '{"verdict":"done","reason":"live"}'),
    );
    await c.schedules.set('ops', 'loop', spec('check the deploy', 3600, 'the deploy is live'), chat);
    await ticksUsed(c, 'ops', 1); // the first tick runs when the loop is set; the next would be in an hour

    const woken = await postHook(gw, 'deploy', 'deploy-1');
    expect(woken.status, JSON.stringify(woken.body)).toBe(202);
    const loopId = (await c.loops.get('ops', 'loop'))!.loopId;
    expect(woken.body).toEqual({
      status: 'accepted',
      hook: 'deploy',
      action: 'wake_loop',
      session: 'ops',
      schedule: 'loop',
      loop_id: loopId,
    });
    const replay = await postHook(gw, 'deploy', 'deploy-1');
    expect([replay.status, replay.body.error?.code]).toEqual([409, 'duplicate_delivery']);

    // The woken tick ran, and the judge after it found the condition met.
    await waitFor(async () => ((await c.loops.get('ops', 'loop'))?.status === 'finished' ? true : undefined), 20_000, 'the loop finished');
    expect(await c.loops.get('ops', 'loop')).toMatchObject({ ticksUsed: 2, statusReason: 'condition met: the deploy is live' });
    expect(await events(c, 'ops', 'reply')).toHaveLength(2);
    const notices = await waitForEvents(c, 'ops', 'notice', 1);
    expect(notices.at(-1)!.data.text).toBe('Loop finished: condition met: the deploy is live.');

    // A finished loop, and a heartbeat the session does not have: refused, the deliveries not taken.
    const late = await postHook(gw, 'deploy', 'deploy-2');
    expect([late.status, late.body.error?.code]).toEqual([409, 'hook_loop_not_active']);
    expect(late.body.error?.message).toBe('Hook deploy wakes the loop of session ops, which is finished.');
    const beat = await postHook(gw, 'beat', 'beat-1');
    expect([beat.status, beat.body.error?.code]).toEqual([409, 'hook_loop_not_active']);
    expect(beat.body.error?.message).toBe('Hook beat wakes the heartbeat of session ops, which does not exist.');
    expect(await c.redis.keys(`${env.prefix}*deploy-2*`)).toEqual([]);
    expect(await c.redis.keys(`${env.prefix}*beat-1*`)).toEqual([]);
  });

  it('a fixed loop keeps its cadence from the woken tick, one tick per delivery; a self-paced loop wakes too', async ({
    cleanups,
    expect,
  }) => {
    const { c, gw } = await stack(cleanups, {
      'loops.self_paced_floor_seconds': 600,
      'hooks.ci': { session: 'ci', action: 'wake_loop', secret: SECRET },
      'hooks.sp': { session: 'sp', action: 'wake_loop', secret: SECRET },
    });
    await c.schedules.set('ci', 'loop', spec('check CI', 3600), chat);
    await c.schedules.set('sp', 'loop', spec('watch the queue', null), chat);
    await ticksUsed(c, 'ci', 1);
    await ticksUsed(c, 'sp', 1);

    for (const [n, delivery] of [
      [2, 'ci-1'],
      [3, 'ci-2'],
    ] as const) {
      const before = Date.now();
      expect((await postHook(gw, 'ci', delivery)).status).toBe(202);
      await ticksUsed(c, 'ci', n);
      // The next tick is an interval after the woken one, not after the one the schedule had.
      const loop = (await c.loops.get('ci', 'loop'))!;
      expect(loop.lastTickDueAt).toBeGreaterThanOrEqual(before);
      expect(await c.loops.nextDueAt(loop)).toBe(loop.lastTickDueAt! + 3600_000);
    }
    expect((await postHook(gw, 'ci', 'ci-2')).status).toBe(409);
    expect(await events(c, 'ci', 'reply')).toHaveLength(3);

    const sp = await postHook(gw, 'sp', 'sp-1');
    expect(sp.status, JSON.stringify(sp.body)).toBe(202);
    await ticksUsed(c, 'sp', 2);
    const loop = (await c.loops.get('sp', 'loop'))!;
    expect([loop.status, loop.nextDueAt]).toEqual(['active', loop.lastTickFinishedAt! + 600_000]);
  });
});
