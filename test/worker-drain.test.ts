/**
 * Drain of a worker process on SIGTERM (docs/DESIGN.md §9, F9): scheduled work (cron
 * ticks, loop ticks, `/v1` runs) may finish within `agent.cron_drain_timeout`;
 * chat turns get `agent.restart_drain_timeout` (default 0: interrupted at
 * once, handed back, the user told). F9 runs `hermes worker` as a process and
 * sends it a real SIGTERM; the other cases drain in-process workers through
 * `drain()`, what the signal handler calls. Runs that must outlast the signal
 * wait for a file the test creates, not for a fixed time.
 */
import { describe } from 'vitest';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { events, openTestClients, spawnWorker, startWorker, startWorkerStack, waitFor, waitForEvents } from './support/stack.ts';
import { startFakeOpenAI, type ScriptedReply } from './support/fake-openai.ts';
import { cronServiceFor } from '../scheduler/services.ts';
import { createLogger } from '../scheduler/logger.ts';
import { enqueueInput } from '../scheduler/session/inbox.ts';
import { it } from './support/cleanup.ts';

/** A shell step that waits until `file` exists: a run that lasts exactly as long as the test holds it. */
const untilExists = (file: string) => `while [ ! -e ${file} ]; do sleep 0.05; done`;

// Each test has its own Redis prefix, workers, model server and files (env.home), so the describes below run
// side by side: most of their time is spent waiting for a drain deadline or a worker process.
describe.concurrent('worker drain', () => {
  it('F9: a cron run still going at SIGTERM, with cron_drain_timeout 30 and restart_drain_timeout 0 → the run completes and is delivered', async ({
    cleanups,
    expect,
  }) => {
    const { env, c } = openTestClients(cleanups, { 'agent.cron_drain_timeout': 30, 'agent.restart_drain_timeout': 0, log_level: 'info' });
    const worker = await spawnWorker(cleanups, env);
    let stderr = '';
    worker.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const cron = cronServiceFor(env.config, c, createLogger({ level: 'silent' }));
    const marker = join(env.home, 'started');
    const release = join(env.home, 'release');
    const job = await cron.add(
      { schedule: 'every 1h', script: `touch ${marker}; ${untilExists(release)}; echo report done`, name: 'f9', paused: true },
      { origin: { surface: 'cli' }, trusted: true },
    );
    await cron.runNow(job.id, { origin: { surface: 'cli' }, trusted: true });
    await waitFor(async () => (existsSync(marker) ? true : undefined), 15_000, 'the cron run to start');
    const signalledAt = Date.now();
    worker.kill('SIGTERM');
    const exited = new Promise<number | null>((r) => worker.on('exit', r));
    // The worker says it waits for the run; only then does the run finish.
    await waitFor(() => /waiting up to 30s/.test(stderr), 15_000, 'the drain to wait for the run');
    writeFileSync(release, '');
    const code = await exited;
    expect(code).toBe(0);
    const runs = await cron.runs(job.id, 5);
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ status: 'ok', output: 'report done' });
    expect(runs[0]!.finished_at!).toBeGreaterThan(signalledAt);
    expect(runs[0]!.deliveries[0]).toMatchObject({ target: 'local', status: 'delivered' });
    expect(stderr).toMatch(/waiting up to 30s for 1 deadline turn\(s\) \(ticks, \/v1 runs\) and up to 0s for 0 chat turn\(s\)/);
  });

  it('a cron run cut by the drain deadline is handed back, runs once on another worker and is recorded once with its attempt count', async ({
    cleanups,
    expect,
  }) => {
    const {
      env,
      c,
      worker: first,
    } = await startWorkerStack(cleanups, { 'agent.cron_drain_timeout': 0.5, 'agent.restart_drain_timeout': 0 });
    const cron = cronServiceFor(env.config, c, createLogger({ level: 'silent' }));
    const starts = join(env.home, 'starts');
    const release = join(env.home, 'release');
    const job = await cron.add(
      {
        schedule: 'every 1h',
        script: `echo "$HERMES_CRON_OCCURRENCE_ID" >> ${starts}; ${untilExists(release)}; echo report done`,
        name: 'cut',
        paused: true,
      },
      { origin: { surface: 'cli' }, trusted: true },
    );
    await cron.runNow(job.id, { origin: { surface: 'cli' }, trusted: true });
    await waitFor(async () => (existsSync(starts) ? true : undefined), 15_000, 'the cron run to start');
    await first.drain(); // the run is still waiting for its release: cut at the deadline
    expect(await cron.runs(job.id, 5)).toEqual([]); // cut, so not recorded: it was never completed

    writeFileSync(release, '');
    const second = await startWorker(env);
    cleanups.push(() => second.drain());
    const [run] = await waitFor(
      async () => {
        const runs = await cron.runs(job.id, 5);
        return runs.length > 0 ? runs : undefined;
      },
      20_000,
      'the handed-back run to be recorded',
    );
    expect(run).toMatchObject({ status: 'ok', output: 'report done', attempts: 2, trigger: 'manual', worker_id: second.deps.workerId });
    const started = readFileSync(starts, 'utf8').trim().split('\n');
    expect(started).toHaveLength(2);
    expect(new Set(started).size).toBe(1); // the same occurrence, started twice, recorded once
    await second.drain();
    expect(await cron.runs(job.id, 5)).toHaveLength(1);
  });

  it('a chat turn with restart_drain_timeout 0 is interrupted at once, the user is told, and it is answered after the restart', async ({
    cleanups,
    expect,
  }) => {
    const model = await startFakeOpenAI();
    let calls = 0;
    let answerLate!: () => void;
    const late = new Promise<ScriptedReply>((r) => (answerLate = () => r('too late')));
    model.respond(() => (++calls === 1 ? late : 'answered after restart')); // the first call is never answered in time
    cleanups.push(
      () => model.close(),
      () => answerLate(),
    );
    const { env, c, worker } = await startWorkerStack(cleanups, {
      'agent.base_url': model.baseUrl,
      'agent.api_key': 'k',
      'agent.restart_drain_timeout': 0,
    });
    await enqueueInput(
      { redis: c.redis, keys: c.keys, queues: c.queues, maxChars: 10_000 },
      {
        sessionId: 'chat-drain',
        text: 'summarise the logs',
        messageId: 'm1',
        origin: { surface: 'chat' },
      },
    );
    await waitFor(async () => (model.requests.length > 0 ? true : undefined), 15_000, 'the model call');
    const signalledAt = Date.now();
    await worker.drain();
    // At once: the model call is never answered, so a drain that waited for it would hang to the test timeout.
    expect(Date.now() - signalledAt).toBeLessThan(10_000);
    const notice = await waitForEvents(c, 'chat-drain', 'notice', 1);
    expect(notice[0]!.data.text).toMatch(/interrupted by a restart; it will be answered when a worker is back/);
    const w2 = await startWorker(env);
    cleanups.push(() => w2.drain());
    const replies = await waitForEvents(c, 'chat-drain', 'reply', 1, 15_000);
    expect(replies[0]!.data.text).toBe('answered after restart');
    const probe = new Redis(env.redisUrl);
    cleanups.push(() => probe.disconnect());
    expect(await probe.zcard(c.keys.pendingInput('chat-drain'))).toBe(0);
  });
});

