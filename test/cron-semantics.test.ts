/**
 * Cron semantics against a real Redis and real BullMQ workers (docs/DESIGN.md §7):
 * croner fire times, run records, delivery, `[SILENT]`, `--repeat`, misfire
 * skip/once after an outage, overlap skip and queue, pause/remove with the next
 * job already waiting, and field reports F11 and F12. The rules themselves are
 * pure functions tested with an injected clock in cron-rules.test.ts; each test
 * here proves one rule's wiring end to end, on the shortest intervals the config
 * allows, waiting on run records and BullMQ job state (a run that must last is
 * held by the test, not slept through).
 */
import { createServer } from 'node:http';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, afterAll, describe } from 'vitest';
import { isoUtc, nextOccurrence, nextOccurrences, formatInZone } from '../scheduler/cron/cron-engine.ts';
import { decideOccurrence } from '../scheduler/cron/misfire.ts';
import { cronSessionId, type CronRun } from '../scheduler/cron/cron-job.ts';
import { parseSchedule } from '../scheduler/cron/schedule-grammar.ts';
import type { CronJobInput } from '../scheduler/cron/cron-input.ts';
import { ScheduleInputError } from '../scheduler/errors/schedule-input-error.ts';
import { outboundJobId } from '../scheduler/delivery/outbound.ts';
import { schedulerJobMillis } from '../scheduler/store/queues.ts';
import { startCronWorker, openCronService, type TestCronWorker } from './support/cron-worker.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { lastUserText, startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import { sleep, waitFor } from './support/wait-for.ts';
import { it as withCleanups, type CleanUp } from './support/cleanup.ts';
import { cronJobFixture } from './support/record-fixtures.ts';
import { refusedPort } from './support/refused-port.ts';

/**
 * Replies delivered to a job's `local` target: its stream's `reply` events (the stream also holds
 * the turn's `model.called` and tool events).
 */
async function localReplies(
  api: {
    redis: { xrange(key: string, start: string, end: string): Promise<Array<[string, string[]]>> };
    keys: { events(id: string): string };
  },
  jobId: string,
): Promise<number> {
  const entries = await api.redis.xrange(api.keys.events(`cron:${jobId}`), '-', '+');
  return entries.filter(([, fields]) => fields[fields.indexOf('type') + 1] === 'reply').length;
}

const cli = { origin: { surface: 'cli' as const }, trusted: true };

let model: FakeOpenAI;
beforeAll(async () => {
  model = await startFakeOpenAI();
  model.respond((req) => {
    const prompt = lastUserText(req);
    return prompt.includes('quiet') ? '[SILENT]' : `done: ${prompt}`;
  });
});
afterAll(async () => {
  await model.close();
});

/**
 * `it` with the test's own clean-ups and held runs (`holds`: let go when the test ends, before its clean-ups run,
 * as a worker closes only when its runs end). Each test has its own Redis prefix, workers and jobs, so most of
 * them run side by side (most of their time is spent waiting for occurrences to come due). The tests that hold
 * runs to a 1–2 s cadence or a 1.5 s grace ("cron runs", "misfires", "the worker side of the job scheduler") do
 * not: their workers share this process's event loop with the others', and beside a second copy of the suite a
 * run came late enough to be skipped or deferred.
 */
const it = withCleanups.extend<{ holds: Array<() => void> }>({
  // Depends on `cleanups`, so it is torn down first.
  holds: async ({ cleanups }, use) => {
    const holds: Array<() => void> = [];
    await use(holds);
    for (const release of holds.splice(0)) release();
    void cleanups;
  },
});

/** A model whose first answer is held until `release()`: a run that lasts exactly as long as the test needs. */
async function heldModel(cleanups: CleanUp[], holds: Array<() => void>): Promise<{ model: FakeOpenAI; release: () => void }> {
  const held = await startFakeOpenAI();
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  held.respond(async (req, index) => {
    if (index === 0) await gate;
    return `done: ${lastUserText(req)}`;
  });
  holds.push(release);
  cleanups.push(() => held.close());
  return { model: held, release };
}

function setup(cleanups: CleanUp[], overrides: Record<string, unknown> = {}) {
  const env: TestEnv = testEnv({
    'agent.base_url': model.baseUrl,
    'cron.min_interval_seconds': 1,
    ...overrides,
  });
  const api = openCronService(env.config);
  cleanups.push(() => env.cleanup());
  cleanups.push(() => api.close());
  const worker = async (concurrency = 8): Promise<TestCronWorker> => {
    const w = await startCronWorker(env.config, { concurrency });
    cleanups.push(() => w.close());
    return w;
  };
  const runsOf = async (id: string) => (await api.store.runs(id, 1000)).sort((a, b) => a.due_at - b.due_at);
  return { env, api, worker, runsOf };
}

