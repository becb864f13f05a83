/**
 * Loops and heartbeats take the delivery targets cron jobs take (scheduler/delivery/deliver-list.ts),
 * on every surface that sets one — `hermes loop|heartbeat --deliver`, `/loop … --deliver` in a chat,
 * `deliver` of `POST /api/schedules`:
 *
 * - a platform target without its bot token in this configuration is set, with the warning `hermes cron
 *   add` gives (stderr in the shell, the reply in a chat and `/api`);
 * - a webhook on `delivery.webhook_allow` gets each reply and notice as a signed POST
 *   (worker/runtime/webhook-sender.ts, the sender of cron runs); one the rule refuses is refused when the
 *   schedule is set (exit 2, 400, the chat's reply), naming the rule, and nothing is stored.
 *
 * Real Redis, a real worker and gateway, the tests' model server and a local webhook receiver.
 */
import { createHmac } from 'node:crypto';
import { describe } from 'vitest';
import { formatEvent } from '../cli/event-format.ts';
import { enqueueInput } from '../scheduler/session/inbox.ts';
import type { SessionEvent } from '../scheduler/session/session-store.ts';
import { startCronApiGateway } from './support/cron-api-gateway.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { startWebhookReceiver } from './support/http.ts';
import { runLoopCli } from './support/loop-cli.ts';
import { events, openTestClients, startWorker, startWorkerStack, waitFor, waitForEvents, type TestClients } from './support/stack.ts';
import { it, type CleanUp } from './support/cleanup.ts';

const KEY = 'loop-delivery-test-key-0123456789';
const SECRET = 'webhook-signing-secret-for-tests';
const SLACK_WARNING =
  'has no Slack bot token (SLACK_BOT_TOKEN or slack.bot_token): deliveries to slack:C0123ABCD stay queued until a gateway with one runs.';
const REFUSED =
  /Webhook target http:\/\/127\.0\.0\.1:9 is a loopback address: internal addresses are refused; an operator can open a host with delivery\.webhook_allow\./;

/** A chat command to a session, as the terminal chat sends it; resolves with the worker's answer (a `notice` naming the command). */
async function chat(c: TestClients, sessionId: string, text: string): Promise<string> {
  await enqueueInput(
    { redis: c.redis, keys: c.keys, queues: c.queues, maxChars: 10_000 },
    { sessionId, text, messageId: `${Date.now()}`, origin: { surface: 'chat' } },
  );
  const answer = await waitFor(
    async () => (await events(c, sessionId, 'notice')).find((e) => e.data.command !== undefined),
    15_000,
    `the answer to ${text}`,
  );
  return String(answer.data.text);
}

/** A model that answers every turn with `reply`. */
async function model(cleanups: CleanUp[], reply: string): Promise<string> {
  const m = await startFakeOpenAI();
  m.respond(() => reply);
  cleanups.push(() => m.close());
  return m.baseUrl;
}

