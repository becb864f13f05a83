/**
 * Temporal's overlap policies beyond skip, queue and allow (docs/CRON.md, "Overlap"):
 * `--overlap buffer_all` runs the occurrences due during a run one after another, in the order they
 * were due, and no more than `cron.max_buffered_occurrences` wait; `--overlap cancel_other` stops the
 * running run — on the worker that runs it, its command killed — and runs the new occurrence.
 *
 * Real Redis and BullMQ, the local model server; `cancel_other` across two `hermes worker` processes.
 * A run that must last is held by the test (a held model answer, a command that sleeps 300 s it never
 * waits for), every wait is on an observed state.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe } from 'vitest';
import { cronSessionId, type CronRun } from '../scheduler/cron/cron-job.ts';
import { cronServiceFor } from '../scheduler/services.ts';
import { createLogger } from '../scheduler/logger.ts';
import { startCronWorker, openCronService } from './support/cron-worker.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { lastToolResult, lastUserText, startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import { clients, spawnWorker } from './support/stack.ts';
import { waitFor } from './support/wait-for.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { alive } from './support/child-processes.ts';

const cli = { origin: { surface: 'cli' as const }, trusted: true };

/** A model whose first answer is held until `release()` (or the test's end); later ones come at once. */
async function heldModel(cleanups: CleanUp[]): Promise<{ model: FakeOpenAI; release: () => void }> {
  const model = await startFakeOpenAI();
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  model.respond(async (req, index) => {
    if (index === 0) await gate;
    return `done: ${lastUserText(req)}`;
  });
  cleanups.push(() => model.close());
  cleanups.push(() => release()); // runs first: a worker closes only when its runs end
  return { model, release };
}

describe.concurrent('--overlap buffer_all', () => {
  it('runs the occurrences due during a run one after another, in the order they were due; one more than cron.max_buffered_occurrences is skipped as buffer-full', async ({
    cleanups,
    expect,
  }) => {
    const held = await heldModel(cleanups);
    const env: TestEnv = testEnv({
      'agent.base_url': held.model.baseUrl,
      'cron.min_interval_seconds': 1,
      'cron.max_buffered_occurrences': 3,
    });
    cleanups.push(() => env.cleanup());
    const api = openCronService(env.config);
    cleanups.push(() => api.close());
    const w = await startCronWorker(env.config, { concurrency: 8 });
    cleanups.push(() => w.close());
    const job = await api.service.add({ schedule: 'every 1s', prompt: 'slow', overlap: 'buffer_all' }, cli);
    const runsOf = async () => (await api.store.runs(job.id, 1000)).sort((a, b) => a.due_at - b.due_at);

    // The first run lasts until three occurrences wait in the buffer and a fourth was turned away.
    const full = await waitFor(
      async () => (await runsOf()).find((r) => r.status === 'skipped'),
      20_000,
      'an occurrence skipped with the buffer full',
    );
    expect(full).toMatchObject({ reason: 'buffer-full', trigger: 'schedule', started_at: null });
    expect(await api.redis.zcard(api.keys.cronBuffer(job.id))).toBe(3);
    expect(held.model.requests).toHaveLength(1);
    held.release();

    await waitFor(async () => (await runsOf()).filter((r) => r.status === 'ok').length >= 5, 20_000, 'the buffered runs and one more');
    await api.service.pause(job.id);
    await waitFor(async () => (await api.queues.ticks.getActiveCount()) === 0, 10_000, 'no tick in flight');

    const runs = await runsOf();
    const ok = runs.filter((r) => r.status === 'ok');
    const first = ok[0]!;
    // The occurrences due during the first run: three ran, after it and one after another, in due order.
    const buffered = ok.filter((r) => r.due_at > first.due_at && r.due_at < first.finished_at!);
    expect(buffered).toHaveLength(3);
    const byStart = [...ok].sort((a, b) => a.started_at! - b.started_at!);
    expect(byStart.map((r) => r.due_at)).toEqual(ok.map((r) => r.due_at));
    for (let i = 1; i < ok.length; i++) expect(ok[i]!.started_at!).toBeGreaterThanOrEqual(ok[i - 1]!.finished_at!);
    // The bound held: every occurrence due during the first run beyond the three was skipped, and said so.
    const turnedAway = runs.filter((r) => r.status === 'skipped');
    expect(turnedAway.length).toBeGreaterThanOrEqual(1);
    expect(turnedAway.every((r: CronRun) => r.reason === 'buffer-full' && r.due_at > buffered[2]!.due_at)).toBe(true);
    expect(held.model.requests).toHaveLength(ok.length);
    expect(new Set(runs.map((r) => r.occurrence_id)).size).toBe(runs.length);
  });
});

