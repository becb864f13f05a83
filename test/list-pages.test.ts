/**
 * Every list pages (docs/GATEWAY.md, "Lists"): `/api/cron/jobs` answers `limit` and an opaque `cursor` in
 * name order with `next_cursor`, reads only the page's records (counted with MONITOR over 1,200 stored
 * jobs), keeps its place across writes between pages, filters by state, platform and name prefix, refuses
 * a bad cursor with a 400 that says why, and lists a store written before the order existed; `/api/schedules`
 * and `/api/sessions` the same by session id; `hermes cron list` pages by default.
 */
import { describe, expect, it } from 'vitest';
import { cronJobFixture, loopFixture } from './support/record-fixtures.ts';
import { goalServiceFor, loopStoreFor } from '../scheduler/services.ts';
import { createGoal } from '../scheduler/goal/goal-state.ts';
import { createLogger } from '../scheduler/logger.ts';
import type { LoopRecord } from '../scheduler/loop/loop-state.ts';
import { testEnv } from './support/env.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { startCronApiGateway, type ApiCall } from './support/cron-api-gateway.ts';
import { openCronService } from './support/cron-worker.ts';
import { commandsDuring } from './support/redis-monitor.ts';
import type { CronJob } from '../scheduler/cron/cron-job.ts';
import { runCronCli } from './support/cron-cli.ts';
import { runStatus } from '../cli/commands/status.ts';
import { setAsideInput } from '../scheduler/session/set-aside.ts';
import { connectCli } from '../cli/connect-cli.ts';

const KEY = 'list-pages-key';
const cleanups = cleanupAfterEach();

/** Job `i`: id from the number, name `Job-0007`-like, every tenth paused, every seventh delivering to Telegram. */
function job(i: number): CronJob {
  return cronJobFixture({
    id: i.toString(16).padStart(12, '0'),
    name: `${i % 3 === 0 ? 'Report' : 'job'}-${String(i).padStart(4, '0')}`,
    paused: i % 10 === 0,
    deliver: i % 7 === 0 ? ['telegram:42'] : ['local'],
  });
}

async function setup(count: number) {
  const env = testEnv({ 'api_server.port': 0, 'api_server.key': KEY });
  cleanups.push(() => env.cleanup());
  const cron = openCronService(env.config);
  cleanups.push(() => cron.close());
  for (let i = 0; i < count; i += 100) {
    await Promise.all(Array.from({ length: Math.min(100, count - i) }, (_, j) => cron.store.put(job(i + j), 'absent')));
  }
  const { call } = await startCronApiGateway(cleanups, env, KEY);
  return { env, cron, call };
}

/** Stored loops and heartbeats: a loop for sessions `s-0000`… (every fourth also a heartbeat, every fifth paused). */
async function storeSchedules(cron: ReturnType<typeof openCronService>, config: Parameters<typeof loopStoreFor>[0], count: number) {
  const loops = loopStoreFor(config, { redis: cron.redis, keys: cron.keys, queues: cron.queues });
  const records: LoopRecord[] = [];
  for (let i = 0; i < count; i++) {
    const sessionId = `s-${String(i).padStart(4, '0')}`;
    const loop = loopFixture({ sessionId });
    records.push(i % 5 === 0 ? { ...loop, status: 'paused', statusReason: 'paused' } : loop);
    if (i % 4 === 0) records.push(loopFixture({ sessionId, kind: 'heartbeat' }));
  }
  for (let i = 0; i < records.length; i += 100) await Promise.all(records.slice(i, i + 100).map((r) => loops.put(r, 'absent')));
  return { loops, records };
}

/** Every page of `path` (a query without `cursor`), following `next_cursor`; `between` runs before each next page. */
async function walk(call: ApiCall, path: string, between: (page: number) => Promise<void> = async () => {}): Promise<string[][]> {
  const pages: string[][] = [];
  let cursor: string | null = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const res = await call('GET', cursor ? `${path}${sep}cursor=${encodeURIComponent(cursor)}` : path);
    expect(res.status).toBe(200);
    pages.push((res.body.data as Array<{ name: string }>).map((j) => j.name));
    cursor = res.body.next_cursor as string | null;
    if (cursor) await between(pages.length);
  } while (cursor);
  return pages;
}