describe('cron runs (real BullMQ)', () => {
  it('fires at the croner times, records each run once and delivers it to the local stream', async ({ cleanups, expect }) => {
    const { api, worker, runsOf } = setup(cleanups);
    await worker();
    // Every 2 s: a run on a loaded machine may take a second, and must not overlap the next occurrence.
    const job = await api.service.add({ schedule: '*/2 * * * * *', prompt: 'check the build', repeat: 2, tz: 'America/New_York' }, cli);
    const expected = nextOccurrences(job.schedule, job.tz, job.created_at, 2);
    expect(job.next_run_at).toBe(expected[0]);
    // The job scheduler holds a croner time: the first, or on a slow machine a later one — the first may have fired
    // already, and an occurrence due within the prefetch lead of the arming has a job of its own (repeat-strategy.ts).
    expect(nextOccurrences(job.schedule, job.tz, job.created_at, 3)).toContain(await api.store.schedulerNext(job.id));
    await waitFor(async () => (await api.store.get(job.id))?.state === 'completed', 15_000, 'job completed');
    // A run still going when the next occurrence comes (a loaded machine) has it recorded as an overlap skip.
    // Every occurrence from the first is recorded once, in croner's order, until two have run.
    const all = await runsOf(job.id);
    expect(all.map((r) => r.due_at)).toEqual(nextOccurrences(job.schedule, job.tz, job.created_at, all.length));
    expect(all.filter((r) => r.status === 'skipped').every((r) => r.reason === 'overlap')).toBe(true);
    const runs = all.filter((r) => r.status !== 'skipped');
    expect(runs).toHaveLength(2);
    expect(runs[0]!.due_at).toBe(expected[0]);
    for (const r of runs) {
      expect(r).toMatchObject({ status: 'ok', trigger: 'schedule', output: 'done: check the build', silent: false });
      expect(r.started_at!).toBeGreaterThanOrEqual(r.due_at);
      expect(r.deliveries).toEqual([{ target: 'local', status: 'delivered', evidence: expect.stringMatching(/^\d+-\d+$/) }]);
    }
    expect(await localReplies(api, job.id)).toBe(2);
    const done = (await api.store.get(job.id))!;
    expect(done).toMatchObject({
      state: 'completed',
      repeat: { times: 2, completed: 2 },
      next_run_at: null,
      last_status: 'ok',
      failure_streak: 0,
    });
    expect(await api.store.schedulerNext(job.id)).toBeUndefined();
  });

  it('records a [SILENT] reply without delivering it', async ({ cleanups, expect }) => {
    const { api, worker, runsOf } = setup(cleanups);
    await worker();
    const job = await api.service.add({ schedule: 'in 1s', prompt: 'stay quiet unless broken' }, cli);
    await waitFor(async () => (await runsOf(job.id)).length === 1, 10_000, 'run');
    const [run] = await runsOf(job.id);
    expect(run).toMatchObject({ status: 'ok', silent: true, output: '[SILENT]', deliveries: [{ target: 'local', status: 'silent' }] });
    expect(await localReplies(api, job.id)).toBe(0);
    expect((await api.store.get(job.id))!.state).toBe('completed');
  });

  it('runs a --script job as a command turn, only when created from a trusted surface', async ({ cleanups, expect }) => {
    const { api, worker, runsOf } = setup(cleanups);
    await worker();
    await expect(api.service.add({ schedule: 'in 1s', script: 'echo hi' }, { origin: { surface: 'api' }, trusted: false })).rejects.toThrow(
      /^Jobs with a `script` \(command turns\) can only be created from the CLI or the config file\.$/,
    );
    const job = await api.service.add({ schedule: 'in 1s', script: 'echo "job $HERMES_CRON_JOB_ID"; cat', prompt: 'from stdin' }, cli);
    await waitFor(async () => (await runsOf(job.id)).length === 1, 10_000, 'run');
    expect((await runsOf(job.id))[0]).toMatchObject({ status: 'ok', output: `job ${job.id}\nfrom stdin` });
  });

  it('records a failing script as an error with a failure streak', async ({ cleanups, expect }) => {
    const { api, worker, runsOf } = setup(cleanups);
    await worker();
    const job = await api.service.add({ schedule: 'every 1s', script: 'echo broken >&2; exit 3', repeat: 2 }, cli);
    await waitFor(async () => (await api.store.get(job.id))?.state === 'completed', 10_000, 'two runs');
    const runs = await runsOf(job.id);
    expect(runs.map((r) => r.status)).toEqual(['error', 'error']);
    expect(runs[0]!.error).toMatch(/exited with code 3: broken/);
    expect(await api.store.get(job.id)).toMatchObject({
      failure_streak: 2,
      last_status: 'error',
      last_error: expect.stringMatching(/code 3/),
    });
  });

  it('--repeat N is a budget of N runs even when runs overlap: runs in flight count against it (--overlap allow)', async ({
    cleanups,
    holds,
    expect,
  }) => {
    const { env, api, worker, runsOf } = setup(cleanups);
    const w = await worker();
    const starts = join(env.home, 'starts');
    const gate = join(env.home, 'gate');
    holds.push(() => writeFileSync(gate, ''));
    const started = () => (existsSync(starts) ? readFileSync(starts, 'utf8').trim().split('\n') : []);
    // Each run lasts until the test lets it finish: both runs are in flight when the next occurrence is due.
    const job = await api.service.add(
      {
        schedule: 'every 1s',
        script: `echo "$HERMES_CRON_OCCURRENCE_ID" >> ${starts}; while [ ! -e ${gate} ]; do sleep 0.05; done; echo ran`,
        repeat: 2,
        overlap: 'allow',
      },
      cli,
    );
    const refused = await waitFor(() => w.results.find((r) => r.reason === 'repeat-used'), 15_000, 'an occurrence refused by the budget');
    await waitFor(() => started().length === 2, 5_000, 'both runs to start their scripts');
    expect(await runsOf(job.id)).toEqual([]); // neither run has finished: the two in flight used the budget
    writeFileSync(gate, '');
    await waitFor(async () => (await api.store.get(job.id))?.state === 'completed', 15_000, 'the job to complete');
    const runs = await runsOf(job.id);
    expect(runs.map((r) => r.status)).toEqual(['ok', 'ok']);
    expect(runs.map((r) => r.occurrence_id)).toEqual(started());
    expect(runs[1]!.started_at!).toBeLessThan(runs[0]!.finished_at!); // they overlapped
    const refusedDue = Number(refused.occurrenceId.split(':').pop());
    expect(refusedDue).toBeGreaterThan(runs[1]!.due_at);
    expect(refusedDue).toBeLessThan(runs[0]!.finished_at!); // due while both ran
    expect(started()).toHaveLength(2);
    expect((await api.store.get(job.id))!.repeat).toEqual({ times: 2, completed: 2 });
  });

  it('the --repeat budget at claim time: runs in flight count, skips and manual runs do not', async ({ cleanups, expect }) => {
    const { api } = setup(cleanups);
    const job = await api.service.add({ schedule: 'every 1h', prompt: 'p', repeat: 2, overlap: 'allow' }, cli);
    const claim = (n: number, extra: { skip?: boolean; manual?: boolean; holder?: string } = {}) =>
      api.store.claim({
        jobId: job.id,
        occurrenceId: `occ-${n}`,
        holder: extra.holder ?? `h-${n}`,
        generation: job.generation,
        manual: extra.manual ?? false,
        dueAt: n,
        skip: extra.skip,
      });
    expect(await claim(1)).toEqual({ status: 'ok', attempt: 1, journalEntries: 0 });
    expect(await claim(2, { skip: true })).toEqual({ status: 'ok', attempt: 1, journalEntries: 0 });
    expect(await claim(3, { manual: true })).toEqual({ status: 'ok', attempt: 1, journalEntries: 0 });
    expect(await claim(4)).toEqual({ status: 'ok', attempt: 1, journalEntries: 0 }); // 1 run in flight + this one = 2
    expect(await claim(5)).toEqual({ status: 'repeat-used' });
    expect(await claim(6, { skip: true })).toEqual({ status: 'repeat-used' });
    expect(await claim(1, { holder: 'other' })).toEqual({ status: 'claimed' });
    expect(await claim(1)).toEqual({ status: 'ok', attempt: 2, journalEntries: 0 }); // the same holder again: its next attempt
    // A retry finds what the earlier attempt journalled: the claim answers how many entries (0 spares the turn its read).
    await api.redis.rpush(api.keys.turnJournal(cronSessionId(job.id), 'occ-1'), '{"a":1}', '{"a":2}');
    await api.redis.rpush(api.keys.turnJournal(cronSessionId(job.id), 'occ-10'), '{"a":1}'); // another occurrence's
    expect(await claim(1)).toEqual({ status: 'ok', attempt: 3, journalEntries: 2 });
  });

  it('the first occurrence the record announces runs even when it passed before the job scheduler was written', async ({
    cleanups,
    expect,
  }) => {
    const { env, worker, runsOf } = setup(cleanups);
    await worker();
    // A store write that lands 3 s after the record's times were computed (a busy machine): of the
    // occurrences every 2 s from then, the first has passed when the scheduler is written, the second not.
    const slow = openCronService(env.config, () => Date.now() - 3_000);
    cleanups.push(() => slow.close());
    const job = await slow.service.add({ schedule: 'every 2s', prompt: 'first one counts', repeat: 2, tz: 'UTC' }, cli);
    expect(job.next_run_at!).toBeLessThan(Date.now());
    await waitFor(async () => (await slow.store.get(job.id))?.state === 'completed', 15_000, 'the job to complete');
    const runs = await runsOf(job.id);
    expect(runs.map((r) => [r.due_at, r.status])).toEqual(nextOccurrences(job.schedule, job.tz, job.created_at, 2).map((d) => [d, 'ok']));
  });

  it('delivers to a webhook only on a 2xx, and queues Telegram targets once', async ({ cleanups, expect }) => {
    const { api, worker, runsOf } = setup(cleanups, { 'delivery.webhook_allow': ['127.0.0.1'] }); // the receiver is local
    await worker();
    const received: Array<{ key: string | undefined; body: Record<string, unknown> }> = [];
    const hook = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push({ key: req.headers['idempotency-key'] as string | undefined, body: JSON.parse(body) });
        res.writeHead(req.url === '/ok' ? 204 : 500).end();
      });
    });
    await new Promise<void>((r) => hook.listen(0, '127.0.0.1', () => r()));
    cleanups.push(() => new Promise<void>((r) => hook.close(() => r())));
    const port = (hook.address() as { port: number }).port;
    const job = await api.service.add(
      {
        schedule: 'in 1s',
        prompt: 'report',
        deliver: `local,telegram:-1001:7,http://127.0.0.1:${port}/ok,http://127.0.0.1:${port}/fail`,
      },
      cli,
    );
    await waitFor(async () => (await runsOf(job.id))[0]?.deliveries.every((d) => d.status !== 'pending'), 10_000, 'deliveries');
    const [run] = await runsOf(job.id);
    expect(run!.deliveries).toEqual([
      { target: 'local', status: 'delivered', evidence: expect.any(String) },
      { target: 'telegram:-1001:7', status: 'queued', evidence: expect.stringContaining('outbound job out|') },
      { target: `http://127.0.0.1:${port}/ok`, status: 'delivered', evidence: 'HTTP 204' },
      { target: `http://127.0.0.1:${port}/fail`, status: 'failed', error: 'HTTP 500' },
    ]);
    expect(received.map((r) => r.key)).toEqual([run!.occurrence_id, run!.occurrence_id]);
    expect(received[0]!.body).toMatchObject({ job_id: job.id, output: 'done: report', status: 'ok' });
    const out = await worker().then((w) => w.deps.outboundTelegram.getJob(outboundJobId(`${run!.occurrence_id}>telegram:-1001:7`)));
    expect(out?.data).toMatchObject({
      platform: 'telegram',
      chatId: '-1001',
      threadId: '7',
      text: 'done: report',
      sessionId: `cron:${job.id}`,
    });
  });
});