describe.concurrent('--overlap cancel_other', () => {
  /**
   * An agent run whose turn is in a 300 s command tool (its own timeout 600 s): the run is held by its
   * command, which never ends by itself within the test, so only the cancel can end it.
   */
  async function slowToolJob(cleanups: CleanUp[]): Promise<{ env: TestEnv; model: FakeOpenAI; pidFile: string }> {
    const model = await startFakeOpenAI();
    cleanups.push(() => model.close());
    const env = testEnv({ 'agent.base_url': model.baseUrl, 'agent.api_key': 'k' });
    cleanups.push(() => env.cleanup());
    const pidFile = join(env.home, 'slow.pid');
    writeFileSync(
      join(env.home, 'config.yaml'),
      JSON.stringify({
        tools: { commands: { slow: { command: `echo $$ > ${pidFile}; sleep 300`, timeout_seconds: 600, description: 'a slow check' } } },
      }),
      { mode: 0o600 },
    );
    model.respond((req, index) => {
      if (index === 0) return { toolCalls: [{ name: 'slow' }] };
      return lastToolResult(req) === undefined ? 'checked again' : 'the slow check ended';
    });
    return { env, model, pidFile };
  }

  /** The pid of the slow command once it runs. */
  async function slowCommandPid(pidFile: string): Promise<number> {
    return await waitFor(
      () => (existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== '' ? Number(readFileSync(pidFile, 'utf8')) : undefined),
      30_000,
      'the slow command running',
    );
  }

  /** The job's two runs once the second has ended, oldest first. */
  async function twoRuns(cron: ReturnType<typeof cronServiceFor>, jobId: string): Promise<CronRun[]> {
    return await waitFor(
      async () => {
        const all = (await cron.runs(jobId, 5)).sort((x, y) => x.due_at - y.due_at);
        return all.length === 2 ? all : undefined;
      },
      120_000,
      'the cancelled run and the new one (the first would run 300 s otherwise)',
    );
  }

  it("a new occurrence waiting for its worker's only turn slot — held by the run it replaces — cancels that run: its command killed, its journal gone, the run recorded cancelled; then it runs", async ({
    cleanups,
    expect,
  }) => {
    const { env, model, pidFile } = await slowToolJob(cleanups);
    const c = clients(env);
    cleanups.push(() => c.close());
    const cron = cronServiceFor(env.config, c, createLogger({ level: 'silent' }));
    // One agent slot; two command slots, so while the slow tool holds one the worker still fetches (a worker with
    // every slot taken fetches nothing: docs/CRON.md). The new occurrence is fetched here and waits for the agent slot.
    await spawnWorker(cleanups, env, { HERMES_WORKER_MAX_AGENT_TURNS: '1', HERMES_WORKER_MAX_COMMAND_TURNS: '2' });
    const job = await cron.add(
      { schedule: 'every 1h', prompt: 'check the build', name: 'watch', overlap: 'cancel_other', paused: true },
      cli,
    );
    await cron.runNow(job.id, cli);
    const pid = await slowCommandPid(pidFile);
    const [claim] = Object.keys(await c.redis.hgetall(c.keys.cronClaims(job.id)));
    expect(await c.redis.exists(c.keys.turnJournal(cronSessionId(job.id), claim!))).toBe(1); // the model's answer is journaled

    await cron.runNow(job.id, cli);
    const [cancelled, next] = await twoRuns(cron, job.id);
    expect(cancelled).toMatchObject({
      occurrence_id: claim,
      status: 'cancelled',
      reason: 'overlap',
      error: expect.stringMatching(/newer occurrence replaced it/),
    });
    expect(next).toMatchObject({ status: 'ok', output: 'checked again' });
    expect(next!.started_at!).toBeGreaterThanOrEqual(cancelled!.finished_at!);
    // Its command's process group was killed, its journal went with its commit; no failure was counted.
    await waitFor(() => (alive(pid) ? undefined : true), 10_000, 'the slow command killed');
    expect(await c.redis.exists(c.keys.turnJournal(cronSessionId(job.id), claim!))).toBe(0);
    expect(await cron.get(job.id)).toMatchObject({ failure_streak: 0 });
    expect(model.requests.filter((r) => lastToolResult(r) !== undefined)).toHaveLength(0); // the cancelled turn never went on
  }, 180_000);

  it("a new occurrence on another worker cancels the run where it runs — a script run holding its worker's only agent slot — and runs", async ({
    cleanups,
    expect,
  }) => {
    const env = testEnv();
    cleanups.push(() => env.cleanup());
    const pidFile = join(env.home, 'script.pid');
    const c = clients(env);
    cleanups.push(() => c.close());
    const cron = cronServiceFor(env.config, c, createLogger({ level: 'silent' }));
    // Worker A has one agent slot, taken by the script run; B has many. A fetch A may have had in flight when the
    // run started would bring it the next job: another job's run is made first and taken by that fetch (it then
    // waits for A's slot) or by B (and ends), so A fetches nothing more and the new occurrence is B's, whose gate
    // sends the cancel to A.
    const a = await spawnWorker(cleanups, env, { HERMES_WORKER_MAX_AGENT_TURNS: '1', HERMES_WORKER_MAX_COMMAND_TURNS: '1' });
    const job = await cron.add(
      {
        schedule: 'every 1h',
        prompt: 'deploy check',
        name: 'script',
        overlap: 'cancel_other',
        paused: true,
        script: `if [ -e ${pidFile} ]; then echo second; else echo $$ > ${pidFile}; sleep 300; fi`,
      },
      cli,
    );
    const filler = await cron.add({ schedule: 'every 1h', name: 'filler', paused: true, script: 'echo filler' }, cli);
    await cron.runNow(job.id, cli);
    const pid = await slowCommandPid(pidFile);
    const [claim] = Object.keys(await c.redis.hgetall(c.keys.cronClaims(job.id)));
    const { manualJobId } = await cron.runNow(filler.id, cli);
    const ticks = c.queues.forSession(cronSessionId(filler.id)).ticks;
    // A's fetch in flight, if it has one, takes the filler before B exists (B would race it for the filler and leave
    // A's fetch to take the new occurrence); one that has not come in 8 s (a starved machine included) is no fetch.
    await waitFor(async () => ((await ticks.getJobState(manualJobId)) === 'active' ? true : undefined), 8_000, '').catch(() => {});
    const b = await spawnWorker(cleanups, env);
    await waitFor(
      async () => ['active', 'completed', 'unknown'].includes(await ticks.getJobState(manualJobId)) || undefined,
      30_000,
      'the filler run taken by A (waiting for its slot) or run by B (then removed)',
    );
    await cron.runNow(job.id, cli);
    const [cancelled, next] = await twoRuns(cron, job.id);
    expect(cancelled).toMatchObject({ occurrence_id: claim, status: 'cancelled', reason: 'overlap' });
    expect(cancelled!.worker_id).toContain(`:${a.pid}:`);
    expect(next).toMatchObject({ status: 'ok', output: 'second' });
    // B's gate sent the cancel and deferred the occurrence until the cancelled run ended; then whichever worker
    // fetches first runs it: A too, its slot free again.
    expect(next!.worker_id).toMatch(new RegExp(`:(${a.pid}|${b.pid}):`));
    await waitFor(() => (alive(pid) ? undefined : true), 10_000, 'the script killed');
    await waitFor(async () => (await cron.runs(filler.id, 1))[0]?.status === 'ok' || undefined, 10_000, 'the filler run');
    expect(await cron.get(job.id)).toMatchObject({ failure_streak: 0 });
  }, 180_000);
});
