/**
 * The management API under `/api` (docs/DESIGN.md §8): schedules through the real
 * LoopService and BullMQ job schedulers, cron routes against the `CronApi`
 * contract, and a session's event stream as SSE with `Last-Event-ID` resume.
 */
import type { PageRequest } from '../scheduler/store/list-page.ts';
import type { CronListFilter } from '../scheduler/cron/cron-queries.ts';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import type { CronAddInput, CronApi } from '../gateway/http/cron-routes.ts';
import { ScheduleInputError } from '../scheduler/errors/schedule-input-error.ts';
import { UnknownJobError } from '../scheduler/errors/unknown-job-error.ts';
import { Keys, QUEUES } from '../scheduler/store/keys.ts';
import { createLogger } from '../scheduler/logger.ts';
import { sessionStoreFor } from '../scheduler/services.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { readJson, readSseUntil } from './support/http.ts';
import { camelKeys } from './support/wire-case.ts';

const KEY = 'api-key-abcdef';

/** A small in-memory cron service honouring the CronApi contract (references by id or name). */
class MemoryCron implements CronApi {
  jobs: Array<{ id: string; name: string; schedule: string; prompt: string; state: string; runs: number }> = [];
  private find(ref: string) {
    const job = this.jobs.find((j) => j.id === ref) ?? this.jobs.find((j) => j.name.toLowerCase() === ref.toLowerCase());
    if (!job) throw new UnknownJobError(`No cron job "${ref}".`);
    return job;
  }
  async list(_request: PageRequest, filter: CronListFilter) {
    return { data: this.jobs.filter((j) => filter.all || j.state !== 'completed'), next_cursor: null };
  }
  async add(input: CronAddInput) {
    if (input.schedule === 'sometimes') throw new ScheduleInputError('Unknown schedule "sometimes".', { field: 'schedule' });
    const job = {
      id: `job${this.jobs.length}`,
      name: input.name ?? input.prompt ?? 'job',
      schedule: input.schedule ?? 'after',
      prompt: input.prompt ?? '',
      state: input.paused ? 'paused' : 'scheduled',
      runs: 0,
    };
    this.jobs.push(job);
    return job;
  }
  async get(ref: string) {
    return this.find(ref);
  }
  async edit(ref: string, changes: { name?: string }) {
    const j = this.find(ref);
    if (changes.name) j.name = changes.name;
    return j;
  }
  async runs(ref: string) {
    return Array.from({ length: this.find(ref).runs }, (_, i) => ({ n: i }));
  }
  async pause(ref: string) {
    const j = this.find(ref);
    j.state = 'paused';
    return j;
  }
  async resume(ref: string, options: { runNow: boolean }) {
    const j = this.find(ref);
    j.state = 'scheduled';
    if (options.runNow) j.runs++;
    return j;
  }
  async runNow(ref: string) {
    const j = this.find(ref);
    j.runs++;
    return j;
  }
  async backfill(ref: string) {
    return this.find(ref);
  }
  async remove(ref: string) {
    const j = this.find(ref);
    this.jobs = this.jobs.filter((x) => x !== j);
    return j;
  }
}

let env: TestEnv;
let gw: Gateway;
let redis: Redis;
const cron = new MemoryCron();