describe('misfires after an outage (docs/DESIGN.md §7 Misfires)', () => {
  // Every 4 s with a grace of 3 s (the lower clamp; half the period is 2 s). The outage lasts until
  // 0.3 s after the second occurrence: both are missed, and the job scheduler holds only the first (the
  // next job is made when one is picked up). The worker starts 3.7 s before the third is due; the runs
  // after it may be up to 3 s late (beside two other copies of the suite, 1.5 s with a 2 s period were not
  // enough: a run late past the grace is another misfire).
  // The two outages are waited out side by side (each test with its own job and worker), apart from the other tests.
  const PERIOD_MS = 4_000;
  const GRACE_MS = 3_000;
  const outage = async (createdAt: number) => {
    await sleep(createdAt + 2 * PERIOD_MS + 300 - Date.now()); // no worker runs: this is the outage itself
    return Date.now();
  };

  it.concurrent('--misfire once runs exactly one catch-up, then the cadence resumes on time', async ({ cleanups, expect }) => {
    const { api, worker, runsOf } = setup(cleanups, { 'cron.misfire_grace_min_seconds': GRACE_MS / 1000 });
    const job = await api.service.add({ schedule: 'every 4s', prompt: 'tick' }, cli);
    const anchor = job.created_at;
    const restartedAt = await outage(anchor);
    await worker();
    await waitFor(async () => (await runsOf(job.id)).length >= 2, 20_000, 'the catch-up and the next run');
    await api.service.pause(job.id);
    const runs = await runsOf(job.id);
    // The first missed occurrence is the catch-up; the second was coalesced into it.
    expect(runs[0]).toMatchObject({ trigger: 'catch-up', status: 'ok', late: true, due_at: anchor + PERIOD_MS });
    expect(runs[0]!.started_at!).toBeGreaterThanOrEqual(restartedAt);
    expect(runs[0]!.lateness_ms).toBe(runs[0]!.started_at! - runs[0]!.due_at);
    expect(runs[0]!.lateness_ms).toBeGreaterThan(GRACE_MS);
    expect(runs.filter((r) => r.trigger === 'catch-up')).toHaveLength(1);
    expect(runs.some((r) => r.due_at === anchor + 2 * PERIOD_MS)).toBe(false);
    // Next: the first occurrence after the restart, then every 2 s, each within the grace window.
    const after = runs.slice(1);
    expect(after[0]!.due_at).toBe(nextOccurrence(job.schedule, job.tz, restartedAt));
    for (const r of after) {
      expect(r).toMatchObject({ trigger: 'schedule', status: 'ok' });
      expect(r.started_at!).toBeGreaterThanOrEqual(r.due_at);
      expect(r.lateness_ms).toBeLessThanOrEqual(GRACE_MS);
      expect((r.due_at - anchor) % PERIOD_MS).toBe(0);
    }
    expect(new Set(runs.map((r) => r.due_at)).size).toBe(runs.length);
  });

  it.concurrent('--misfire skip records the missed occurrence as skipped and runs the next one on time', async ({ cleanups, expect }) => {
    const { api, worker, runsOf } = setup(cleanups, { 'cron.misfire_grace_min_seconds': GRACE_MS / 1000 });
    const job = await api.service.add({ schedule: 'every 4s', prompt: 'tick', misfire: 'skip' }, cli);
    const restartedAt = await outage(job.created_at);
    await worker();
    await waitFor(async () => (await runsOf(job.id)).some((r) => r.status === 'ok'), 20_000, 'the next run');
    await api.service.pause(job.id);
    // A run that started before the pause commits after it: read once none is in flight.
    await waitFor(async () => (await api.queues.ticks.getActiveCount()) === 0 || undefined, 15_000, 'no run in flight');
    const runs = await runsOf(job.id);
    expect(runs[0]).toMatchObject({
      status: 'skipped',
      reason: 'misfire',
      due_at: job.created_at + PERIOD_MS,
      started_at: null,
      output: null,
    });
    expect(runs[0]!.lateness_ms).toBeGreaterThanOrEqual(restartedAt - runs[0]!.due_at);
    expect(runs[1]).toMatchObject({ status: 'ok', trigger: 'schedule', due_at: nextOccurrence(job.schedule, job.tz, restartedAt) });
    expect(runs.slice(1).every((r) => r.status === 'ok' && r.trigger === 'schedule' && r.lateness_ms <= GRACE_MS)).toBe(true);
    expect(await localReplies(api, job.id)).toBe(runs.length - 1);
  });

  it('a late occurrence within the grace window runs and is marked late', ({ expect }) => {
    const schedule = parseSchedule('every 10m', { tz: 'UTC', now: 0, minIntervalSeconds: 60 });
    const job = cronJobFixture({ schedule, misfire: 'skip', now: 0 });
    const grace = { graceMinMs: 120_000, graceMaxMs: 7_200_000 };
    const at = (lateMs: number) =>
      decideOccurrence({ job, dueAt: 600_000, generation: 1, trigger: 'schedule', periodMs: 600_000, now: 600_000 + lateMs, grace });
    expect(at(299_000)).toEqual({ action: 'run', latenessMs: 299_000, late: true, catchUp: false }); // grace = 5 min
    expect(at(301_000)).toMatchObject({ action: 'skip', reason: 'misfire', graceMs: 300_000 });
    expect(at(500)).toMatchObject({ action: 'run', late: false });
    expect(
      decideOccurrence({
        job: { ...job, state: 'paused' },
        dueAt: 600_000,
        generation: 1,
        trigger: 'schedule',
        periodMs: 600_000,
        now: 9e9,
        grace,
      }),
    ).toEqual({ action: 'drop', reason: 'paused' });
    expect(
      decideOccurrence({
        job: { ...job, last_due_at: 600_000 },
        dueAt: 600_000,
        generation: 1,
        trigger: 'schedule',
        periodMs: 600_000,
        now: 9e9,
        grace,
      }),
    ).toEqual({ action: 'drop', reason: 'coalesced' });
  });
});

