/**
 * Claim ahead for cron (worker/cron/cron-claim-ahead.ts): a scheduled occurrence held until due is claimed
 * `worker.claim_lead_ms` before its due time and its turn starts at the due time, never before; a pause made
 * before the due time still stops it (its claim forgotten, its lock free); a job busy at the claim time is
 * decided at the due time; one whose turn waits more than a second for a slot after the due time's read reads
 * the record again, so a pause then still stops it. The leads are seconds here so that a loaded machine still
 * acts inside them.
 */
import { describe } from 'vitest';
import { cronOccurrenceId, cronSessionId } from '../scheduler/cron/cron-job.ts';
import { startWorker } from './support/stack.ts';
import { openCronService, openTestCron, createTestDeps } from './support/cron-worker.ts';
import { testEnv } from './support/env.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { waitFor } from './support/wait-for.ts';
import { commandsDuring } from './support/redis-monitor.ts';
import { it, type CleanUp } from './support/cleanup.ts';

const LEADS = { 'cron.prefetch_lead_ms': 8_000, 'worker.claim_lead_ms': 6_000 };
const cli = { origin: { surface: 'cli' as const }, trusted: true };

async function setup(cleanups: CleanUp[], overrides: Record<string, unknown> = {}, modelDelayMs = 0) {
  const model = await startFakeOpenAI();
  const calledAt: number[] = [];
  model.respond(() => {
    calledAt.push(Date.now());
    return { delayMs: modelDelayMs, text: 'report sent' };
  });
  cleanups.push(() => model.close());
  const env = testEnv({ 'agent.base_url': model.baseUrl, 'agent.api_key': 'k', ...LEADS, ...overrides });
  cleanups.push(() => env.cleanup());
  const api = openCronService(env.config);
  cleanups.push(() => api.close());
  const worker = await startWorker(env);
  cleanups.push(() => worker.drain());
  /** A job due once, at a whole second at least 10 s from now (a minutely pattern: its lead is not cut to half a period). */
  const addDueSoon = async (due = Math.ceil((Date.now() + 10_000) / 1000) * 1000) => {
    const job = await api.service.add(
      { schedule: `${new Date(due).getUTCSeconds()} * * * * *`, tz: 'UTC', prompt: 'send the report', repeat: 1 },
      cli,
    );
    if (job.next_run_at !== due) throw new Error(`next_run_at ${job.next_run_at}, not ${due}`);
    return { job, due, occurrenceId: cronOccurrenceId(job.id, due, 'schedule') };
  };
  const claimOf = async (jobId: string, occurrenceId: string) => {
    const raw = await api.redis.hget(api.keys.cronClaims(jobId), occurrenceId);
    return raw === null ? null : (JSON.parse(raw) as { holder: string; at: number });
  };
  return { env, api, calledAt, addDueSoon, claimOf };
}

