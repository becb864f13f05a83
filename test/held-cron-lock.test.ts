/**
 * A cron occurrence held until its due time has its job lock set once to last until its due time plus
 * `worker.lock_duration_ms`, not renewed while it is held (worker/worker-process.ts, `holdLock`); renewal
 * resumes at the due time. A worker lost during the lead leaves its held occurrence locked until then:
 * another worker takes it over after its due time and runs it once, late, inside the misfire grace
 * (docs/RELIABILITY.md, "A held tick's lock lasts past its due time"). Real Redis, real BullMQ, a local model server.
 */
import { describe } from 'vitest';
import { clients, spawnWorker, startWorker } from './support/stack.ts';
import { openCronService } from './support/cron-worker.ts';
import { PRODUCT_LOCK, testEnv } from './support/env.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { waitFor } from './support/wait-for.ts';
import { commandsDuring } from './support/redis-monitor.ts';
import { it, type CleanUp } from './support/cleanup.ts';

/** The product's `worker.lock_duration_ms` (renewed every 1 s; stall check every 1 s in the tests). */
const LOCK_MS = 3000;
const cli = { origin: { surface: 'cli' as const }, trusted: true };

async function setup(cleanups: CleanUp[], turnMs: number) {
  const model = await startFakeOpenAI();
  const calledAt: number[] = [];
  model.respond(() => {
    calledAt.push(Date.now());
    return { delayMs: turnMs, text: 'report sent' };
  });
  cleanups.push(() => model.close());
  // The cron lead is seconds, so a loaded machine still fetches the occurrence well before it is due and the
  // steps below fit between the fetch and the due time (beside two other copies of the suite, 8 s did not).
  const env = testEnv({
    'agent.base_url': model.baseUrl,
    'agent.api_key': 'k',
    'cron.prefetch_lead_ms': 14_000,
    ...PRODUCT_LOCK, // a takeover comes as it does in production
  });
  cleanups.push(() => env.cleanup());
  if (env.config.worker.lock_duration_ms !== LOCK_MS) throw new Error(`the product's lock is ${env.config.worker.lock_duration_ms} ms`);
  const api = openCronService(env.config);
  cleanups.push(() => api.close());
  const c = clients(env);
  cleanups.push(() => c.close());
  /** A job due once, at a whole second at least 18 s from now (a minutely pattern: its lead is not cut to half a period). */
  const addDueSoon = async () => {
    const due = Math.ceil((Date.now() + 18_000) / 1000) * 1000;
    const job = await api.service.add(
      { schedule: `${new Date(due).getUTCSeconds()} * * * * *`, tz: 'UTC', prompt: 'send the report', repeat: 1 },
      cli,
    );
    if (job.next_run_at !== due) throw new Error(`next_run_at ${job.next_run_at}, not ${due}`);
    return { job, due };
  };
  /** The lock key of the one active (fetched) job of the ticks queue, once there is one. */
  const heldLockKey = async () => {
    const [active] = await c.queues.ticks.getJobs(['active']);
    return active ? `${c.keys.bullPrefix}:ticks:${active.id}:lock` : undefined;
  };
  const firstRun = async (jobId: string) => {
    const runs = await api.store.runs(jobId, 10);
    return runs.length > 0 ? runs : undefined;
  };
  return { env, api, calledAt, addDueSoon, heldLockKey, firstRun };
}