describe.concurrent('F11: after a restart nothing fires before it is due', () => {
  it('stop at 10:00, restart at 10:57, job 0 17 * * * → it waits for 17:00 (pure decision)', ({ expect }) => {
    const tz = 'Europe/Berlin';
    const created = Date.parse('2026-06-01T07:00:00Z'); // 09:00 Berlin
    const schedule = parseSchedule('0 17 * * *', { tz, now: created, minIntervalSeconds: 60 });
    const job = cronJobFixture({ schedule, tz, now: created });
    const due = job.next_run_at!;
    expect(isoUtc(due)).toBe('2026-06-01T15:00:00Z'); // 17:00 Berlin
    const restart = Date.parse('2026-06-01T08:57:00Z'); // 10:57 Berlin
    expect(
      decideOccurrence({
        job,
        dueAt: due,
        generation: 1,
        trigger: 'schedule',
        periodMs: 86_400_000,
        now: restart,
        grace: { graceMinMs: 120_000, graceMaxMs: 7_200_000 },
      }),
    ).toEqual({ action: 'wait', untilMs: due });
  });

  it('the prefetch lead: a job scheduler releases each occurrence a lead early (half a short period); the worker holds it and starts on the due time', async ({
    cleanups,
    expect,
  }) => {
    const { api, worker, runsOf } = setup(cleanups);
    const w = await worker();
    // Every 4 s: the lead is half the period, 2 s (cron.prefetch_lead_ms 10 s is more than that).
    const job = await api.service.add({ schedule: 'every 4s', prompt: 'on the dot', tz: 'UTC', repeat: 2 }, cli);
    const scheduler = await api.queues.ticks.getJobScheduler(`cron:${job.id}`);
    expect(scheduler?.pattern).toMatch(/^lead:2000:every:4000:/);
    const due = (await api.store.schedulerNext(job.id))!;
    expect(Number(scheduler!.next)).toBe(due - 2_000);
    const id = `repeat:cron:${job.id}:${due - 2_000}`;
    await waitFor(async () => (await api.queues.ticks.getJob(id))?.isActive(), 10_000, 'the worker to take the job before it is due');
    expect(Date.now()).toBeLessThan(due); // taken early …
    expect((await runsOf(job.id)).filter((r) => r.due_at === due)).toEqual([]); // … and held, not run
    await waitFor(async () => (await api.store.get(job.id))?.state === 'completed', 15_000, 'the job to complete');
    const runs = (await runsOf(job.id)).filter((r) => r.status === 'ok');
    expect(runs.map((r) => r.due_at)).toContain(due);
    for (const r of runs) expect(r.started_at!).toBeGreaterThanOrEqual(r.due_at);
    expect(w.results.filter((r) => r.occurrenceId === `cron:${job.id}:${due}`)).toEqual([
      { outcome: 'ran', occurrenceId: `cron:${job.id}:${due}`, status: 'ok' },
    ]);
  });

  it('a job that reaches a worker before it is due (promoted early) runs only at its due time, once', async ({ cleanups, expect }) => {
    // Without the prefetch lead, so the job's time is its due time (the lead: "the prefetch lead" below).
    const { api, worker, runsOf } = setup(cleanups, { 'cron.prefetch_lead_ms': 0 });
    const w = await worker();
    const job = await api.service.add(
      { schedule: `${new Date(Date.now() + 3_000).getUTCSeconds()} * * * * *`, prompt: 'at due time', tz: 'UTC', repeat: 1 },
      cli,
    );
    const due = job.next_run_at!;
    const id = `repeat:cron:${job.id}:${due}`;
    const pending = (await api.queues.ticks.getDelayed()).find((j) => j.id === id);
    expect(pending).toBeDefined();
    await pending!.promote(); // as if a restarted scheduler fired everything at once
    await waitFor(async () => (await api.queues.ticks.getJob(id))?.isActive(), 5_000, 'the worker to pick it up');
    expect(Date.now()).toBeLessThan(due); // picked up early …
    expect(await runsOf(job.id)).toHaveLength(0); // … and held, not run
    await waitFor(async () => (await api.queues.ticks.getJob(id))?.isCompleted(), 10_000, 'the job to finish');
    const runs = await runsOf(job.id);
    expect(runs).toHaveLength(1);
    expect(runs[0]!.due_at).toBe(due);
    expect(runs[0]!.started_at!).toBeGreaterThanOrEqual(due);
    expect(w.results).toEqual([{ outcome: 'ran', occurrenceId: `cron:${job.id}:${due}`, status: 'ok' }]);
    expect(await api.store.get(job.id)).toMatchObject({ state: 'completed', repeat: { times: 1, completed: 1 } });
  });
});