describe('/api/cron/jobs pages', () => {
  it('a page of 50 of 1,200 jobs reads 50 records and no index whole; the pages cover every job once, in name order', async () => {
    const { env, cron, call } = await setup(1200);
    let body: Record<string, any> = {};
    const seen = await commandsDuring(env.redisUrl, cron.redis, env.prefix, async () => {
      body = (await call('GET', '/api/cron/jobs?limit=50&all=1')).body;
    });
    expect(body.data).toHaveLength(50);
    expect(typeof body.next_cursor).toBe('string');
    const names = (body.data as Array<{ name: string }>).map((j) => j.name);
    expect(names).toEqual([...names].sort((a, b) => a.toLowerCase().localeCompare(b.toLowerCase())));
    // What the request asked of Redis under this test's prefix.
    const recordReads = seen.filter((c) => c.args.some((a) => a.includes(':cron:job:')));
    expect(recordReads.length).toBeGreaterThanOrEqual(50);
    expect(recordReads.length).toBeLessThanOrEqual(50 + 2);
    expect(seen.filter((c) => ['MGET', 'SMEMBERS', 'HGETALL', 'SSCAN', 'KEYS', 'SCAN'].includes(c.name))).toEqual([]);
    expect(seen.filter((c) => c.name === 'ZRANGEBYLEX' || c.name === 'ZRANGE')).toHaveLength(1);

    const pages = await walk(call, '/api/cron/jobs?limit=50&all=1');
    expect(pages).toHaveLength(24);
    const all = pages.flat();
    expect(new Set(all).size).toBe(1200);
    expect(all).toEqual([...all].sort((a, b) => a.toLowerCase().localeCompare(b.toLowerCase())));
  });

  it('a job named in a request (`/api/cron/jobs/:ref`) is found through the order: its record read, not every job', async () => {
    const { env, cron, call } = await setup(1200);
    let res: { status: number; body: Record<string, any> } = { status: 0, body: {} };
    const seen = await commandsDuring(env.redisUrl, cron.redis, env.prefix, async () => {
      res = await call('GET', '/api/cron/jobs/JOB-0500');
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: 'job-0500' });
    expect(seen.filter((c) => c.args.some((a) => a.includes(':cron:job:'))).length).toBeLessThanOrEqual(3);
    expect(seen.filter((c) => ['MGET', 'SMEMBERS'].includes(c.name))).toEqual([]);
    // Two jobs of one name (in either case) are still ambiguous; an unknown name is still a 404.
    await cron.store.put(cronJobFixture({ id: 'eeeeeeeeeeee', name: 'JOB-0500' }), 'absent');
    expect((await call('GET', '/api/cron/jobs/job-0500')).body.error.message).toMatch(/ambiguous: 2 jobs/);
    expect((await call('GET', '/api/cron/jobs/no-such-job')).status).toBe(404);
  });

  it('adding a job among 1,200 checks its name through the order (a taken name numbered, an id refused): no job index read whole', async () => {
    const { env, cron, call } = await setup(1200);
    let res: { status: number; body: Record<string, any> } = { status: 0, body: {} };
    const seen = await commandsDuring(env.redisUrl, cron.redis, env.prefix, async () => {
      res = await call('POST', '/api/cron/jobs', { schedule: 'every 2h', prompt: 'x', name: 'JOB-0502' });
    });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toMatch(/A cron job named \\"job-0502\\" already exists/);
    expect(seen.filter((c) => ['MGET', 'SMEMBERS', 'SSCAN', 'SCAN', 'KEYS'].includes(c.name))).toEqual([]);
    const fresh = await call('POST', '/api/cron/jobs', { schedule: 'every 2h', prompt: 'job-0503' });
    expect(fresh.body).toMatchObject({ name: 'job-0503 (2)' });
    const asId = await call('POST', '/api/cron/jobs', { schedule: 'every 2h', prompt: 'x', name: job(5).id });
    expect(JSON.stringify(asId.body)).toMatch(/is the id of the cron job \\"job-0005\\"/);
  });

  it('adding a job with a non-ASCII name among 1,200 reads the records of that name only, in any case: never every job', async () => {
    const { env, cron, call } = await setup(1200);
    await cron.store.put(cronJobFixture({ id: 'aaaaaaaaaaaa', name: 'Überprüfung Ärger' }), 'absent');
    await cron.store.put(cronJobFixture({ id: 'bbbbbbbbbbbb', name: 'Отчёт' }), 'absent');
    let res: { status: number; body: Record<string, any> } = { status: 0, body: {} };
    const seen = await commandsDuring(env.redisUrl, cron.redis, env.prefix, async () => {
      res = await call('POST', '/api/cron/jobs', { schedule: 'every 2h', prompt: 'x', name: 'überprüfung ärger' });
    });
    // Taken in another case of its non-ASCII letters: refused, having read that job's record and no other.
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toMatch(/A cron job named \\"Überprüfung Ärger\\" already exists \(aaaaaaaaaaaa\)/);
    expect(seen.filter((c) => ['MGET', 'SMEMBERS', 'SSCAN', 'SCAN', 'KEYS'].includes(c.name))).toEqual([]);
    const recordsRead = seen.flatMap((c) => c.args.filter((a) => a.includes(':cron:job:')));
    // The job with that id (none: a name is looked up as an id too), then the one job of that name.
    expect(recordsRead.sort()).toEqual([cron.keys.cronJob('aaaaaaaaaaaa'), cron.keys.cronJob('überprüfung ärger')].sort());
    // A name derived from a non-ASCII prompt is numbered the same way; a reference in another case finds the job.
    const numbered = await commandsDuring(env.redisUrl, cron.redis, env.prefix, async () => {
      res = await call('POST', '/api/cron/jobs', { schedule: 'every 2h', prompt: 'отчёт' });
    });
    expect(res.body).toMatchObject({ name: 'отчёт (2)' });
    expect(numbered.filter((c) => ['MGET', 'SMEMBERS', 'SSCAN', 'SCAN', 'KEYS'].includes(c.name))).toEqual([]);
    expect(numbered.filter((c) => c.name === 'GET' && c.args.some((a) => a.includes(':cron:job:'))).length).toBeLessThanOrEqual(4);
    expect((await call('GET', `/api/cron/jobs/${encodeURIComponent('ОТЧЁТ (2)')}`)).body).toMatchObject({ name: 'отчёт (2)' });
  });

  it('jobs added, removed and renamed between pages: no job listed twice, none that existed throughout skipped', async () => {
    const { cron, call } = await setup(300);
    const removed = new Set<string>();
    const renamed = new Set<string>();
    let added = 0;
    const pages = await walk(call, '/api/cron/jobs?limit=40&all=1', async (n) => {
      // Ahead of the cursor and behind it: a new job at either end, one removed, one renamed to the front.
      await cron.store.put(cronJobFixture({ id: `f${String(n).padStart(11, '0')}`, name: `aaa-new-${n}` }), 'absent');
      await cron.store.put(cronJobFixture({ id: `e${String(n).padStart(11, '0')}`, name: `zzz-new-${n}` }), 'absent');
      added += 2;
      const gone = job(n * 11);
      if (await cron.store.delete(gone.id)) removed.add(gone.name);
      const moved = (await cron.store.get(job(n * 13 + 1).id))!;
      if (!removed.has(moved.name) && (await cron.store.put({ ...moved, name: `AAA-renamed-${n}` }, moved.version)))
        renamed.add(moved.name);
    });
    const listed = pages.flat();
    expect(new Set(listed).size).toBe(listed.length);
    const throughout = Array.from({ length: 300 }, (_, i) => job(i).name).filter((n) => !removed.has(n) && !renamed.has(n));
    for (const name of throughout) expect(listed).toContain(name);
    expect(added).toBeGreaterThan(0);
    expect(listed.filter((n) => n.startsWith('zzz-new-')).length).toBeGreaterThan(0);
  });

  it('filters: state, platform and a name prefix in either case, each page following the order', async () => {
    const { call } = await setup(120);
    const names = (pages: string[][]) => pages.flat();
    const paused = names(await walk(call, '/api/cron/jobs?limit=5&state=paused'));
    expect(paused).toEqual(
      Array.from({ length: 12 }, (_, i) => job(i * 10).name).sort((a, b) => a.toLowerCase().localeCompare(b.toLowerCase())),
    );
    const telegram = names(await walk(call, '/api/cron/jobs?limit=7&platform=telegram&all=1'));
    expect(telegram).toHaveLength(18);
    expect(telegram.every((n) => Number(n.slice(-4)) % 7 === 0)).toBe(true);
    const reports = names(await walk(call, '/api/cron/jobs?limit=9&name=rEPORT-00&all=1'));
    expect(reports).toEqual(Array.from({ length: 40 }, (_, i) => job(i * 3).name).filter((n) => n.startsWith('Report-00')));
    expect(reports.length).toBeGreaterThan(9);
  });

  it('a bad cursor, a cursor of another list, a bad limit and an unknown state are 400s that name the field', async () => {
    const { call } = await setup(3);
    const bad = await call('GET', '/api/cron/jobs?cursor=not-a-cursor');
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ type: 'invalid_request_error', param: 'cursor' });
    expect(bad.body.error.message).toMatch(/not a cursor this list gave/);
    const other = Buffer.from(JSON.stringify({ l: 'sessions', a: 'x' })).toString('base64url');
    const wrong = await call('GET', `/api/cron/jobs?cursor=${other}`);
    expect(wrong.status).toBe(400);
    expect(wrong.body.error.message).toMatch(/belongs to another list \(sessions\)/);
    const limit = await call('GET', '/api/cron/jobs?limit=501');
    expect(limit.status).toBe(400);
    expect(limit.body.error.message).toMatch(/`limit` must be a whole number from 1 to 500/);
    expect((await call('GET', '/api/cron/jobs?state=sleeping')).status).toBe(400);
    const first = await call('GET', '/api/cron/jobs?limit=2');
    expect(first.body).toMatchObject({ object: 'list', next_cursor: expect.any(String) });
    expect(first.body.data).toHaveLength(2);
  });

  it('a store written before the list order existed lists every job: the order is rebuilt from the job index', async () => {
    const { env, cron, call } = await setup(130);
    // As an earlier version left it: the index set, no order.
    for (const k of cron.keys.shards()) await cron.redis.del(k.cronJobOrder);
    const pages = await walk(call, '/api/cron/jobs?limit=50&all=1');
    expect(pages.flat()).toHaveLength(130);
    // A job an earlier version wrote (index set and record only) after the order was made is listed too.
    const late = cronJobFixture({ id: 'ffffffffffff', name: 'late' });
    await cron.redis.set(cron.keys.cronJob(late.id), JSON.stringify(late));
    await cron.redis.sadd(cron.keys.forCronJob(late.id).cronJobIndex, late.id);
    expect((await walk(call, '/api/cron/jobs?limit=50&all=1')).flat()).toContain('late');
    expect(env.prefix).toBeTruthy();
  });

  it('hermes cron list prints a page of api_server.page_size jobs and how to see more; --cursor goes on, --all prints all, --json too', async () => {
    const env = testEnv({ 'api_server.page_size': 20 });
    cleanups.push(() => env.cleanup());
    const cron = openCronService(env.config);
    cleanups.push(() => cron.close());
    await Promise.all(Array.from({ length: 45 }, (_, i) => cron.store.put(job(i), 'absent')));
    const rows = (stdout: string) => stdout.split('\n').filter((l) => /^[0-9a-f]{12} /.test(l));
    const page = await runCronCli(env.config, ['list']);
    expect(page.code).toBe(0);
    expect(rows(page.stdout)).toHaveLength(20);
    const hint = /20 jobs shown; more: hermes cron list --cursor (\S+) \(or --all\)/.exec(page.stdout);
    expect(hint).not.toBeNull();
    const next = await runCronCli(env.config, ['list', '--cursor', hint![1]!, '--limit', '30']);
    // 45 jobs, every tenth paused and none completed: the second page holds the other 25, and no hint.
    expect(rows(next.stdout)).toHaveLength(25);
    expect(next.stdout).not.toMatch(/more:/);
    expect(new Set([...rows(page.stdout), ...rows(next.stdout)].map((r) => r.slice(0, 12))).size).toBe(45);
    expect(rows((await runCronCli(env.config, ['list', '--all'])).stdout)).toHaveLength(45);
    const json = await runCronCli(env.config, ['list', '--json']);
    expect(JSON.parse(json.stdout)).toHaveLength(20);
    expect(json.stderr).toMatch(/more: hermes cron list --cursor/);
    expect(JSON.parse((await runCronCli(env.config, ['list', '--json', '--all'])).stdout)).toHaveLength(45);
    const bad = await runCronCli(env.config, ['list', '--cursor', 'nope']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--cursor is not a cursor this list gave/);
  });
});

