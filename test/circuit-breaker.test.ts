/**
 * The circuit breaker of each endpoint and model (docs/CONTEXT.md "Circuit breaker"): after
 * `agent.breaker_failure_threshold` calls in a row that failed for good, calls skip the
 * dead model and the fallback answers with no call to it; after the cool-down one probe goes, and
 * its answer closes the breaker. With no fallback the turn fails at once, naming the open breaker
 * and when it probes. Counted in `/metrics`. Real Redis, a real worker, the real `openai` client
 * against two local model servers.
 */
import { describe } from 'vitest';
import { startAgentStack } from './support/agent-stack.ts';
import { it } from './support/cleanup.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { loopSpec } from './support/ci-watch.ts';
import { events, waitFor, waitForEvents } from './support/stack.ts';
import type { WorkerProcess } from '../worker/worker-process.ts';
import type { SessionEvent } from '../scheduler/session/session-store.ts';

/** The value of one series of the worker's `/metrics` (0 when absent). */
async function metric(worker: WorkerProcess, series: string): Promise<number> {
  const body = (await worker.deps.metrics!.exposition()).body;
  const line = body.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

const fail = { status: 500, message: 'upstream exploded' };
/** The error of a call the model failed (the client's message repeats the status). */
const FAILED = 'The model endpoint answered 500: upstream exploded';

/** When an event was written (its stream id's milliseconds). */
const at = (e: SessionEvent) => Number(e.id.split('-')[0]);

describe.concurrent('the circuit breaker', () => {
  it('skips a dead primary after its threshold (the fallback answers, no primary call), probes after the cool-down, and closes when the probe answers', async ({
    cleanups,
    expect,
  }) => {
    const backup = await startFakeOpenAI({ usage: 'counted' });
    cleanups.push(() => backup.close());
    backup.respond(() => 'backup ok');
    const {
      c,
      model: primary,
      worker,
    } = await startAgentStack(cleanups, {
      'agent.models': { backup: { model: 'backup-model', base_url: backup.baseUrl } },
      'agent.fallback_models': ['backup'],
      'agent.breaker_failure_threshold': 2,
      // Long enough for ticks 0.2 s apart to come while it is open, also when a loaded machine makes them seconds apart.
      'agent.breaker_cooldown_seconds': 5,
    });
    // Down for its first three calls (two that open the breaker, then the first probe), up after.
    primary.respond((_req, i) => (i < 3 ? fail : 'primary ok'));
    await c.schedules.set('s', 'loop', loopSpec('is the deploy done?', 0.2, null), {
      origin: { surface: 'cli' },
      runner: { kind: 'agent' },
    });

    const breaker = async (n: number) => (await waitForEvents(c, 's', 'model.breaker', n, 60_000)).slice(0, n);
    const [opened] = await breaker(1);
    expect(opened!.data).toMatchObject({ model: 'gpt-4o-mini', endpoint: primary.baseUrl, state: 'open', failures: 2 });
    const [, reopened] = await breaker(2);
    expect(reopened!.data).toMatchObject({ state: 'open', failures: 3 });
    const [, , closed] = await breaker(3);
    expect(closed!.data).toMatchObject({ model: 'gpt-4o-mini', state: 'closed' });
    await waitFor(
      async () => ((await events(c, 's', 'reply')).some((e) => e.data.text === 'primary ok') ? true : undefined),
      30_000,
      'the primary answered',
    );
    await c.schedules.stop('s', 'loop');

    // The primary was called twice, then only by the probes, each after its cool-down.
    const probeAt1 = Number(opened!.data.probeAt);
    const probeAt2 = Number(reopened!.data.probeAt);
    expect(primary.requests.length).toBeGreaterThanOrEqual(4);
    expect(primary.requests[2]!.at).toBeGreaterThanOrEqual(probeAt1);
    expect(primary.requests[3]!.at).toBeGreaterThanOrEqual(probeAt2);
    // While it was open the fallback answered every tick, with no primary call and none of its retries.
    const all = await events(c, 's');
    const skipped = all.filter((e) => e.type === 'model.skipped');
    expect(skipped.length).toBeGreaterThanOrEqual(1);
    for (const e of skipped)
      expect(e.data).toMatchObject({ model: 'gpt-4o-mini', endpoint: primary.baseUrl, failures: expect.any(Number) });
    const whileOpen = all.filter((e) => e.type === 'reply' && at(e) > at(opened!) && at(e) < probeAt1);
    expect(whileOpen.length).toBeGreaterThanOrEqual(1);
    for (const e of whileOpen) expect(e.data.text).toBe('backup ok');
    expect(primary.requests.filter((r) => r.at > at(opened!) && r.at < probeAt1)).toEqual([]);
    expect(all.filter((e) => e.type === 'tick.failed')).toEqual([]);
    // Once closed, the primary answers again.
    expect(all.filter((e) => e.type === 'reply').at(-1)!.data.text).toBe('primary ok');

    expect(await metric(worker, 'hermes_model_breaker_opens_total{model="gpt-4o-mini"}')).toBe(2);
    expect(await metric(worker, 'hermes_model_calls_total{kind="loop",outcome="skipped"}')).toBe(skipped.length);
    expect(await metric(worker, 'hermes_model_breakers_open')).toBe(0);
  }, 120_000);

  it('with no fallback, an open breaker fails the turn at once, naming the breaker and when it probes; no call reaches the model', async ({
    cleanups,
    expect,
  }) => {
    const {
      c,
      model: primary,
      worker,
    } = await startAgentStack(cleanups, {
      'agent.breaker_failure_threshold': 2,
      'agent.breaker_cooldown_seconds': 600,
    });
    primary.respond(() => fail);
    await c.schedules.set('s', 'loop', loopSpec('is the deploy done?', 0.2, null), {
      origin: { surface: 'cli' },
      runner: { kind: 'agent' },
    });
    const failed = await waitForEvents(c, 's', 'tick.failed', 3, 60_000);
    const opened = (await events(c, 's', 'model.breaker'))[0]!;
    expect(opened.data).toMatchObject({ state: 'open', failures: 2 });
    expect(failed[0]!.data.error).toBe(FAILED);
    expect(failed[1]!.data.error).toBe(FAILED);
    const probeAt = new Date(Number(opened.data.probeAt)).toISOString().replace(/[.]/g, '\\.');
    expect(failed[2]!.data.error).toMatch(
      new RegExp(
        `^Not calling gpt-4o-mini at ${primary.baseUrl.replace(/[.]/g, '\\.')}: its circuit breaker is open after 2 failed calls in a row ` +
          `\\(last: The model endpoint answered 500: upstream exploded\\); it is probed again at ${probeAt} \\(in \\d+ s\\), ` +
          'and no fallback model is configured \\(agent\\.fallback_models\\)\\.$',
      ),
    );
    // "in N s" is the time left to the probe when the turn failed (its stream entry's time): on a loaded machine, seconds under 600.
    const inSeconds = Number(/\(in (\d+) s\)/.exec(String(failed[2]!.data.error))![1]);
    const failedAt = Number(failed[2]!.id.split('-')[0]);
    expect(Math.abs(inSeconds - (Number(opened.data.probeAt) - failedAt) / 1000)).toBeLessThanOrEqual(2);
    expect(inSeconds).toBeLessThanOrEqual(600);
    // The third turn called nothing: the model saw the two calls that opened the breaker.
    expect(primary.requests).toHaveLength(2);
    expect(await metric(worker, 'hermes_model_breaker_opens_total{model="gpt-4o-mini"}')).toBe(1);
    expect(await metric(worker, 'hermes_model_calls_total{kind="loop",outcome="skipped"}')).toBe(1);
    expect(await metric(worker, 'hermes_model_breakers_open')).toBe(1);
    await c.schedules.stop('s', 'loop');
  }, 120_000);
});