describe.concurrent('F12: a manual run does not move the next run', () => {
  it('0 8 * * * in Europe/Warsaw, `cron run` it → next_run_at is still 08:00 Warsaw time', async ({ cleanups, expect }) => {
    const { api, worker, runsOf } = setup(cleanups);
    await worker();
    const job = await api.service.add({ schedule: '0 8 * * *', prompt: 'morning report', tz: 'Europe/Warsaw' }, cli);
    const before = job.next_run_at!;
    expect(formatInZone(before, 'Europe/Warsaw')).toMatch(/ 08:00 GMT\+[12]$/);
    await api.service.runNow(job.name, { origin: { surface: 'cli' }, trusted: true });
    await waitFor(async () => (await runsOf(job.id)).length === 1, 10_000, 'manual run');
    const after = (await api.store.get(job.id))!;
    expect((await runsOf(job.id))[0]).toMatchObject({ trigger: 'manual', status: 'ok' });
    expect(after.next_run_at).toBe(before);
    expect(formatInZone(after.next_run_at!, 'Europe/Warsaw')).toMatch(/ 08:00 /);
    expect(await api.store.schedulerNext(job.id)).toBe(before);
    expect(after.last_run_at).not.toBeNull();
  });
});

describe.concurrent('overlap (docs/DESIGN.md §7 Overlap)', () => {
  it('a job still running when due again is skipped, never run in parallel', async ({ cleanups, holds, expect }) => {
    const held = await heldModel(cleanups, holds);
    const { api, worker, runsOf } = setup(cleanups, { 'agent.base_url': held.model.baseUrl });
    await worker(4);
    const job = await api.service.add({ schedule: 'every 1s', prompt: 'slow' }, cli);
    // The first run lasts until an occurrence due during it has been recorded.
    const first = await waitFor(async () => (await runsOf(job.id)).find((r) => r.status === 'skipped'), 30_000, 'an occurrence skipped');
    expect(first).toMatchObject({ reason: 'overlap', trigger: 'schedule', started_at: null, output: null });
    expect(held.model.requests).toHaveLength(1); // the skipped occurrence never reached the model
    held.release();
    await waitFor(async () => (await runsOf(job.id)).filter((r) => r.status === 'ok').length >= 2, 30_000, 'two runs');
    await api.service.pause(job.id);
    await waitFor(async () => (await api.queues.ticks.getActiveCount()) === 0, 30_000, 'no tick in flight');
    const runs = await runsOf(job.id);
    const ok = runs.filter((r) => r.status === 'ok');
    const skipped = runs.filter((r) => r.status === 'skipped');
    expect(skipped.every((r) => r.reason === 'overlap')).toBe(true);
    expect(held.model.requests).toHaveLength(ok.length);
    for (let i = 1; i < ok.length; i++) expect(ok[i]!.started_at!).toBeGreaterThanOrEqual(ok[i - 1]!.finished_at!);
    // Each skip was decided (due time plus its lateness) once a run had started: the run held the job's turn lock
    // then. Not "due before that run's finished_at": the lock is held past it until the commit, which a loaded
    // machine stretches, and a skip due in that gap is an overlap too.
    for (const s of skipped) {
      expect(
        ok.some((r) => r.started_at! <= s.due_at + s.lateness_ms),
        `skip due ${s.due_at}`,
      ).toBe(true);
    }
    expect(new Set(runs.map((r) => r.occurrence_id)).size).toBe(runs.length);
  }, 120_000);
});