describe.concurrent('a platform target without its bot token', () => {
  it('is set, with a warning on stderr in the shell; not a word when the token is there', async ({ cleanups, expect }) => {
    const { env, c } = openTestClients(cleanups);
    const loop = await runLoopCli(env.config, ['loop', '10m', 'watch', 'it', '--run', 'true', '--deliver', 'slack:C0123ABCD', '-s', 'cli']);
    expect(loop.code, loop.stderr).toBe(0);
    expect(loop.stderr).toBe(`Warning: this shell's configuration ${SLACK_WARNING}\n`);
    expect(loop.stdout).toMatch(/^Loop set: every 10m/);
    expect((await c.loops.get('cli', 'loop'))?.deliver).toEqual(['slack:C0123ABCD']);
    const hb = await runLoopCli(env.config, [
      'heartbeat',
      'every',
      '1h',
      'news?',
      '--run',
      'true',
      '--deliver',
      'discord:42,local',
      '-s',
      'cli',
    ]);
    expect(hb.code, hb.stderr).toBe(0);
    expect(hb.stderr).toBe(
      "Warning: this shell's configuration has no Discord bot token (DISCORD_BOT_TOKEN or discord.bot_token): deliveries to discord:42 stay queued until a gateway with one runs.\n",
    );
    expect((await c.loops.get('cli', 'heartbeat'))?.deliver).toEqual(['discord:42', 'local']);

    const withToken = openTestClients(cleanups, { 'slack.bot_token': 'xoxb-configured' });
    const quiet = await runLoopCli(withToken.env.config, ['loop', '10m', 'watch', 'it', '--run', 'true', '--deliver', 'slack:C0123ABCD']);
    expect(quiet).toMatchObject({ code: 0, stderr: '' });
  });

  it('is set from a chat and from /api, the reply ending with the warning', async ({ cleanups, expect }) => {
    const { env, c } = openTestClients(cleanups, { 'api_server.port': 0, 'api_server.key': KEY });
    await startWorker(env).then((w) => cleanups.push(() => w.drain()));
    const reply = await chat(c, 'chat', '/loop 10m watch the queue --deliver slack:C0123ABCD');
    expect(reply).toMatch(/^Loop set: every 10m/);
    expect(reply.split('\n')).toContain(`Warning: This configuration ${SLACK_WARNING}`);
    expect((await c.loops.get('chat', 'loop'))?.deliver).toEqual(['slack:C0123ABCD']);

    const { call } = await startCronApiGateway(cleanups, env, KEY);
    const res = await call('POST', '/api/schedules', {
      kind: 'heartbeat',
      session_id: 'api',
      interval_seconds: 3600,
      prompt: 'news?',
      deliver: 'slack:C0123ABCD',
    });
    expect(res.status).toBe(201);
    expect(String(res.body.reply).split('\n')).toContain(`Warning: This configuration ${SLACK_WARNING}`);
    expect(res.body.schedule).toMatchObject({ kind: 'heartbeat', deliver: ['slack:C0123ABCD'] });
  });
});

