/**
 * Signed webhooks (`POST /hooks/<name>`, docs/GATEWAY.md "Webhooks") on a real gateway, Redis, BullMQ,
 * worker, the fake Telegram and the fake model: a GitHub-signed `workflow_run` starts one turn in its
 * session whose input names the run's conclusion, and its reply reaches Telegram once; the same
 * delivery again is refused; unknown hooks, bad or stale signatures, senders outside `allow_from` and
 * oversized bodies are refused with nothing stored; a `run_job` hook runs its cron job now.
 */
import { describe } from 'vitest';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { githubSignature, hermesSignature } from '../gateway/hooks/hook-signature.ts';
import { createLogger } from '../scheduler/logger.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { openCronService } from './support/cron-worker.ts';
import type { TestEnv } from './support/env.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { startFakeTelegram } from './support/fake-telegram.ts';
import { events, openTestClients, startWorker, waitFor, type TestClients } from './support/stack.ts';
import { ALLOWED_USER, telegramEnv } from './support/telegram-env.ts';

const KEY = 'hooks-test-key-0123456789';
const SECRET = 'github-hook-secret-0123456789';

/** A `workflow_run` payload as GitHub sends it (the fields a template reads, and some it does not). */
function workflowRun(action: string, conclusion: string | null) {
  return {
    action,
    workflow_run: {
      id: 30433642,
      name: 'CI',
      head_branch: 'main',
      status: action === 'completed' ? 'completed' : 'queued',
      conclusion,
      html_url: 'https://github.com/octo/app/actions/runs/30433642',
    },
    repository: { full_name: 'octo/app' },
  };
}

/** POST `body` to `/hooks/<name>` signed as GitHub signs it (`secret` wrong or none to test refusals). */
async function postGithub(
  url: string,
  name: string,
  body: string,
  opts: { event?: string; delivery?: string; secret?: string | null } = {},
): Promise<{ status: number; body: Record<string, any> }> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'GitHub-Hookshot/test',
    'x-github-event': opts.event ?? 'workflow_run',
    'x-github-delivery': opts.delivery ?? crypto.randomUUID(),
  };
  if (opts.secret !== null) headers['x-hub-signature-256'] = githubSignature(opts.secret ?? SECRET, body);
  const res = await fetch(`${url}/hooks/${name}`, { method: 'POST', headers, body });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