describe.concurrent('pause and remove with the next job already waiting', () => {
  for (const action of ['pause', 'remove'] as const) {
    it(`${action}: no run starts after the command returns`, async ({ cleanups, expect }) => {
      const { api, worker } = setup(cleanups);
      const w = await worker();
      const job = await api.service.add({ schedule: '* * * * * *', prompt: 'every second' }, cli);
      const started = () => w.results.filter((r) => r.outcome === 'ran').length;
      await waitFor(() => started() >= 2, 10_000, 'two runs');
      // The next occurrence's job is waiting in BullMQ (or already picked up) right now.
      const waiting = (await api.queues.ticks.getJobs(['delayed', 'wait', 'active'])).filter((j) => j.id?.includes(job.id));
      expect(waiting.length).toBeGreaterThanOrEqual(1);
      const runsBefore = (await api.store.runs(job.id, 1000)).length;
      if (action === 'pause') await api.service.pause(job.id);
      else await api.service.remove(job.id);
      const returnedAt = Date.now();
      // Nothing of the job is left to fire: no waiting job and no job scheduler …
      const left = (await api.queues.ticks.getJobs(['delayed', 'wait', 'prioritized'])).filter((j) => j.id?.includes(job.id));
      expect(left).toEqual([]);
      expect(await api.store.schedulerNext(job.id)).toBeUndefined();
      // … and a tick a worker held when the command returned has finished (dropped, or the run it had claimed).
      await waitFor(
        async () => (await api.queues.ticks.getJobs(['active'])).every((j) => !j.id?.includes(job.id)),
        10_000,
        'the ticks in flight',
      );
      if (action === 'pause') {
        const runs = await api.store.runs(job.id, 1000);
        expect(runs.every((r) => r.started_at === null || r.started_at < returnedAt)).toBe(true);
        expect(runs.length).toBeLessThanOrEqual(runsBefore + 1); // at most the one already claimed
        expect((await api.store.get(job.id))!.state).toBe('paused');
      } else {
        expect(await api.store.get(job.id)).toBeNull();
        expect(await api.redis.exists(api.keys.cronRuns(job.id))).toBe(0);
      }
      const lateRuns = w.results.filter((r) => r.outcome === 'ran' && Number(r.occurrenceId.split(':').pop()) > returnedAt);
      expect(lateRuns).toEqual([]);
      expect((await api.queues.ticks.getJobs(['delayed', 'wait', 'prioritized', 'active'])).filter((j) => j.id?.includes(job.id))).toEqual(
        [],
      );
    });
  }

  it('resume never catches up what was missed while paused', async ({ cleanups, expect }) => {
    const { api, worker, runsOf } = setup(cleanups, { 'cron.misfire_grace_min_seconds': 1 });
    await worker();
    const job = await api.service.add({ schedule: 'every 1s', prompt: 'tick', paused: true }, cli);
    expect(job.state).toBe('paused');
    await sleep(1_200); // paused while the occurrence at +1 s passes
    const resumedAt = Date.now();
    const { job: resumed } = await api.service.resume(job.id, { origin: { surface: 'cli' }, trusted: true });
    expect(resumed.next_run_at!).toBeGreaterThan(resumedAt);
    await waitFor(async () => (await runsOf(job.id)).length >= 1, 5_000, 'a run');
    await api.service.pause(job.id);
    const runs = await runsOf(job.id);
    expect(runs.every((r) => r.due_at > resumedAt && r.trigger === 'schedule')).toBe(true);
  });
});