describe.concurrent('cron: claim ahead of the due time', () => {
  it('claims a held occurrence ahead and starts its turn at the due time, once', async ({ cleanups, expect }) => {
    const { env, api, calledAt, addDueSoon, claimOf } = await setup(cleanups);
    const { job, due, occurrenceId } = await addDueSoon();
    const claim = await waitFor(() => claimOf(job.id, occurrenceId), 15_000, 'the claim made ahead');
    expect(claim.at).toBeLessThan(due);
    expect(Date.now()).toBeLessThan(due);
    expect(await api.redis.get(api.keys.turnLock(cronSessionId(job.id)))).toBe(claim.holder); // the overlap lock taken with it
    // ...set to last until the due time plus its time-to-live (renewed from then on; a renewal now would leave at
    // most the time-to-live).
    const ttlMs = env.config.worker.lock_duration_ms;
    expect(await api.redis.pttl(api.keys.turnLock(cronSessionId(job.id)))).toBeGreaterThan(ttlMs + (due - Date.now()) - 1000);
    expect(await api.store.runs(job.id, 10)).toEqual([]); // claimed, not run
    const [run] = await waitFor(
      async () => ((await api.store.runs(job.id, 10)).length > 0 ? api.store.runs(job.id, 10) : undefined),
      20_000,
      'the run',
    );
    expect(run).toMatchObject({ due_at: due, status: 'ok', trigger: 'schedule', late: false, output: 'report sent' });
    expect(run!.started_at!).toBeGreaterThanOrEqual(due);
    expect(calledAt).toHaveLength(1);
    expect(calledAt[0]!).toBeGreaterThanOrEqual(due); // the model called at the due time, not at the claim
    await waitFor(async () => (await api.store.get(job.id))?.state === 'completed' || undefined, 10_000, 'the job completed');
    expect(await api.redis.exists(api.keys.turnLock(cronSessionId(job.id)))).toBe(0);
  });

  it('commits over the record its claim was decided on: after the turn, the record is read only by the commit script', async ({
    cleanups,
    expect,
  }) => {
    // A 3 s turn: the monitor is on before it ends. A job that stays scheduled: nothing after its commit writes it.
    const { env, api, calledAt } = await setup(cleanups, {}, 3000);
    const due = Math.ceil((Date.now() + 10_000) / 1000) * 1000;
    const job = await api.service.add(
      { schedule: `${new Date(due).getUTCSeconds()} * * * * *`, tz: 'UTC', prompt: 'send the report' },
      cli,
    );
    await waitFor(() => (calledAt.length === 1 ? true : undefined), 25_000, 'the turn');
    const recordKey = api.keys.cronJob(job.id);
    const seen = await commandsDuring(env.redisUrl, api.redis, recordKey, () =>
      waitFor(async () => (await api.store.runs(job.id, 10)).length > 0 || undefined, 20_000, 'the run'),
    );
    // The commit script's own read (the version check) and write; no read of the record before it.
    expect(seen.filter((c) => c.args[0] === recordKey).map((c) => c.name)).toEqual(['GET', 'SET']);
    expect((await api.store.runs(job.id, 10))[0]).toMatchObject({ due_at: due, status: 'ok' });
    expect((await api.store.get(job.id))!.state).toBe('scheduled');
  });

  it('a pause after the claim ahead, before the due time, stops the occurrence: no run, its claim forgotten, the lock free', async ({
    cleanups,
    expect,
  }) => {
    const { api, calledAt, addDueSoon, claimOf } = await setup(cleanups);
    const { job, due, occurrenceId } = await addDueSoon();
    await waitFor(() => claimOf(job.id, occurrenceId), 15_000, 'the claim made ahead');
    await api.service.pause(job.id);
    expect(Date.now()).toBeLessThan(due); // paused before the due time
    await waitFor(async () => (await api.queues.ticks.getActiveCount()) === 0 || undefined, 20_000, 'the held occurrence to end');
    expect(Date.now()).toBeGreaterThanOrEqual(due);
    expect(await api.store.runs(job.id, 10)).toEqual([]);
    expect(calledAt).toEqual([]);
    expect(await claimOf(job.id, occurrenceId)).toBeNull();
    expect(await api.redis.exists(api.keys.turnLock(cronSessionId(job.id)))).toBe(0);
    // Resumed, nothing of the occurrence is left in the way: the job is scheduled with its `--repeat 1` unused.
    const { job: resumed } = await api.service.resume(job.id, cli);
    expect(resumed).toMatchObject({ state: 'scheduled', repeat: { times: 1, completed: 0 } });
  });

  it('a job busy at the claim time is not claimed ahead: the due time decides, and it runs once the lock is free', async ({
    cleanups,
    expect,
  }) => {
    const { env, api, addDueSoon, claimOf } = await setup(cleanups);
    const { job, due, occurrenceId } = await addDueSoon();
    // Another run of the job holds its overlap lock until a moment after the due time.
    const other = createTestDeps(env.config);
    cleanups.push(() => other.close());
    const lock = (await other.lock.acquire(cronSessionId(job.id), 'another-run'))!;
    await waitFor(async () => ((await api.queues.ticks.getActiveCount()) > 0 ? true : undefined), 15_000, 'the occurrence fetched ahead');
    await waitFor(() => (Date.now() >= due + 500 ? true : undefined), 20_000, 'the due time');
    expect(await claimOf(job.id, occurrenceId)).toBeNull(); // not claimed ahead, nor at the due time: busy
    await lock.release();
    const [run] = await waitFor(
      async () => ((await api.store.runs(job.id, 10)).length > 0 ? api.store.runs(job.id, 10) : undefined),
      20_000,
      'the run',
    );
    expect(run).toMatchObject({ due_at: due, status: 'ok' });
  });

  it('a pause after the due time stops an occurrence whose turn waited more than a second for its slot: the record is read again', async ({
    cleanups,
    expect,
  }) => {
    // One agent turn at a time, and the first job's turn takes 4 s: the second job's turn waits for the slot
    // about 3 s past its due time, long after the read its due instant sent.
    const { api, calledAt, addDueSoon, claimOf } = await setup(cleanups, { 'worker.max_agent_turns': 1 }, 4000);
    const first = await addDueSoon();
    const second = await addDueSoon(first.due + 1000);
    await waitFor(() => claimOf(second.job.id, second.occurrenceId), 15_000, 'the second claim made ahead');
    await waitFor(() => (calledAt.length === 1 ? true : undefined), 20_000, 'the first turn');
    await waitFor(() => (Date.now() >= second.due + 300 ? true : undefined), 10_000, 'the second due time');
    await api.service.pause(second.job.id);
    const pausedAt = Date.now();
    const [run] = await waitFor(
      async () => ((await api.store.runs(first.job.id, 10)).length > 0 ? api.store.runs(first.job.id, 10) : undefined),
      20_000,
      'the first run',
    );
    expect(run).toMatchObject({ status: 'ok', due_at: first.due });
    await waitFor(async () => (await api.queues.ticks.getActiveCount()) === 0 || undefined, 20_000, 'the second occurrence to end');
    // The first turn held the slot more than a second past the pause: the second, read again, did not run.
    expect(calledAt).toHaveLength(1);
    expect(run!.finished_at!).toBeGreaterThan(pausedAt + 1000);
    expect(await api.store.runs(second.job.id, 10)).toEqual([]);
    expect(await claimOf(second.job.id, second.occurrenceId)).toBeNull();
  });
});