describe.concurrent('drain: a job received after the worker paused', () => {
  it('a cron tick a draining worker receives from a fetch in flight when it paused is handed back unstarted and runs once, on another worker', async ({
    cleanups,
    expect,
  }) => {
    const { env, c } = openTestClients(cleanups, { 'agent.cron_drain_timeout': 1, 'agent.restart_drain_timeout': 0 });
    const release = join(env.home, 'release');
    const cron = cronServiceFor(env.config, c, createLogger({ level: 'silent' }));
    const a = await startWorker(env);
    cleanups.push(() => a.drain());
    const marker = join(env.home, 'long-started');
    const long = await cron.add(
      { schedule: 'every 1h', script: `touch ${marker}; ${untilExists(release)}; echo long`, name: 'long', paused: true },
      { origin: { surface: 'cli' }, trusted: true },
    );
    const late = await cron.add(
      { schedule: 'every 1h', script: 'echo late', name: 'late', paused: true },
      { origin: { surface: 'cli' }, trusted: true },
    );
    await cron.runNow(long.id, { origin: { surface: 'cli' }, trusted: true });
    await waitFor(async () => (existsSync(marker) ? true : undefined), 15_000, 'the long run to start');
    // A drains (waiting for the long run); its blocking fetch, started before the pause, is still in flight.
    const drained = a.drain();
    const { manualJobId } = await cron.runNow(late.id, { origin: { surface: 'cli' }, trusted: true });
    await drained; // the long run was cut at the deadline
    writeFileSync(release, ''); // and runs through when it is handed back
    // A received the job and put it back without starting it: nothing recorded, due at once for another
    // worker. (On a loaded machine A's fetch can end before the job is added; then the job simply waits,
    // unstarted, and the assertions on B below are the same.)
    expect(await cron.runs(late.id, 5)).toEqual([]);
    const handedBack = await c.queues.ticks.getJob(manualJobId);
    expect(['delayed', 'waiting', 'prioritized']).toContain(await handedBack!.getState());
    expect(handedBack!.attemptsStarted).toBeLessThanOrEqual(1);

    const b = await startWorker(env);
    cleanups.push(() => b.drain());
    const [run] = await waitFor(
      async () => {
        const runs = await cron.runs(late.id, 5);
        return runs.length > 0 ? runs : undefined;
      },
      15_000,
      'the handed-back run to be recorded',
    );
    expect(run).toMatchObject({ status: 'ok', output: 'late', attempts: 1, worker_id: b.deps.workerId });
  });

  it('a loop tick a draining worker receives from a fetch in flight when it paused is handed back unstarted and runs once, on another worker', async ({
    cleanups,
    expect,
  }) => {
    const { env, c, worker: a } = await startWorkerStack(cleanups, { 'agent.cron_drain_timeout': 1, 'agent.restart_drain_timeout': 0 });
    const release = join(env.home, 'release');
    const command = (text: string, held: boolean) => ({
      kind: 'command' as const,
      command: `${held ? untilExists(release) : 'true'}; echo ${text}`,
      timeoutSeconds: 10,
    });
    await c.schedules.set(
      'long',
      'loop',
      { prompt: 'long', intervalSeconds: 3600, times: 1, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: command('long', true),
      },
    );
    await waitForEvents(c, 'long', 'tick.started', 1);
    // A drains (waiting for the long tick); its blocking fetch, started before the pause, is still in flight.
    const drained = a.drain();
    await c.schedules.set(
      'late',
      'loop',
      { prompt: 'late', intervalSeconds: 3600, times: 1, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: command('late', false),
      },
    );
    await drained; // the long tick was cut at the deadline
    writeFileSync(release, ''); // and runs through when it is handed back
    // A received the tick and put it back without starting it: no turn, due at once for another worker.
    // (On a loaded machine A's fetch can end before the tick is released; then it waits, unstarted. The
    // job scheduler's next occurrence may wait next to it, never started.)
    expect(await events(c, 'late')).toEqual([]);
    const lateJobs = (await c.queues.ticks.getJobs(['delayed', 'wait', 'prioritized'])).filter(
      (j) => j.repeatJobKey === c.keys.loopSchedulerId('late', 'loop'),
    );
    expect(lateJobs.length).toBeGreaterThan(0);
    for (const job of lateJobs) expect(job.attemptsStarted).toBeLessThanOrEqual(1);

    const b = await startWorker(env);
    cleanups.push(() => b.drain());
    const [reply] = await waitForEvents(c, 'late', 'reply', 1);
    expect(reply!.data).toMatchObject({ text: 'late', worker: b.deps.workerId });
    expect(await events(c, 'late', 'tick.started')).toHaveLength(1);
  });
});