describe('the worker side of the job scheduler', () => {
  it('computes the next iteration with croner in the job zone (repeatStrategy on the Worker)', async ({ cleanups, expect }) => {
    const { api, worker, runsOf } = setup(cleanups, { 'cron.prefetch_lead_ms': 0 }); // job times are due times
    await worker();
    const job = await api.service.add({ schedule: '0 8 * * *', prompt: 'morning', tz: 'Europe/Warsaw' }, cli);
    const [first, second] = nextOccurrences(job.schedule, job.tz, job.created_at, 2);
    const pending = await api.queues.ticks.getJob(`repeat:cron:${job.id}:${first}`);
    expect((pending?.opts as { repeat?: unknown } | undefined)?.repeat).toMatchObject({ pattern: '0 8 * * *', tz: 'Europe/Warsaw' });
    await pending!.promote(); // a worker picks it up now, long before 08:00
    await waitFor(async () => (await api.queues.ticks.getJob(`repeat:cron:${job.id}:${second}`)) !== undefined, 5_000, 'next iteration');
    await waitFor(
      async () => (await api.queues.ticks.getJob(`repeat:cron:${job.id}:${first}`))?.isDelayed(),
      5_000,
      'moved back to delayed',
    );
    expect(await runsOf(job.id)).toEqual([]);
    const delayed = (await api.queues.ticks.getDelayed())
      .map((j) => j.id)
      .filter((id) => id?.includes(job.id))
      .sort();
    expect(delayed).toEqual([`repeat:cron:${job.id}:${first}`, `repeat:cron:${job.id}:${second}`].sort());
    expect(formatInZone(second!, 'Europe/Warsaw')).toMatch(/ 08:00 /);
  });

  it('edit re-arms from now; reconcile re-arms a job whose scheduler went missing', async ({ cleanups, expect }) => {
    const { api } = setup(cleanups);
    const job = await api.service.add({ schedule: 'daily at 7am', prompt: 'x', tz: 'UTC' }, cli);
    const edited = await api.service.edit(job.id, { schedule: 'weekdays at 6pm' }, cli);
    expect(edited).toMatchObject({ generation: job.generation + 1, schedule: { expression: '0 18 * * 1-5' } });
    expect(await api.store.schedulerNext(job.id)).toBe(edited.next_run_at);
    expect((await api.queues.ticks.getDelayed()).filter((j) => j.id?.includes(job.id))).toHaveLength(1);
    await api.queues.ticks.removeJobScheduler(`cron:${job.id}`);
    expect(await api.service.doctor()).toContainEqual({ jobId: job.id, message: expect.stringMatching(/has no job scheduler/) });
    expect(await api.store.reconcile()).toBe(1);
    expect(await api.store.schedulerNext(job.id)).toBe(edited.next_run_at);
    expect(await api.store.reconcile()).toBe(0);
  });

  it('--overlap queue defers an occurrence due during a run instead of skipping it', async ({ cleanups, holds, expect }) => {
    const held = await heldModel(cleanups, holds);
    // Without the prefetch lead: with it, the occurrence due next after the run ends is held to the millisecond and
    // may find the lock free before a waiting one looks again — it then runs and the waiting ones coalesce into it,
    // as docs/CRON.md says. Without the lead the waiting one usually runs; on a loaded machine the next one can
    // still come first (its due time 135 ms after the run ended, before the waiting one looked again).
    const { api, worker, runsOf } = setup(cleanups, { 'agent.base_url': held.model.baseUrl, 'cron.prefetch_lead_ms': 0 });
    await worker(4);
    const job = await api.service.add({ schedule: 'every 1s', prompt: 'slow', overlap: 'queue', repeat: 2 }, cli);
    // The first run lasts until an occurrence due during it was picked up and put back to wait
    // (a job of a later occurrence, due already, delayed again after a worker started it).
    const deferred = await waitFor(
      async () =>
        (await api.queues.ticks.getDelayed()).find((j) => {
          const due = schedulerJobMillis(j.id);
          return j.id?.startsWith(`repeat:cron:${job.id}:`) && due! > job.next_run_at! && due! < Date.now() && j.attemptsStarted >= 1;
        }),
      45_000,
      'an occurrence deferred',
    );
    expect(await runsOf(job.id)).toEqual([]);
    held.release();
    await waitFor(async () => (await api.store.get(job.id))?.state === 'completed', 45_000, 'two runs');
    const runs = await runsOf(job.id);
    // Occurrences due during the first run waited (none was recorded as skipped); the first occurrence to get the
    // job after the run ran — a waiting one, or at the latest the one due next after the run ended — and the older
    // waiting ones coalesced into it. None was dropped in favour of a later one.
    expect(runs.map((r) => r.status)).toEqual(['ok', 'ok']);
    expect(runs[1]!.due_at).toBeGreaterThan(runs[0]!.due_at);
    expect(runs[1]!.due_at).toBeLessThanOrEqual(runs[0]!.finished_at! + 1_000);
    expect(runs[1]!.started_at!).toBeGreaterThanOrEqual(runs[0]!.finished_at!);
    expect(runs[1]!.due_at).toBeGreaterThanOrEqual(schedulerJobMillis(deferred.id)!);
    expect(held.model.requests).toHaveLength(2);
  }, 120_000);

  it('a model that cannot be reached is retried with backoff, then recorded as an error', async ({ cleanups, expect }) => {
    const { api, worker, runsOf } = setup(cleanups, {
      'agent.base_url': `http://127.0.0.1:${await refusedPort()}/v1`,
      'cron.retry_backoff_seconds': 0.2,
    });
    const w = await worker();
    const failures: number[] = [];
    const starts: number[] = [];
    w.worker.on('active', () => starts.push(Date.now()));
    w.worker.on('failed', (j) => failures.push(j?.attemptsMade ?? -1));
    const job = await api.service.add({ schedule: 'in 1s', prompt: 'unreachable' }, cli);
    await waitFor(async () => (await runsOf(job.id)).length === 1, 10_000, 'the error run');
    const [run] = await runsOf(job.id);
    // the failure is told to the job's target (local) as a short notice
    expect(run).toMatchObject({
      status: 'error',
      error: expect.stringMatching(/could not be reached/),
      deliveries: [{ target: 'local', status: 'delivered', evidence: expect.any(String) }],
    });
    expect(failures).toEqual([1, 2]); // two retried attempts, the third recorded the error
    expect(run!.attempts).toBe(3);
    // Exponential backoff from cron.retry_backoff_seconds: 200 ms before the second attempt, 400 ms before the third.
    expect(starts).toHaveLength(3);
    expect(starts[1]! - starts[0]!).toBeGreaterThanOrEqual(200);
    expect(starts[2]! - starts[1]!).toBeGreaterThanOrEqual(400);
    expect(await api.store.get(job.id)).toMatchObject({ state: 'error', failure_streak: 1 });
  });
});