const call = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  fetch(`${gw.httpAddress.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

beforeAll(async () => {
  env = testEnv({ 'api_server.port': 0, 'api_server.key': KEY });
  gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }), cron });
  redis = new Redis(env.redisUrl);
});

afterAll(async () => {
  await gw?.close();
  redis?.disconnect();
  env?.cleanup();
});

describe('/api/schedules', () => {
  it('needs the key', async () => {
    const res = await fetch(`${gw.httpAddress.url}/api/schedules`);
    expect(res.status).toBe(401);
  });

  it('creates a loop in the /loop grammar, arms its job scheduler, pauses, resumes and deletes it', async () => {
    const created = await call('POST', '/api/schedules', { kind: 'loop', session_id: 'api-s1', args: '2m check the deploy --times 3' });
    expect(created.status).toBe(201);
    const body = await readJson(created);
    expect(body.reply).toMatch(/Loop set: every 2m/);
    expect(body.schedule).toMatchObject({
      session_id: 'api-s1',
      kind: 'loop',
      status: 'active',
      interval_seconds: 120,
      times: 3,
      prompt: 'check the deploy',
    });

    const ticks = new Queue(QUEUES.ticks, { connection: redis, prefix: env.prefix });
    try {
      expect(await ticks.getJobScheduler(new Keys(env.prefix).loopSchedulerId('api-s1', 'loop'))).toBeTruthy();

      const list = await readJson(call('GET', '/api/schedules'));
      expect(list.data.map((s: { session_id: string }) => s.session_id)).toContain('api-s1');

      const paused = await call('POST', '/api/schedules/api-s1/loop/pause');
      expect(paused.status).toBe(200);
      expect((await readJson(paused)).schedule.status).toBe('paused');
      expect(await ticks.getJobScheduler(new Keys(env.prefix).loopSchedulerId('api-s1', 'loop'))).toBeFalsy();

      const resumed = await readJson(call('POST', '/api/schedules/api-s1/loop/resume'));
      expect(resumed.schedule.status).toBe('active');
      expect(await ticks.getJobScheduler(new Keys(env.prefix).loopSchedulerId('api-s1', 'loop'))).toBeTruthy();

      const one = await readJson(call('GET', '/api/schedules/api-s1/loop'));
      expect(one.status_line).toMatch(/^loop: active · every 2m/);

      const deleted = await call('DELETE', '/api/schedules/api-s1/loop');
      expect((await readJson(deleted)).reply).toMatch(/Loop stopped/);
      expect(await ticks.getJobScheduler(new Keys(env.prefix).loopSchedulerId('api-s1', 'loop'))).toBeFalsy();
    } finally {
      await ticks.close();
    }
  });

  it('creates a heartbeat and refuses one below the minimum interval', async () => {
    const ok = await call('POST', '/api/schedules', {
      kind: 'heartbeat',
      session_id: 'api-hb',
      interval_seconds: 300,
      prompt: 'anything new?',
    });
    expect(ok.status).toBe(201);
    expect((await readJson(ok)).schedule).toMatchObject({ kind: 'heartbeat', interval_seconds: 300 });
    const bad = await call('POST', '/api/schedules', { kind: 'heartbeat', session_id: 'api-hb2', interval_seconds: 5, prompt: 'x' });
    expect(bad.status).toBe(400);
    expect((await readJson(bad)).error).toMatchObject({ param: 'interval_seconds', type: 'invalid_request_error' });
    expect(await redis.exists(new Keys(env.prefix).schedule('api-hb2', 'heartbeat'))).toBe(0);
  });

  it("sets a loop's overlap from --overlap in args or the overlap field (the field wins) and shows it", async () => {
    const fromArgs = await readJson(
      call('POST', '/api/schedules', { kind: 'loop', session_id: 'api-ov1', args: '2m check --overlap skip' }),
    );
    expect(fromArgs.schedule).toMatchObject({ overlap: 'skip' });
    const fromField = await readJson(
      call('POST', '/api/schedules', { kind: 'loop', session_id: 'api-ov2', args: '2m check --overlap skip', overlap: 'cancel_other' }),
    );
    expect(fromField.schedule).toMatchObject({ overlap: 'cancel_other' });
    const plain = await readJson(call('POST', '/api/schedules', { kind: 'loop', session_id: 'api-ov3', args: '2m check' }));
    expect(plain.schedule).toMatchObject({ overlap: 'queue' });
  });

  it.each([
    [{ kind: 'loop', session_id: 'api-s2', args: '5m check', overlap: 'allow' }, /^--overlap allow is for cron jobs/],
    [{ kind: 'loop', session_id: 'api-s2', args: 'check the build', overlap: 'skip' }, /^overlap is for loops with an interval/],
    [{ kind: 'loop', session_id: 'api-s2', args: '5m check --times 0' }, /positive whole number/],
    [{ kind: 'loop', session_id: 'bad id!', args: '5m check' }, /Invalid session id/],
    [{ kind: 'loop', session_id: 'api-s2', args: 'pause' }, /control word/],
    [{ kind: 'cron', session_id: 'api-s2' }, /Invalid request body/],
  ])('answers 400 and writes nothing for %j', async (input, message) => {
    const res = await call('POST', '/api/schedules', input);
    expect(res.status).toBe(400);
    expect((await readJson(res)).error.message).toMatch(message);
    expect(await redis.exists(new Keys(env.prefix).schedule('api-s2', 'loop'))).toBe(0);
  });

  it('answers 404 for a session without that schedule', async () => {
    expect((await call('POST', '/api/schedules/nobody/loop/pause')).status).toBe(404);
    expect((await call('GET', '/api/schedules/nobody/cron')).status).toBe(404);
  });
});

describe('one casing on /api', () => {
  it('answers in snake_case at every depth: schedules, sessions, transcripts, set-aside input, models', async () => {
    const made = await call('POST', '/api/schedules', {
      kind: 'loop',
      session_id: 'api-case',
      args: '5m check the deploy',
      max_tokens: 5000,
      deliver: 'telegram:123',
    });
    const created = await readJson(made);
    const store = sessionStoreFor(env.config, redis, new Keys(env.prefix));
    await store.appendEvent('api-case', 'reply', { text: 'hello', occurrenceId: 'o1' });
    const answers = {
      created,
      list: await readJson(call('GET', '/api/schedules')),
      one: await readJson(call('GET', '/api/schedules/api-case/loop')),
      sessions: await readJson(call('GET', '/api/sessions')),
      transcript: await readJson(call('GET', '/api/sessions/api-case/transcript')),
      set_aside: await readJson(call('GET', '/api/sessions/api-case/set-aside')),
      models: await readJson(call('GET', '/api/models')),
    };
    expect(created.schedule, JSON.stringify(created)).toBeTruthy();
    expect(answers.one.spend).toEqual({
      calls: 0,
      input_tokens: 0,
      output_tokens: 0,
      cached_tokens: 0,
      last_input_tokens: 0,
      last_turn_tokens: 0,
      estimated: false,
    });
    expect(answers.one.budget_tokens).toBe(0);
    expect(camelKeys(answers)).toEqual([]);
  });
});

describe('/api/cron', () => {
  it('lists, creates, pauses, resumes, runs and deletes jobs by id or name', async () => {
    const created = await call('POST', '/api/cron/jobs', { schedule: 'every 2h', prompt: 'summarise mail', name: 'Mail' });
    expect(created.status).toBe(201);
    const job = await readJson(created);
    expect((await readJson(call('POST', '/api/cron/jobs/mail/pause'))).state).toBe('paused');
    expect(await readJson(call('POST', `/api/cron/jobs/${job.id}/resume`, { run_now: true }))).toMatchObject({
      state: 'scheduled',
      runs: 1,
    });
    expect((await call('POST', '/api/cron/jobs/Mail/run')).status).toBe(202);
    expect((await readJson(call('GET', '/api/cron/jobs'))).data).toHaveLength(1);
    expect((await call('DELETE', '/api/cron/jobs/mail')).status).toBe(200);
    expect((await readJson(call('GET', '/api/cron/jobs'))).data).toHaveLength(0);
  });

  it('answers 400 for bad input, 404 for unknown references, and refuses a script', async () => {
    expect((await call('POST', '/api/cron/jobs', { schedule: 'sometimes', prompt: 'x' })).status).toBe(400);
    const unknown = await call('POST', '/api/cron/jobs/nope/pause');
    expect(unknown.status).toBe(404);
    expect((await readJson(unknown)).error).toMatchObject({ type: 'not_found_error', code: 'unknown_job', param: 'ref' });
    for (const [method, path] of [
      ['GET', '/api/cron/jobs/nope'],
      ['PATCH', '/api/cron/jobs/nope'],
      ['GET', '/api/cron/jobs/nope/runs'],
      ['DELETE', '/api/cron/jobs/nope'],
    ]) {
      expect((await call(method!, path!, method === 'PATCH' ? { name: 'x' } : undefined)).status, `${method} ${path}`).toBe(404);
    }
    const script = await call('POST', '/api/cron/jobs', { schedule: '30m', script: 'rm -rf /' });
    expect(script.status).toBe(400);
    expect((await readJson(script)).error.message).toMatch(/script/);
  });
});

describe('GET /api/sessions/:id/events', () => {
  it('streams events with their stream ids and resumes after Last-Event-ID', async () => {
    const store = sessionStoreFor(env.config, redis, new Keys(env.prefix));
    const first = await store.appendEvent('sse-s', 'reply', { text: 'one' });
    const second = await store.appendEvent('sse-s', 'reply', { text: 'two' });

    const c1 = new AbortController();
    const res = await fetch(`${gw.httpAddress.url}/api/sessions/sse-s/events`, {
      headers: { authorization: `Bearer ${KEY}` },
      signal: c1.signal,
    });
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const live = readSseUntil(res, (f) => f.data.includes('three'), c1);
    setTimeout(() => void store.appendEvent('sse-s', 'reply', { text: 'three' }), 100);
    const frames = await live;
    expect(frames.map((f) => [f.event, JSON.parse(f.data).text])).toEqual([
      ['reply', 'one'],
      ['reply', 'two'],
      ['reply', 'three'],
    ]);
    expect(frames[0]!.id).toBe(first);
    expect(frames[1]!.id).toBe(second);

    // a client that saw "one" reconnects and reads exactly what it missed
    const c2 = new AbortController();
    const again = await fetch(`${gw.httpAddress.url}/api/sessions/sse-s/events`, {
      headers: { authorization: `Bearer ${KEY}`, 'last-event-id': first },
      signal: c2.signal,
    });
    const missed = await readSseUntil(again, (f) => f.data.includes('three'), c2);
    expect(missed.map((f) => JSON.parse(f.data).text)).toEqual(['two', 'three']);
  });

  it('hands every event out in snake_case at every depth, as the stream in Redis keeps it otherwise', async () => {
    const store = sessionStoreFor(env.config, redis, new Keys(env.prefix));
    // The names the workers write (worker/loop/tick-occurrence.ts, the reply of a turn, a delivery).
    await store.appendEvent('sse-case', 'tick.started', {
      kind: 'loop',
      tick: 3,
      occurrenceId: 'loop:sse-case:L1:1',
      dueAt: 1_700_000_000_000,
      startedAt: 1_700_000_000_041,
      latenessMs: 41,
      claimedAhead: true,
      worker: 'w1',
      pid: 812,
    });
    await store.appendEvent('sse-case', 'reply', {
      text: 'green; camelCase in text stays',
      occurrenceId: 'loop:sse-case:L1:1',
      spend: { calls: 1, inputTokens: 10, outputTokens: 2, cachedTokens: 0, lastInputTokens: 10, estimated: false },
    });
    await store.appendEvent('sse-case', 'delivery', { platform: 'telegram', chatId: '72', willRetry: false, messageIds: [1] });
    const c = new AbortController();
    const res = await fetch(`${gw.httpAddress.url}/api/sessions/sse-case/events`, {
      headers: { authorization: `Bearer ${KEY}` },
      signal: c.signal,
    });
    const frames = await readSseUntil(res, (f) => f.event === 'delivery', c);
    const data = frames.map((f) => JSON.parse(f.data) as Record<string, unknown>);
    expect(camelKeys(data)).toEqual([]);
    expect(data[0]).toEqual({
      kind: 'loop',
      tick: 3,
      occurrence_id: 'loop:sse-case:L1:1',
      due_at: 1_700_000_000_000,
      started_at: 1_700_000_000_041,
      lateness_ms: 41,
      claimed_ahead: true,
      worker: 'w1',
      pid: 812,
    });
    expect(data[1]).toMatchObject({ text: 'green; camelCase in text stays', spend: { input_tokens: 10, output_tokens: 2 } });
    expect(data[2]).toEqual({ platform: 'telegram', chat_id: '72', will_retry: false, message_ids: [1] });
    // The stored stream is not a wire format: it keeps its names for the workers.
    expect((await store.recentEvents('sse-case', 1))[0]!.data).toMatchObject({ chatId: '72', willRetry: false });
  });

  it('rejects a malformed Last-Event-ID', async () => {
    const res = await fetch(`${gw.httpAddress.url}/api/sessions/sse-s/events`, {
      headers: { authorization: `Bearer ${KEY}`, 'last-event-id': 'yesterday' },
    });
    expect(res.status).toBe(400);
  });
});