describe('cron: the claim takes the overlap lock in the same step (claim-cron-occurrence-5.lua)', () => {
  it("both or neither: a lock another holder has leaves the claim untaken; free, or the holder's own, both are taken for the time asked", async ({
    cleanups,
    expect,
  }) => {
    const { api } = openTestCron(cleanups);
    const job = await api.service.add({ schedule: '0 9 * * *', tz: 'UTC', prompt: 'send the report' }, cli);
    const lockKey = api.keys.turnLock(cronSessionId(job.id));
    const claimsKey = api.keys.cronClaims(job.id);
    const claim = (holder: string, occurrenceId: string, lockTtlMs?: number) =>
      api.store.claim({
        jobId: job.id,
        occurrenceId,
        holder,
        generation: job.generation,
        manual: false,
        dueAt: Date.now(),
        ...(lockTtlMs === undefined ? {} : { lockTtlMs }),
      });

    // Another holder has the lock: neither the claim nor the lock is taken.
    await api.redis.set(lockKey, 'other-job', 'PX', 60_000);
    expect(await claim('job-a', 'occ-1', 5_000)).toEqual({ status: 'locked' });
    expect(await api.redis.hget(claimsKey, 'occ-1')).toBeNull();
    expect(await api.redis.get(lockKey)).toBe('other-job');
    // Without the lock asked for, the same claim is made and the lock left as it is (the gate's claim).
    expect(await claim('job-a', 'occ-1')).toMatchObject({ status: 'ok', attempt: 1 });
    expect(await api.redis.get(lockKey)).toBe('other-job');

    // A free lock is taken with the claim, for the time asked.
    await api.redis.del(lockKey);
    expect(await claim('job-b', 'occ-2', 5_000)).toMatchObject({ status: 'ok', attempt: 1 });
    expect(await api.redis.get(lockKey)).toBe('job-b');
    const ttl = await api.redis.pttl(lockKey);
    expect(ttl).toBeGreaterThan(4_000);
    expect(ttl).toBeLessThanOrEqual(5_000);
    // The same holder again (a retried job): its lock is set anew and the claim counts the attempt.
    expect(await claim('job-b', 'occ-2', 9_000)).toMatchObject({ status: 'ok', attempt: 2 });
    expect(await api.redis.pttl(lockKey)).toBeGreaterThan(8_000);
    // A claim refused for its own reason takes no lock: another holder's claim of the same occurrence.
    await api.redis.del(lockKey);
    expect(await claim('job-c', 'occ-2', 5_000)).toEqual({ status: 'claimed' });
    expect(await api.redis.exists(lockKey)).toBe(0);
  });
});