describe.concurrent('service input errors change nothing', () => {
  it.for<[CronJobInput, RegExp]>([
    [{ schedule: 'every 5 parsecs', prompt: 'x' }, /not a valid interval|unknown day/],
    [{ schedule: 'daily at 7am', prompt: 'x', tz: 'Nowhere/City' }, /Unknown time zone/],
    [{ schedule: 'daily at 7am' }, /needs a prompt/],
    [{ schedule: 'daily at 7am', prompt: 'x', repeat: 0 }, /^`repeat` must be a positive whole number/],
    [{ schedule: 'daily at 7am', prompt: 'x', misfire: 'later' }, /^`misfire` must be skip, once or all/],
    [{ schedule: 'daily at 7am', prompt: 'x', overlap: 'maybe' }, /^`overlap` must be skip, queue, allow, buffer_all or cancel_other/],
    [{ schedule: 'daily at 7am', prompt: 'x', deliver: 'pigeon' }, /Unknown delivery target "pigeon"/],
    [{ schedule: 'daily at 7am', prompt: 'x'.repeat(20_000) }, /limit is 16000/],
  ])('add rejects %$', async ([input, message], { cleanups, expect }) => {
    const { api } = setup(cleanups);
    await expect(api.service.add(input, cli)).rejects.toThrow(ScheduleInputError);
    await expect(api.service.add(input, cli)).rejects.toThrow(message);
    expect(await api.store.list()).toEqual([]);
    expect(await api.queues.ticks.getJobSchedulersCount()).toBe(0);
  });

  it('a taken name is refused on add and edit; a derived name gets a number', async ({ cleanups, expect }) => {
    const { api } = setup(cleanups);
    const a = await api.service.add({ schedule: 'daily at 7am', prompt: 'x', name: 'Report' }, cli);
    await expect(api.service.add({ schedule: 'daily at 8am', prompt: 'y', name: 'REPORT' }, cli)).rejects.toThrow(
      `A cron job named "Report" already exists (${a.id})`,
    );
    await expect(api.service.add({ schedule: 'daily at 8am', prompt: 'y', name: a.id }, cli)).rejects.toThrow(ScheduleInputError);
    await expect(api.service.add({ schedule: 'daily at 8am', prompt: 'y', name: a.id }, cli)).rejects.toThrow(
      `"${a.id}" is the id of the cron job "Report"; a name may not be another job's id (references would be ambiguous). Choose another \`name\`.`,
    );
    const b = await api.service.add({ schedule: 'daily at 8am', prompt: 'y', name: 'other' }, cli);
    await expect(api.service.edit(b.id, { name: 'report' }, cli)).rejects.toThrow(/already exists/);
    expect((await api.service.edit(a.id, { name: 'report' }, cli)).name).toBe('report'); // its own name, re-cased
    const c1 = await api.service.add({ schedule: 'daily at 9am', prompt: 'summarise the inbox' }, cli);
    const c2 = await api.service.add({ schedule: 'daily at 9am', prompt: 'summarise the inbox' }, cli);
    expect([c1.name, c2.name]).toEqual(['summarise the inbox', 'summarise the inbox (2)']);
    expect((await api.service.get('summarise the inbox (2)')).id).toBe(c2.id);
    expect(await api.store.list()).toHaveLength(4);
  });

  it('an ambiguous name (jobs stored before names were unique) lists the candidate ids; an unknown one says so', async ({
    cleanups,
    expect,
  }) => {
    const { api } = setup(cleanups);
    const a = await api.service.add({ schedule: 'daily at 7am', prompt: 'x', name: 'Report' }, cli);
    const b0 = await api.service.add({ schedule: 'daily at 8am', prompt: 'y', name: 'other' }, cli);
    const b = (await api.store.put({ ...b0, name: 'report' }, b0.version))!;
    await expect(api.service.pause('REPORT')).rejects.toThrow(new RegExp(`ambiguous.*${a.id}.*${b.id}`));
    await expect(api.service.pause('nothing')).rejects.toThrow(/No cron job with id or name "nothing"/);
    expect((await api.service.pause(a.id)).job.state).toBe('paused');
    expect((await api.service.get(b.id)).state).toBe('scheduled');
  });
});

export type { CronRun };