describe.concurrent('a webhook target', () => {
  it('on the allow-list gets each reply and notice as a signed POST, as a cron run does', async ({ cleanups, expect }) => {
    const hook = await startWebhookReceiver(cleanups);
    const url = `http://127.0.0.1:${hook.port}/hook?token=in-the-query`;
    const { env, c } = await startWorkerStack(cleanups, {
      'agent.base_url': await model(cleanups, 'the build is green'),
      'agent.api_key': 'k',
      'delivery.webhook_allow': '127.0.0.1',
      'delivery.webhook_secret': SECRET,
    });
    const set = await runLoopCli(env.config, ['loop', '1s', 'check', 'the', 'build', '--times', '2', '--deliver', url, '-s', 'hooked']);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stderr).toBe('');
    // Two replies, then the notice that the loop finished (`--times 2`).
    await waitFor(() => hook.posts.length >= 3 || undefined, 30_000, 'three POSTs');
    const posts = hook.posts.map((p) => ({ ...p, json: JSON.parse(p.body) as Record<string, unknown> }));
    for (const p of posts) {
      expect(p.path).toBe('/hook?token=in-the-query');
      expect(p.headers['content-type']).toBe('application/json');
      expect(p.headers['x-hermes-signature-256']).toBe(`sha256=${createHmac('sha256', SECRET).update(p.body).digest('hex')}`);
      expect(p.headers['idempotency-key']).toBe(p.json.occurrence_id);
      expect(p.json).toMatchObject({ session_id: 'hooked', kind: 'loop', loop_id: expect.any(String) });
    }
    const replies = posts.filter((p) => p.json.event === 'reply').sort((a, b) => Number(a.json.tick) - Number(b.json.tick));
    expect(replies.map((p) => [p.json.tick, p.json.output])).toEqual([
      [1, 'the build is green'],
      [2, 'the build is green'],
    ]);
    expect(posts.find((p) => p.json.event === 'notice')?.json.output).toMatch(/^Loop finished: /);
    expect(new Set(posts.map((p) => p.json.occurrence_id)).size).toBe(3);
    // Each outcome is on the session stream, the address without its path or query.
    const delivered = await waitFor(
      async () => ((await events(c, 'hooked', 'delivery')).length >= 3 ? await events(c, 'hooked', 'delivery') : undefined),
      10_000,
      'the delivery events',
    );
    expect(delivered.map((e) => e.data)).toEqual(
      Array(3).fill(
        expect.objectContaining({ platform: 'webhook', target: `http://127.0.0.1:${hook.port}`, status: 'sent', httpStatus: 204 }),
      ),
    );
    expect(JSON.stringify(delivered)).not.toContain('in-the-query');
  });

  it('that does not take it: the delivery event says why, and the loop goes on', async ({ cleanups, expect }) => {
    const hook = await startWebhookReceiver(cleanups, () => ({ status: 500 }));
    const { env, c } = await startWorkerStack(cleanups, {
      'agent.base_url': await model(cleanups, 'still red'),
      'agent.api_key': 'k',
      'delivery.webhook_allow': '127.0.0.1',
    });
    expect(
      (await runLoopCli(env.config, ['loop', '10m', 'check', '--deliver', `http://127.0.0.1:${hook.port}/h`, '-s', 'refusing'])).code,
    ).toBe(0);
    const [failed] = await waitForEvents(c, 'refusing', 'delivery', 1);
    expect(failed!.data).toMatchObject({ platform: 'webhook', status: 'failed', error: 'HTTP 500', httpStatus: 500, willRetry: false });
    expect(hook.posts[0]!.headers['x-hermes-signature-256']).toBeUndefined(); // no secret configured: not signed
    expect(formatEvent(failed as SessionEvent)).toMatch(
      new RegExp(`✗ reply not sent to http://127\\.0\\.0\\.1:${hook.port}: HTTP 500 \\(not retried\\)$`),
    );
    expect(await c.loops.get('refusing', 'loop')).toMatchObject({ status: 'active', ticksUsed: 1, failureStreak: 0 });
  });

  it('the rule refuses is refused when it is set — exit 2, 400, the chat reply — naming the rule; nothing is stored', async ({
    cleanups,
    expect,
  }) => {
    const { env, c } = openTestClients(cleanups, { 'api_server.port': 0, 'api_server.key': KEY });
    for (const args of [
      ['loop', '10m', 'x', '--deliver', 'http://127.0.0.1:9/hook', '-s', 'refused'],
      ['heartbeat', 'every', '1h', 'x', '--deliver', 'local,http://127.0.0.1:9/hook', '-s', 'refused'],
      ['loop', '10m', 'x --deliver http://127.0.0.1:9/hook', '-s', 'refused'], // the flag in the grammar's words
    ]) {
      const r = await runLoopCli(env.config, args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(REFUSED);
    }
    const bad = await runLoopCli(env.config, ['loop', '10m', 'x', '--deliver', 'slack:1', '-s', 'refused']);
    expect(bad).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^hermes: Invalid delivery target "slack:1": use slack:<channel id>/),
    });

    const { call } = await startCronApiGateway(cleanups, env, KEY);
    const res = await call('POST', '/api/schedules', {
      kind: 'loop',
      session_id: 'refused',
      args: '10m x',
      deliver: 'http://169.254.169.254/latest/meta-data/',
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      param: 'deliver',
      message:
        'Webhook target http://169.254.169.254 is a linkLocal address: internal addresses are refused; an operator can open a host with delivery.webhook_allow.',
    });

    await startWorker(env).then((w) => cleanups.push(() => w.drain()));
    expect(await chat(c, 'refused', '/loop 10m x --deliver http://127.0.0.1:9/hook')).toMatch(REFUSED);
    expect(await c.loops.get('refused', 'loop')).toBeNull();
    expect(await c.loops.get('refused', 'heartbeat')).toBeNull();

    // The near miss: the same address once the operator opens it.
    const open = openTestClients(cleanups, { 'delivery.webhook_allow': '127.0.0.1' });
    expect((await runLoopCli(open.env.config, ['loop', '10m', 'x', '--run', 'true', '--deliver', 'http://127.0.0.1:9/hook'])).code).toBe(0);
    expect((await open.c.loops.get('main', 'loop'))?.deliver).toEqual(['http://127.0.0.1:9/hook']);
  });
});