async function postHermes(url: string, name: string, body: string, t: number, headers: Record<string, string> = {}) {
  const res = await fetch(`${url}/hooks/${name}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-hermes-signature': hermesSignature(SECRET, body, t), ...headers },
    body,
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

async function gateway(cleanups: CleanUp[], env: TestEnv): Promise<Gateway> {
  const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: 'silent' }) });
  cleanups.push(() => gw.close());
  return gw;
}

/** Nothing a delivery would store: no delivery mark, no event in `session`, no inbox job. */
async function expectNothingStored(c: TestClients, env: TestEnv, session: string, expect: typeof import('vitest').expect) {
  expect(await c.redis.keys(`${env.prefix}*hook*`)).toEqual([]);
  expect(await events(c, session)).toEqual([]);
  const counts = await c.queues.acrossShards('inbox').getJobCounts('waiting', 'prioritized', 'active', 'completed', 'failed', 'delayed');
  expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(0);
}

describe.concurrent('signed webhooks', () => {
  it('a GitHub-signed workflow_run starts one turn naming the conclusion; its reply reaches Telegram once; a replayed delivery is refused', async ({
    cleanups,
    expect,
  }) => {
    const fake = await startFakeTelegram();
    const model = await startFakeOpenAI();
    model.respond(() => 'CI is green: deploy when ready.');
    cleanups.push(
      () => fake.close(),
      () => model.close(),
    );
    const session = `telegram:${ALLOWED_USER}`;
    const env = telegramEnv(fake, {
      'agent.base_url': model.baseUrl,
      'agent.api_key': 'k',
      'api_server.key': KEY,
      'hooks.ci': {
        session,
        secret: SECRET,
        signature: 'github',
        template:
          'CI run {{workflow_run.name}} on {{workflow_run.head_branch}} finished: {{workflow_run.conclusion}}. Tell me in one line.',
        events: ['workflow_run'],
        match: { action: 'completed' },
      },
    });
    const { c } = openTestClients(cleanups, {}, () => env);
    const worker = await startWorker(env);
    cleanups.push(() => worker.drain());
    const gw = await gateway(cleanups, env);
    const url = gw.httpAddress.url;

    // GitHub's ping when the hook is made, and a run that only started: answered, nothing started.
    expect(await postGithub(url, 'ci', JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1 }), { event: 'ping' })).toEqual({
      status: 202,
      body: { status: 'ignored', hook: 'ci', reason: 'ping' },
    });
    expect((await postGithub(url, 'ci', JSON.stringify(workflowRun('requested', null)))).body).toMatchObject({ reason: 'match' });
    expect((await postGithub(url, 'ci', '{}', { event: 'push' })).body).toMatchObject({ reason: 'event' });
    expect(await c.redis.keys(`${env.prefix}*hook*`)).toEqual([]);

    const body = JSON.stringify(workflowRun('completed', 'success'));
    const delivery = crypto.randomUUID();
    const first = await postGithub(url, 'ci', body, { delivery });
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    expect(first.body).toMatchObject({ status: 'accepted', hook: 'ci', action: 'turn', session, occurrence_id: expect.any(String) });
    // The same delivery again (a replay, or GitHub's redelivery of it): refused, nothing queued.
    const replay = await postGithub(url, 'ci', body, { delivery });
    expect([replay.status, replay.body.error?.code]).toEqual([409, 'duplicate_delivery']);

    await waitFor(() => fake.sent.length >= 1, 20_000, 'the reply delivered to Telegram');
    expect([fake.sent[0]!.chat_id, fake.sent[0]!.text]).toEqual([String(ALLOWED_USER), 'CI is green: deploy when ready.']);
    // The turn's input names the run's conclusion, on surface webhook.
    const asked = model.requests.map((r) => r.messages.filter((m) => m.role === 'user').at(-1)?.content);
    expect(asked).toEqual(['CI run CI on main finished: success. Tell me in one line.']);
    const replies = await events(c, session, 'reply');
    expect(replies.map((r) => r.data.occurrenceId)).toEqual([first.body.occurrence_id]);
    const transcript = await c.sessions.transcript(session);
    expect(transcript.map((m) => [m.role, m.surface])).toEqual([
      ['user', 'webhook'],
      ['assistant', 'webhook'],
    ]);
    // One inbox job in all: the replay queued nothing, so no second reply can come.
    const counts = await c.queues.acrossShards('inbox').getJobCounts('waiting', 'prioritized', 'active', 'completed', 'failed', 'delayed');
    expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(1);
    expect(fake.sent).toHaveLength(1);
  });

  it('unknown hook 404; bad or missing signature, stale or future timestamp 401; outside allow_from 403; 2 MB body 413 — nothing stored', async ({
    cleanups,
    expect,
  }) => {
    const { env, c } = openTestClients(cleanups, {
      'api_server.port': 0,
      'api_server.key': KEY,
      'hooks.gh': { session: 'ops', secret: SECRET, signature: 'github' },
      'hooks.alerts': { session: 'ops', secret: SECRET, template: 'Alert: {{alert.name}} is {{alert.state}}' },
      'hooks.lan': { session: 'ops', secret: SECRET, allow_from: ['10.0.0.0/8', '192.168.1.7'] },
      'hooks.local': { session: 'ops', secret: SECRET, allow_from: ['10.0.0.0/8', '127.0.0.0/8', '::1'] },
    });
    const gw = await gateway(cleanups, env);
    const url = gw.httpAddress.url;
    const body = JSON.stringify({ alert: { name: 'disk', state: 'firing' } });
    const now = Math.floor(Date.now() / 1000);

    const unknown = await postHermes(url, 'nope', body, now);
    expect([unknown.status, unknown.body.error?.code]).toEqual([404, 'unknown_hook']);
    // The API key is no way in either: the signature is this route's key.
    const keyed = await fetch(`${url}/hooks/alerts`, { method: 'POST', headers: { authorization: `Bearer ${KEY}` }, body });
    expect(keyed.status).toBe(401);
    expect((await postGithub(url, 'gh', body, { secret: 'not-the-secret-0123456789' })).status).toBe(401);
    expect((await postGithub(url, 'gh', body, { secret: null })).status).toBe(401);
    // A body changed after signing.
    const res = await fetch(`${url}/hooks/gh`, {
      method: 'POST',
      headers: { 'x-hub-signature-256': githubSignature(SECRET, body), 'x-github-delivery': 'd-1', 'x-github-event': 'x' },
      body: body.replace('firing', 'resolved'),
    });
    expect(res.status).toBe(401);
    // GitHub's scheme on a hook signed the hermes way, and the other way round.
    expect((await postGithub(url, 'alerts', body)).status).toBe(401);
    expect((await postHermes(url, 'gh', body, now)).status).toBe(401);
    // Five minutes and a second old (time only makes it older); a minute past the tolerance ahead.
    const stale = await postHermes(url, 'alerts', body, Math.floor(Date.now() / 1000) - 301);
    expect([stale.status, stale.body.error?.code]).toEqual([401, 'invalid_signature']);
    expect((await postHermes(url, 'alerts', body, Math.floor(Date.now() / 1000) + 360)).status).toBe(401);
    const lan = await postHermes(url, 'lan', body, now);
    expect([lan.status, lan.body.error?.code]).toEqual([403, 'sender_not_allowed']);
    // 2 MB, signed: refused for its size before its signature is looked at.
    const big = JSON.stringify({ alert: { name: 'disk', state: 'firing', log: 'x'.repeat(2 * 1024 * 1024) } });
    const tooBig = await postHermes(url, 'alerts', big, now);
    expect([tooBig.status, tooBig.body.error?.code]).toEqual([413, 'body_too_large']);
    await expectNothingStored(c, env, 'ops', expect);

    // The same request signed now is taken, and its rendered input queued on surface webhook.
    const ok = await postHermes(url, 'alerts', body, now, { 'x-hermes-delivery': 'alert-1' });
    expect(ok.status, JSON.stringify(ok.body)).toBe(202);
    const user = await events(c, 'ops', 'user');
    expect(user.map((e) => [e.data.text, e.data.surface])).toEqual([['Alert: disk is firing', 'webhook']]);
    expect((await postHermes(url, 'alerts', body, now, { 'x-hermes-delivery': 'alert-1' })).status).toBe(409);
    // Without a delivery id, the signature is the delivery: the same signed request again is a replay.
    const t2 = now - 1;
    expect((await postHermes(url, 'alerts', body, t2)).status).toBe(202);
    expect((await postHermes(url, 'alerts', body, t2)).status).toBe(409);
    expect(await events(c, 'ops', 'user')).toHaveLength(2);
    // A sender inside allow_from (this test's loopback) is taken.
    expect((await postHermes(url, 'local', body, now, { 'x-hermes-delivery': 'local-1' })).status).toBe(202);
  });

  it('a payload that would render as a slash command is refused (422), nothing stored', async ({ cleanups, expect }) => {
    const { env, c } = openTestClients(cleanups, {
      'api_server.port': 0,
      'api_server.key': KEY,
      'hooks.raw': { session: 'ops', secret: SECRET, template: '{{text}}' },
    });
    const gw = await gateway(cleanups, env);
    const refused = await postHermes(
      gw.httpAddress.url,
      'raw',
      JSON.stringify({ text: '/loop 1m rm -rf --run' }),
      Math.floor(Date.now() / 1000),
    );
    expect([refused.status, refused.body.error?.code]).toEqual([422, 'hook_input_is_command']);
    await expectNothingStored(c, env, 'ops', expect);
  });

  it('a hook without a template names the event when the sender sent one, and puts in no empty name when it did not', async ({
    cleanups,
    expect,
  }) => {
    const { env, c } = openTestClients(cleanups, {
      'api_server.port': 0,
      'api_server.key': KEY,
      'hooks.plain': { session: 'ops', secret: SECRET },
    });
    const gw = await gateway(cleanups, env);
    const now = Math.floor(Date.now() / 1000);
    const body = '{"state":"done"}';
    expect(
      (await postHermes(gw.httpAddress.url, 'plain', body, now, { 'x-hermes-delivery': 'p-1', 'x-hermes-event': 'deploy' })).status,
    ).toBe(202);
    expect((await postHermes(gw.httpAddress.url, 'plain', body, now, { 'x-hermes-delivery': 'p-2' })).status).toBe(202);
    const user = await events(c, 'ops', 'user');
    expect(user.map((e) => e.data.text)).toEqual([
      'Webhook plain received event "deploy": {"state":"done"}',
      'Webhook plain received a delivery: {"state":"done"}',
    ]);
  });

  it('a run_job hook runs its cron job now, once per delivery', async ({ cleanups, expect }) => {
    const { env, c } = openTestClients(cleanups, {
      'api_server.port': 0,
      'api_server.key': KEY,
      'hooks.nightly': { cron_job: 'digest', secret: SECRET },
      'hooks.missing': { cron_job: 'no-such-job', secret: SECRET },
    });
    const cron = openCronService(env.config);
    cleanups.push(() => cron.close());
    const job = await cron.service.add(
      { schedule: 'every 1h', prompt: 'write the digest', name: 'digest' },
      { origin: { surface: 'cli' }, trusted: true },
    );
    const gw = await gateway(cleanups, env);
    const now = Math.floor(Date.now() / 1000);
    const ran = await postHermes(gw.httpAddress.url, 'nightly', '{}', now, { 'x-hermes-delivery': 'n-1' });
    expect(ran.status, JSON.stringify(ran.body)).toBe(202);
    expect(ran.body).toMatchObject({ status: 'accepted', action: 'run_job', cron_job: job.id, run_id: expect.any(String) });
    const queued = await c.queues.forCronJob(job.id).ticks.getJob(ran.body.run_id as string);
    expect(queued?.data).toMatchObject({ jobId: job.id, manual: true });
    expect((await postHermes(gw.httpAddress.url, 'nightly', '{}', now, { 'x-hermes-delivery': 'n-1' })).status).toBe(409);
    // A hook naming a job that is not there: said so, and the delivery is not taken (a retry can succeed later).
    const missing = await postHermes(gw.httpAddress.url, 'missing', '{}', now, { 'x-hermes-delivery': 'm-1' });
    expect([missing.status, missing.body.error?.code]).toEqual([409, 'hook_job_missing']);
    expect(await c.redis.keys(`${env.prefix}*hook*missing*`)).toEqual([]);
  });
});