describe('/api/schedules and /api/sessions pages', () => {
  it('/api/schedules: a page of 50 of 1,250 reads 50 records; every record once, by session then kind; filters', async () => {
    const { env, cron, call } = await setup(0);
    const { records } = await storeSchedules(cron, env.config, 1000);
    expect(records).toHaveLength(1250);
    let body: Record<string, any> = {};
    const seen = await commandsDuring(env.redisUrl, cron.redis, env.prefix, async () => {
      body = (await call('GET', '/api/schedules?limit=50')).body;
    });
    expect(body.data).toHaveLength(50);
    const reads = seen.filter((c) => c.name === 'GET' && c.args.some((a) => a.includes(':schedule:')));
    expect(reads.length).toBeGreaterThanOrEqual(50);
    expect(reads.length).toBeLessThanOrEqual(50 + 2);
    expect(seen.filter((c) => ['MGET', 'SMEMBERS', 'HGETALL', 'SSCAN', 'KEYS', 'SCAN'].includes(c.name))).toEqual([]);

    const all: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await call('GET', `/api/schedules?limit=200${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.status).toBe(200);
      for (const s of res.body.data as Array<{ session_id: string; kind: string }>) all.push(`${s.session_id} ${s.kind}`);
      cursor = res.body.next_cursor as string | null;
    } while (cursor);
    // By session id, then kind (`heartbeat` before `loop`).
    expect(all).toEqual(records.map((r) => `${r.sessionId} ${r.kind}`).sort());

    const paused = await call('GET', '/api/schedules?limit=500&status=paused');
    expect(paused.body.data).toHaveLength(200);
    const heartbeats = await call('GET', '/api/schedules?limit=500&kind=heartbeat&prefix=s-00');
    expect((heartbeats.body.data as Array<{ session_id: string }>).map((s) => s.session_id)).toEqual(
      Array.from({ length: 25 }, (_, i) => `s-00${String(i * 4).padStart(2, '0')}`),
    );
    expect((await call('GET', '/api/schedules?status=sleeping')).status).toBe(400);
    const foreign = await call('GET', `/api/schedules?cursor=${(await call('GET', '/api/sessions?limit=1')).body.next_cursor}`);
    expect(foreign.status).toBe(400);
    expect(foreign.body.error.message).toMatch(/belongs to another list \(sessions\)/);
  });

  it('/api/sessions: pages by id, a prefix, no cron session; a store without the order is listed from its indexes', async () => {
    const { env, cron, call } = await setup(0);
    const { loops } = await storeSchedules(cron, env.config, 60);
    // Sessions an earlier version knew only from input, and a cron job's own session.
    const k = cron.keys;
    await cron.redis.sadd(k.sessionIndex, 'in-1', 'in-2', 'cron:abcdefabcdef', 'zz-last');
    for (const shard of k.shards()) await cron.redis.del(shard.sessionOrder, shard.sessionOrderBuilt);
    const ids = async (query: string) => {
      const out: string[] = [];
      let cursor: string | null = null;
      do {
        const res = await call('GET', `/api/sessions?${query}${cursor ? `&cursor=${cursor}` : ''}`);
        expect(res.status).toBe(200);
        out.push(...(res.body.data as Array<{ id: string }>).map((s) => s.id));
        cursor = res.body.next_cursor as string | null;
      } while (cursor);
      return out;
    };
    const expected = ['in-1', 'in-2', ...Array.from({ length: 60 }, (_, i) => `s-${String(i).padStart(4, '0')}`), 'zz-last'];
    expect(await ids('limit=7')).toEqual(expected);
    expect(await ids('limit=3&prefix=s-001')).toEqual(Array.from({ length: 10 }, (_, i) => `s-001${i}`));
    // Written after the order was made: listed through the write's own script.
    await loops.put(loopFixture({ sessionId: 'new-session' }), 'absent');
    expect(await ids('limit=50')).toContain('new-session');
    const page = await call('GET', '/api/sessions?limit=2');
    expect(page.body.data).toHaveLength(2);
    expect(page.body.data[0]).toMatchObject({ id: 'in-1', loop: null });
    expect(typeof page.body.next_cursor).toBe('string');
  });

  it('hermes status shows a page of loops and heartbeats and of cron jobs, each saying how to see more; --all shows every one; --json carries the cursors', async () => {
    const env = testEnv({ 'api_server.page_size': 10 });
    cleanups.push(() => env.cleanup());
    const cron = openCronService(env.config);
    cleanups.push(() => cron.close());
    // 30 sessions with a loop (every fifth paused, none finished), every fourth with a heartbeat too: 38 schedules.
    await storeSchedules(cron, env.config, 30);
    await Promise.all(Array.from({ length: 14 }, (_, i) => cron.store.put(job(i + 1), 'absent')));
    const goals = goalServiceFor(
      env.config,
      { redis: cron.redis, keys: cron.keys, queues: cron.queues },
      createLogger({ level: 'silent' }),
    );
    for (let i = 0; i < 12; i++) {
      const sessionId = `g-${String(i).padStart(2, '0')}`;
      await goals.put(
        createGoal({ goalId: `G${i}`, sessionId, text: `goal ${i}`, maxTurns: 5, origin: { surface: 'cli' }, now: Date.now() }),
        'absent',
      );
    }
    const status = async (opts: { all?: boolean; json?: boolean; limit?: string } = {}) => {
      const conn = await connectCli(env.config);
      const lines: string[] = [];
      try {
        await runStatus(env.config, conn, opts, (line) => lines.push(line));
      } finally {
        await conn.close();
      }
      return lines.join('\n');
    };
    const page = await status();
    expect(page).toMatch(/^10 loops and heartbeats shown; all of them: hermes status --all$/m);
    expect(page).toMatch(/^10 cron jobs shown; more: hermes cron list --cursor \S+ \(or --all\)$/m);
    expect(page).toMatch(/^10 goals shown; all of them: hermes status --all$/m);
    expect(page.match(/s-00\d\d/g)!.length).toBeLessThanOrEqual(10);
    const all = await status({ all: true });
    expect(all).not.toMatch(/shown;/);
    expect(new Set(all.match(/s-00\d\d/g)).size).toBe(30);
    expect(all).toMatch(/job-0014/);
    expect(new Set(all.match(/g-\d\d/g)).size).toBe(12);
    const json = JSON.parse(await status({ json: true, limit: '4' })) as Record<string, unknown>;
    expect(json.schedules).toHaveLength(4);
    expect(json.cron_jobs).toHaveLength(4);
    expect(typeof json.schedules_next_cursor).toBe('string');
    expect(typeof json.cron_jobs_next_cursor).toBe('string');
    const whole = JSON.parse(await status({ json: true, all: true })) as Record<string, unknown[] | null>;
    expect(whole.schedules).toHaveLength(38);
    expect(whole.cron_jobs).toHaveLength(14);
    expect(whole.goals).toHaveLength(12);
    expect(whole.schedules_next_cursor).toBeNull();
  });

  it('hermes status shows the newest page_size inputs set aside, not every session read; a store without their index gets it once', async () => {
    const env = testEnv({ 'api_server.page_size': 10 });
    cleanups.push(() => env.cleanup());
    const cron = openCronService(env.config);
    cleanups.push(() => cron.close());
    const limits = { occurrenceWindowMs: 3_600_000, eventsMaxLen: 100, retentionMs: 86_400_000 };
    const t0 = Date.now() - 60_000;
    for (let i = 0; i < 15; i++) {
      const sessionId = `aside-${String(i).padStart(2, '0')}`;
      await cron.redis.sadd(cron.keys.forSession(sessionId).sessionIndex, sessionId);
      const input = {
        sessionId,
        occurrenceId: `o${i}`,
        messageId: `m${i}`,
        text: `bad ${i}`,
        surface: 'cli' as const,
        receivedAt: t0,
        setAsideAt: t0 + i * 1000,
        attempts: 3,
        error: 'boom',
      };
      await setAsideInput(cron.redis, cron.keys, input, { type: 'input.set_aside' }, limits);
    }
    const status = async (opts: { all?: boolean; json?: boolean } = {}) => {
      const conn = await connectCli(env.config);
      const lines: string[] = [];
      try {
        await runStatus(env.config, conn, opts, (line) => lines.push(line));
      } finally {
        await conn.close();
      }
      return lines.join('\n');
    };
    const shown = (text: string) => [...new Set(text.match(/aside-\d\d/g))].sort();
    const newest = Array.from({ length: 10 }, (_, i) => `aside-${String(i + 5).padStart(2, '0')}`);
    const page = await status();
    expect(shown(page)).toEqual(newest);
    expect(page).toMatch(/^the newest 10 inputs set aside shown; all of them: hermes status --all$/m);
    expect(shown(await status({ all: true }))).toHaveLength(15);
    // As an earlier version left the store: the lists, no index of them.
    for (const k of cron.keys.shards()) await cron.redis.del(k.setAsideSessions, k.setAsideSessionsBuilt);
    expect(shown(await status())).toEqual(newest);
  });
});
