/**
 * `/api` completeness against the real cron service and schedule store:
 * `GET /api/cron/jobs/:ref` (with its next runs), `PATCH` (edit),
 * `GET …/runs`, 404 for unknown jobs, and `next_due_at` on every schedule of
 * `GET /api/schedules`. The request bodies are those of docs/GATEWAY.md.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from '../scheduler/logger.ts';
import { cronServiceFor } from '../scheduler/services.ts';
import { testEnv } from './support/env.ts';
import { startCronWorker } from './support/cron-worker.ts';
import { clients, waitFor } from './support/stack.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { startCronApiGateway } from './support/cron-api-gateway.ts';

const KEY = 'api-cron-key-42';
const cleanups = cleanupAfterEach();

async function setup() {
  const env = testEnv({ 'api_server.port': 0, 'api_server.key': KEY, 'cron.min_interval_seconds': 1 });
  cleanups.push(() => env.cleanup());
  const { call } = await startCronApiGateway(cleanups, env, KEY);
  return { env, call };
}

describe('/api/cron/jobs/:ref', () => {
  it('GET shows one job with its next 5 runs; PATCH edits it; GET …/runs lists its runs; unknown jobs are 404', async () => {
    const { env, call } = await setup();
    const created = await call('POST', '/api/cron/jobs', {
      schedule: '0 9 * * 1-5',
      prompt: 'summarise open pull requests',
      name: 'standup',
      tz: 'Europe/Berlin',
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;

    const shown = await call('GET', '/api/cron/jobs/STANDUP');
    expect(shown.status).toBe(200);
    expect(shown.body).toMatchObject({ id, name: 'standup', tz: 'Europe/Berlin', schedule: { kind: 'cron', expression: '0 9 * * 1-5' } });
    expect(shown.body.next_runs).toHaveLength(5);
    for (const t of shown.body.next_runs as string[]) {
      const local = new Date(t).toLocaleString('en-GB', {
        timeZone: 'Europe/Berlin',
        weekday: 'short',
        hour: '2-digit',
        minute: '2-digit',
      });
      expect(local).toMatch(/^(Mon|Tue|Wed|Thu|Fri) 09:00$/);
    }

    const edited = await call('PATCH', `/api/cron/jobs/${id}`, {
      schedule: 'daily at 7am',
      name: 'morning',
      repeat: 3,
      notify: 'never',
      overlap: 'buffer_all',
    });
    expect(edited.status).toBe(200);
    expect(edited.body).toMatchObject({
      id,
      name: 'morning',
      schedule: { kind: 'cron', expression: '0 7 * * *' },
      repeat: { times: 3 },
      notify: 'never',
      overlap: 'buffer_all',
    });
    expect((await call('GET', '/api/cron/jobs/morning')).body.next_runs[0]).toBe(edited.body.next_runs[0]);
    expect((await call('PATCH', `/api/cron/jobs/${id}`, { repeat: null })).body.repeat.times).toBeNull();
    expect((await call('GET', '/api/cron/jobs/standup')).status).toBe(404);

    // Bad edits change nothing.
    expect((await call('PATCH', `/api/cron/jobs/${id}`, { script: 'rm -rf /' })).status).toBe(400);
    expect((await call('PATCH', `/api/cron/jobs/${id}`, { schedule: 'sometimes' })).status).toBe(400);
    expect((await call('PATCH', `/api/cron/jobs/${id}`, {})).status).toBe(400);
    expect((await call('GET', `/api/cron/jobs/${id}`)).body).toMatchObject({ name: 'morning', schedule: { expression: '0 7 * * *' } });

    expect((await call('GET', `/api/cron/jobs/${id}/runs`)).body).toEqual({ object: 'list', data: [] });
    const worker = await startCronWorker(env.config);
    cleanups.push(() => worker.close());
    expect((await call('POST', `/api/cron/jobs/${id}/run`)).status).toBe(202);
    const runs = await waitFor(
      async () => {
        const r = await call('GET', `/api/cron/jobs/${id}/runs?limit=5`);
        return r.body.data.length === 1 ? r.body.data : undefined;
      },
      15_000,
      'the manual run recorded',
    );
    expect(runs[0]).toMatchObject({ job_id: id, trigger: 'manual' });
    expect((await call('GET', `/api/cron/jobs/${id}/runs?limit=0`)).status).toBe(400);

    for (const [method, path] of [
      ['GET', '/api/cron/jobs/nope'],
      ['GET', '/api/cron/jobs/nope/runs'],
      ['DELETE', '/api/cron/jobs/nope'],
    ] as const) {
      const r = await call(method, path);
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.body.error).toMatchObject({ type: 'not_found_error', code: 'unknown_job' });
    }
    expect((await call('PATCH', '/api/cron/jobs/nope', { name: 'x' })).status).toBe(404);
  });
});

describe('/api/cron/jobs targets without a bot', () => {
  it('a job naming a platform this gateway has no bot for carries warnings in POST, PATCH and GET, until its targets have one; local none', async () => {
    const { env, call } = await setup();
    const created = await call('POST', '/api/cron/jobs', {
      schedule: 'daily at 9am',
      prompt: 'p',
      deliver: 'telegram:42,slack:C0123ABCD,local',
    });
    expect(created.status).toBe(201);
    expect(created.body.deliver).toEqual(['telegram:42', 'slack:C0123ABCD', 'local']);
    expect(created.body.warnings).toEqual([
      'This gateway has no Telegram bot token (TELEGRAM_BOT_TOKEN or telegram.bot_token): deliveries to telegram:42 stay queued until a gateway with one runs.',
      'This gateway has no Slack bot token (SLACK_BOT_TOKEN or slack.bot_token): deliveries to slack:C0123ABCD stay queued until a gateway with one runs.',
    ]);
    const id = created.body.id as string;
    expect((await call('GET', `/api/cron/jobs/${id}`)).body.warnings).toEqual(created.body.warnings);
    const local = await call('POST', '/api/cron/jobs', { schedule: 'daily at 9am', prompt: 'p', deliver: 'local' });
    expect(local.status).toBe(201);
    expect(local.body).not.toHaveProperty('warnings');
    const named = await call('PATCH', `/api/cron/jobs/${id}`, { deliver: 'discord:99' });
    expect(named.body).toMatchObject({
      deliver: ['discord:99'],
      warnings: [expect.stringMatching(/^This gateway has no Discord bot token .*deliveries to discord:99 stay queued/)],
    });
    expect((await call('PATCH', `/api/cron/jobs/${id}`, { name: 'renamed' })).body.warnings).toHaveLength(1);
    expect((await call('PATCH', `/api/cron/jobs/${id}`, { deliver: 'local' })).body).not.toHaveProperty('warnings');
    expect((await call('GET', `/api/cron/jobs/${id}`)).body).not.toHaveProperty('warnings');
    // `origin` stands for the route the job was made from: a Telegram chat here.
    const c = clients(env);
    cleanups.push(() => c.close());
    const service = cronServiceFor(env.config, c, createLogger({ level: 'silent' }));
    const fromChat = {
      origin: { surface: 'telegram' as const, route: { platform: 'telegram', chatId: '-1001', threadId: '7' } },
      trusted: false,
    };
    const job = await service.add({ schedule: 'every 1h', prompt: 'p', deliver: 'origin' }, fromChat);
    expect((await call('GET', `/api/cron/jobs/${job.id}`)).body.warnings).toEqual([
      'This gateway has no Telegram bot token (TELEGRAM_BOT_TOKEN or telegram.bot_token): deliveries to origin (telegram:-1001:7) stay queued until a gateway with one runs.',
    ]);
  });
});

describe("a job that runs a command (script) is the CLI's", () => {
  it('/api can neither change, resume nor run it (400, nothing written, no run); pausing it works; the CLI still can', async () => {
    const { env, call } = await setup();
    const operator = { origin: { surface: 'cli' as const }, trusted: true };
    const c = clients(env);
    cleanups.push(() => c.close());
    const service = cronServiceFor(env.config, c, createLogger({ level: 'silent' }));
    const job = await service.add({ schedule: 'every 1h', prompt: 'operator text', script: 'cat', name: 'catjob', paused: true }, operator);
    const before = await call('GET', `/api/cron/jobs/${job.id}`);

    for (const [method, path, body] of [
      ['PATCH', `/api/cron/jobs/${job.id}`, { prompt: 'ATTACKER STDIN' }],
      ['PATCH', `/api/cron/jobs/${job.id}`, { schedule: 'every 1m', deliver: 'local' }],
      ['POST', `/api/cron/jobs/${job.id}/run`, {}],
      ['POST', `/api/cron/jobs/${job.id}/resume`, { run_now: true }],
      ['POST', `/api/cron/jobs/${job.id}/resume`, {}],
    ] as const) {
      const res = await call(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(400);
      expect(res.body.error.message).toBe(
        `Cron job ${job.id} "catjob" runs a command (script): only the CLI can ${method === 'PATCH' ? 'change' : path.endsWith('/run') ? 'run' : 'resume'} it.`,
      );
    }
    const after = await call('GET', `/api/cron/jobs/${job.id}`);
    expect(after.body).toEqual(before.body);
    expect((await call('GET', `/api/cron/jobs/${job.id}/runs`)).body.data).toEqual([]);
    expect(await service.runs(job.id, 10)).toEqual([]);

    expect((await call('POST', `/api/cron/jobs/${job.id}/pause`, {})).status).toBe(200);
    // the operator's own surface is not refused
    expect((await service.edit(job.id, { prompt: 'new operator text' }, operator)).prompt).toBe('new operator text');
    expect((await service.resume(job.id, operator)).job.state).toBe('scheduled');
  });
});

describe('GET /api/schedules', () => {
  it('carries next_due_at for every active schedule (null for paused ones)', async () => {
    const { env, call } = await setup();
    const c = clients(env);
    cleanups.push(() => c.close());
    const runner = { kind: 'command' as const, command: 'true', timeoutSeconds: 5 };
    const before = Date.now();
    await c.schedules.set(
      'a',
      'loop',
      { prompt: 'x', intervalSeconds: 600, times: null, until: null, notes: [] },
      { origin: { surface: 'api' }, runner },
    );
    await c.schedules.set(
      'b',
      'heartbeat',
      { prompt: 'y', intervalSeconds: 3600, times: null, until: null, notes: [] },
      { origin: { surface: 'api' }, runner },
    );
    await c.schedules.pause('b', 'heartbeat');
    const list = await call('GET', '/api/schedules');
    const a = list.body.data.find((s: { session_id: string }) => s.session_id === 'a');
    const b = list.body.data.find((s: { session_id: string }) => s.session_id === 'b');
    expect(typeof a.next_due_at).toBe('number');
    expect(a.next_due_at).toBeGreaterThanOrEqual(before - 1000);
    expect(b).toMatchObject({ status: 'paused', next_due_at: null });
  });
});

describe('limits on what a caller can grow', () => {
  it('a 1.9 MB cron schedule is a 400 naming the limit, answered before any parsing; nothing is created', async () => {
    const { call } = await setup();
    const huge = '0 '.repeat(950_000); // ~1.9 MB: a "cron expression" that would cost the parser seconds
    const res = await call('POST', '/api/cron/jobs', { schedule: huge, prompt: 'x' });
    expect(res.status).toBe(400);
    // The length rule answered (it is checked before the grammar, `parseSchedule`), not a parse error of the
    // grammar, which took 2.4–5.1 s on such input; its cost is measured by no timer here (a busy machine).
    expect(JSON.stringify(res.body)).toMatch(/The schedule is 1900000 characters; the limit is 256 \(cron\.max_schedule_chars\)/);
    expect((await call('GET', '/api/cron/jobs')).body.data).toEqual([]);
    const at256 = await call('POST', '/api/cron/jobs', { schedule: `every 2h${' '.repeat(248)}`, prompt: 'x' });
    expect(at256.status).toBe(201);
  });
});