describe.concurrent('held cron occurrence: its lock lasts past its due time, not renewed while held', () => {
  it('sets the lock once to its due time plus the lock duration and does not renew it while held; renewal resumes at the due time', async ({
    cleanups,
    expect,
  }) => {
    // The turn outlasts the lock set ahead (due + 3 s): it commits only if renewal resumed when the tick woke.
    const { env, api, calledAt, addDueSoon, heldLockKey, firstRun } = await setup(cleanups, 2 * LOCK_MS);
    const worker = await startWorker(env);
    cleanups.push(() => worker.drain());
    const { job, due } = await addDueSoon();
    const lockKey = await waitFor(heldLockKey, 15_000, 'the occurrence fetched ahead');
    await waitFor(() => (worker.deps.turns.admission.held === 1 ? true : undefined), 10_000, 'the occurrence held');
    // Set to last until the due time plus the lock duration (a renewal would set it to the lock duration).
    const pttl = await waitFor(
      async () => {
        const ms = await api.redis.pttl(lockKey);
        return ms > LOCK_MS + 1000 ? ms : undefined;
      },
      10_000,
      'the held lock set past the due time',
    );
    const readAt = Date.now();
    expect(readAt + pttl).toBeGreaterThanOrEqual(due + LOCK_MS - 200);
    expect(readAt + pttl).toBeLessThanOrEqual(due + LOCK_MS + 200);
    expect(due - Date.now()).toBeGreaterThan(3500); // room for the window below, before the due time
    // Three renewal periods while held: the lock is not written (BullMQ's renewal: GET, SET, SREM per job).
    const seen = await commandsDuring(env.redisUrl, api.redis, lockKey, () => new Promise((r) => setTimeout(r, 3000)));
    expect(Date.now()).toBeLessThan(due);
    expect(seen.filter((cmd) => cmd.name === 'SET' || cmd.name === 'PEXPIRE')).toEqual([]);
    const left = await api.redis.pttl(lockKey);
    expect(Date.now() + left).toBeGreaterThanOrEqual(due + LOCK_MS - 200); // still the lock set ahead, counting down
    const [run] = await waitFor(() => firstRun(job.id), 30_000, 'the run');
    expect(run).toMatchObject({ due_at: due, status: 'ok', late: false, output: 'report sent' });
    expect(run!.started_at!).toBeGreaterThanOrEqual(due);
    expect(calledAt).toHaveLength(1);
  });

  it('a drain hands the held occurrence back at once with its lock set ahead; another worker runs it once, on time', async ({
    cleanups,
    expect,
  }) => {
    const { env, api, calledAt, addDueSoon, heldLockKey, firstRun } = await setup(cleanups, 0);
    const first = await startWorker(env);
    cleanups.push(() => first.drain());
    const { job, due } = await addDueSoon();
    const lockKey = await waitFor(heldLockKey, 20_000, 'the occurrence fetched ahead');
    await waitFor(async () => ((await api.redis.pttl(lockKey)) > LOCK_MS + 1000 ? true : undefined), 10_000, 'the held lock set');
    // The other worker is up before the hand-back, so when it runs the occurrence says how soon it was free,
    // not how long a worker takes to start on a loaded machine.
    const second = await startWorker(env);
    cleanups.push(() => second.drain());
    const firstToken = await api.redis.get(lockKey);
    await first.drain();
    expect(Date.now()).toBeLessThan(due);
    // Handed back: the first worker's lock released (not left to lapse after the due time); the other worker
    // may hold the occurrence by now, under a lock of its own.
    expect(firstToken).not.toBeNull();
    expect(await api.redis.get(lockKey)).not.toBe(firstToken);
    const [run] = await waitFor(() => firstRun(job.id), due - Date.now() + 30_000, 'the run on the other worker');
    expect(run).toMatchObject({ due_at: due, status: 'ok', output: 'report sent' });
    expect(run!.started_at!).toBeGreaterThanOrEqual(due);
    expect(run!.started_at!).toBeLessThan(due + LOCK_MS); // not after the lock set ahead lapsed: it was handed back
    await new Promise((r) => setTimeout(r, 2000));
    expect(await api.store.runs(job.id, 10)).toHaveLength(1);
    expect(calledAt).toHaveLength(1);
  });

  it('a worker killed while it holds the occurrence: another worker runs it once, after its due time, inside the misfire grace', async ({
    cleanups,
    expect,
  }) => {
    const { env, api, calledAt, addDueSoon, heldLockKey, firstRun } = await setup(cleanups, 0);
    const victim = await spawnWorker(cleanups, env);
    const { job, due } = await addDueSoon();
    const lockKey = await waitFor(heldLockKey, 15_000, 'the occurrence fetched ahead by the only worker');
    // Its lock set ahead (to last past the due time) before the worker dies.
    await waitFor(async () => ((await api.redis.pttl(lockKey)) > LOCK_MS + 1000 ? true : undefined), 10_000, 'the held lock set');
    const survivor = await startWorker(env);
    cleanups.push(() => survivor.drain());
    process.kill(victim.pid!, 'SIGKILL');
    expect(Date.now()).toBeLessThan(due - LOCK_MS); // killed early in the lead
    const [run] = await waitFor(() => firstRun(job.id), due - Date.now() + 30_000, 'the run on the other worker');
    // Taken over only once the lock set ahead lapsed (due + 3 s) and a stall check found it: late, and run.
    expect(run).toMatchObject({ due_at: due, status: 'ok', trigger: 'schedule', late: true, output: 'report sent' });
    expect(run!.started_at!).toBeGreaterThanOrEqual(due + LOCK_MS);
    await waitFor(async () => (await api.store.get(job.id))?.state === 'completed' || undefined, 10_000, 'the job completed');
    await new Promise((r) => setTimeout(r, 2000)); // a second run would have come by now
    expect(await api.store.runs(job.id, 10)).toHaveLength(1);
    expect(calledAt).toHaveLength(1);
  });
});
