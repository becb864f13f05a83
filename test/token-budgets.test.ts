/**
 * Token budgets that keep what was paid for (docs/CONTEXT.md, "Budgets"; docs/CRON.md, "Economy"): the
 * answer that passes `agent.max_tokens_per_turn` is delivered, then its schedule pauses with the spend
 * named; a `--max-tokens` set below what the schedule's last turn cost is set with a warning saying what
 * one turn costs; a manual run of a cron job paused by its budget is refused naming the spend, unless
 * forced. Real Redis, real BullMQ, a real worker and gateway, the real `openai` client against the local
 * model server; the figures expected are the schedules' own records of what the server reported.
 */
import { describe } from 'vitest';
import { telegramOutboundQueue } from '../scheduler/delivery/outbound.ts';
import { enqueueInput } from '../scheduler/session/inbox.ts';
import type { Origin } from '../scheduler/session/origin.ts';
import type { LoopSpec } from '../scheduler/loop/loop-service.ts';
import { startAgentStack } from './support/agent-stack.ts';
import { it } from './support/cleanup.ts';
import { startCronApiGateway } from './support/cron-api-gateway.ts';
import { openCronService } from './support/cron-worker.ts';
import type { RecordedRequest } from './support/fake-openai.ts';
import { events, runHermes, waitFor, waitForEvents, waitForNoTickJobs, type TestClients } from './support/stack.ts';

const n = (x: number) => x.toLocaleString('en-US');
const isJudge = (req: RecordedRequest) => req.messages[0]?.role === 'system' && req.messages[0].content.startsWith('You judge');
const spec = (prompt: string, economy: LoopSpec['economy'] = {}, times: number | null = null): LoopSpec => ({
  prompt,
  intervalSeconds: 3600,
  times,
  until: null,
  notes: [],
  economy,
});
const telegram = (chatId: string): Origin => ({ surface: 'telegram', route: { platform: 'telegram', chatId } });
const cli = { origin: { surface: 'cli' as const }, trusted: true };

async function sentTo(c: TestClients, chatId: string): Promise<string[]> {
  const outbound = telegramOutboundQueue(c.keys, c.redis);
  try {
    const jobs = await outbound.getJobs(['waiting', 'delayed', 'prioritized', 'active', 'completed', 'failed']);
    return jobs
      .filter((j) => j.data.chatId === chatId)
      .sort((a, b) => a.timestamp - b.timestamp)
      .map((j) => j.data.text);
  } finally {
    await outbound.close();
  }
}

describe.concurrent('the answer that passes agent.max_tokens_per_turn', () => {
  it('is delivered, then the loop pauses naming the spend; no judge is asked', async ({ cleanups, expect }) => {
    const { c, model } = await startAgentStack(cleanups, { 'agent.max_tokens_per_turn': 50 });
    model.respond((req) => (isJudge(req) ? '{"verdict":"continue","reason":""}' : 'The build is green.'));
    await c.schedules.set(
      'b',
      'loop',
      { ...spec('tell me about the build'), until: 'the build is green' },
      { origin: telegram('71'), runner: { kind: 'agent' } },
    );
    const sent = await waitFor(async () => ((await sentTo(c, '71')).length >= 2 ? await sentTo(c, '71') : undefined), 20_000, 'two sends');
    const loop = (await c.loops.get('b', 'loop'))!;
    const used = loop.spend!.inputTokens + loop.spend!.outputTokens;
    expect(used).toBeGreaterThan(50);
    expect(sent).toEqual([
      'The build is green.',
      `Loop paused: one tick used ${n(used)} tokens, over agent.max_tokens_per_turn (50). /loop resume continues.`,
    ]);
    expect(loop).toMatchObject({ status: 'paused', failureStreak: 0, lastError: null });
    const [reply] = await waitForEvents(c, 'b', 'reply', 1);
    expect(reply!.data).toMatchObject({ text: 'The build is green.', outcome: 'paused' });
    expect((await c.sessions.transcript('b')).at(-1)).toMatchObject({ role: 'assistant', content: 'The build is green.' });
    // The turn's call was the only one: the --until judge would have spent more.
    expect(model.requests.filter(isJudge)).toHaveLength(0);
    expect(model.requests).toHaveLength(1);
  });

  it('is delivered on a goal, which pauses naming the spend', async ({ cleanups, expect }) => {
    const { c, model } = await startAgentStack(cleanups, { 'agent.max_tokens_per_turn': 50 });
    model.respond((req) => (isJudge(req) ? '{"verdict":"continue","reason":""}' : 'Half of the tests pass now.'));
    await enqueueInput(
      { redis: c.redis, keys: c.keys, queues: c.queues, maxChars: 10_000 },
      { sessionId: 'g', text: '/goal get the test suite green', messageId: 'm1', origin: telegram('72') },
    );
    const sent = await waitFor(
      async () => ((await sentTo(c, '72')).length >= 3 ? await sentTo(c, '72') : undefined),
      20_000,
      'three sends',
    );
    const reply = (await waitForEvents(c, 'g', 'reply', 1)).find((e) => e.data.source === 'goal')!;
    const spend = reply.data.spend as { inputTokens: number; outputTokens: number };
    const used = spend.inputTokens + spend.outputTokens;
    expect(sent.slice(1)).toEqual([
      'Half of the tests pass now.',
      `Goal paused: one turn used ${n(used)} tokens, over agent.max_tokens_per_turn (50). /goal resume continues.`,
    ]);
    expect(model.requests.filter(isJudge)).toHaveLength(0);
  });

  it('is delivered on a cron run, with the pause notice naming the spend after it', async ({ cleanups, expect }) => {
    const { c, env, model } = await startAgentStack(cleanups, { 'agent.max_tokens_per_turn': 50 });
    model.respond(() => 'Three pull requests wait for review.');
    const api = openCronService(env.config);
    cleanups.push(() => api.close());
    const job = await api.service.add({ schedule: 'every 1h', prompt: 'summarise open pull requests', name: 'prs' }, cli);
    await api.service.runNow(job.id, cli);
    const [run] = await waitFor(
      async () => {
        const runs = await api.store.runs(job.id, 10);
        return runs[0]?.deliveries.every((d) => d.status !== 'pending') ? runs : undefined;
      },
      20_000,
      'the run',
    );
    const used = run!.spend!.inputTokens + run!.spend!.outputTokens;
    const reason = `one run used ${n(used)} tokens, over agent.max_tokens_per_turn (50)`;
    expect(run).toMatchObject({ status: 'ok', output: 'Three pull requests wait for review.', error: null });
    expect(await api.store.get(job.id)).toMatchObject({ state: 'paused', paused_reason: reason, last_status: 'ok' });
    const [event] = await waitForEvents(c, `cron:${job.id}`, 'reply', 1);
    expect(event!.data.text).toBe(
      `Three pull requests wait for review.\n\nCron job "prs" (${job.id}) paused: Paused: ${reason}; \`hermes cron resume ${job.id}\` continues.`,
    );
  });
});

describe.concurrent('a --max-tokens below what one turn costs', () => {
  it('is set on a loop from the service, chat, the shell and /api, each time with a warning saying what one tick costs', async ({
    cleanups,
    expect,
  }) => {
    const KEY = 'budget-key';
    const { c, env, model } = await startAgentStack(cleanups, { 'api_server.port': 0, 'api_server.key': KEY });
    model.respond(() => 'All quiet on the queue.');
    const { call } = await startCronApiGateway(cleanups, env, KEY);
    // One tick in each session: its cost is what the next budget is measured against.
    const sessions = ['svc', 'chat', 'shell', 'api', 'roomy'];
    await Promise.all(
      sessions.map((s) =>
        c.schedules.set(s, 'loop', spec('check the queue', {}, 1), { origin: { surface: 'cli' }, runner: { kind: 'agent' } }),
      ),
    );
    const cost = async (s: string) =>
      await waitFor(
        async () => {
          const loop = await c.loops.get(s, 'loop');
          return loop?.status === 'finished' ? loop.spend!.inputTokens + loop.spend!.outputTokens : undefined;
        },
        20_000,
        `the tick of ${s}`,
      );
    const warning = (tokens: number) =>
      `Warning: --max-tokens 10 is less than one tick costs: the last one used about ${n(tokens)} tokens, so the next tick will pause it.`;

    const costs = Object.fromEntries(await Promise.all(sessions.map(async (s) => [s, await cost(s)] as const)));
    const svc = await c.schedules.set('svc', 'loop', spec('check the queue again', { maxTokens: 10 }), {
      origin: { surface: 'cli' },
      runner: { kind: 'agent' },
    });
    expect(svc).toContain(warning(costs.svc!));

    await enqueueInput(
      { redis: c.redis, keys: c.keys, queues: c.queues, maxChars: 10_000 },
      { sessionId: 'chat', text: '/loop 1h check the queue again --max-tokens 10', messageId: 'm1', origin: { surface: 'chat' } },
    );
    const answer = await waitFor(
      async () => (await events(c, 'chat', 'notice')).find((e) => e.data.command === '/loop'),
      20_000,
      'the answer to /loop',
    );
    expect(answer.data.text).toContain(warning(costs.chat!));

    const shell = await runHermes(env, ['loop', '1h', 'check', 'the', 'queue', 'again', '--max-tokens', '10', '--session', 'shell']);
    expect(shell.code).toBe(0);
    expect(shell.stdout).toContain(warning(costs.shell!));

    const api = await call('POST', '/api/schedules', { kind: 'loop', session_id: 'api', args: '1h check the queue again', max_tokens: 10 });
    expect(api.status).toBe(201);
    expect(api.body.reply).toContain(warning(costs.api!));

    // Each budget was set all the same.
    for (const s of ['svc', 'chat', 'shell', 'api']) expect((await c.loops.get(s, 'loop'))!.maxTokens).toBe(10);
    // A budget above one tick's cost: no warning.
    const roomy = await c.schedules.set('roomy', 'loop', spec('check the queue again', { maxTokens: costs.roomy! + 1 }), {
      origin: { surface: 'cli' },
      runner: { kind: 'agent' },
    });
    expect(roomy).not.toContain('Warning');
  });

  it('is set on a goal with a warning saying what one turn costs', async ({ cleanups, expect }) => {
    const { c, model } = await startAgentStack(cleanups, {});
    model.respond((req) => (isJudge(req) ? '{"verdict":"done","reason":"shipped"}' : 'Shipped it.'));
    const say = (text: string, messageId: string) =>
      enqueueInput(
        { redis: c.redis, keys: c.keys, queues: c.queues, maxChars: 10_000 },
        { sessionId: 'g', text, messageId, origin: { surface: 'chat' } },
      );
    await say('/goal ship the release', 'm1');
    const achieved = await waitFor(
      async () => {
        const goal = await events(c, 'g', 'notice');
        return goal.some((e) => String(e.data.text).startsWith('Goal achieved')) ? goal : undefined;
      },
      20_000,
      'the goal achieved',
    );
    expect(achieved.length).toBeGreaterThan(0);
    const turn = (await waitForEvents(c, 'g', 'reply', 1)).find((e) => e.data.source === 'goal')!;
    const spend = turn.data.spend as { inputTokens: number; outputTokens: number };
    await say('/goal ship the next release --max-tokens 10', 'm2');
    const notices = await waitFor(
      async () => {
        const all = await events(c, 'g', 'notice');
        const set = all.filter((e) => String(e.data.text).startsWith('Goal set'));
        return set.length >= 2 ? set : undefined;
      },
      20_000,
      'the second goal set',
    );
    expect(notices[1]!.data.text).toContain(
      `Warning: --max-tokens 10 is less than one turn costs: the last one used about ${n(spend.inputTokens + spend.outputTokens)} tokens, so the next turn will pause it.`,
    );
    expect(notices[0]!.data.text).not.toContain('Warning');
  });

  it('is set on a cron job by `cron edit` and PATCH /api, with the warning on stderr and in `warnings`', async ({ cleanups, expect }) => {
    const KEY = 'budget-key';
    const { env, model } = await startAgentStack(cleanups, { 'api_server.port': 0, 'api_server.key': KEY });
    model.respond(() => 'Two pull requests wait for review.');
    const api = openCronService(env.config);
    cleanups.push(() => api.close());
    const { call } = await startCronApiGateway(cleanups, env, KEY);
    const jobs = await Promise.all(
      ['by-cli', 'by-api'].map((name) => api.service.add({ schedule: 'every 1h', prompt: 'summarise open pull requests', name }, cli)),
    );
    await Promise.all(jobs.map((j) => api.service.runNow(j.id, cli)));
    const cost = async (id: string) =>
      await waitFor(
        async () => {
          const job = await api.store.get(id);
          return job?.spend?.calls ? job.spend.inputTokens + job.spend.outputTokens : undefined;
        },
        20_000,
        'the run',
      );
    const warning = (tokens: number) =>
      `--max-tokens 10 is less than one run costs: the last one used about ${n(tokens)} tokens, so the next run will pause it.`;

    const byCli = await runHermes(env, ['cron', 'edit', 'by-cli', '--max-tokens', '10']);
    expect(byCli.code).toBe(0);
    expect(byCli.stderr).toContain(`Warning: ${warning(await cost(jobs[0]!.id))}`);
    expect((await api.store.get(jobs[0]!.id))!.max_tokens).toBe(10);

    const apiCost = await cost(jobs[1]!.id);
    const patched = await call('PATCH', `/api/cron/jobs/${jobs[1]!.id}`, { max_tokens: 10 });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ max_tokens: 10, warnings: [warning(apiCost)] });
    // A budget above one run's cost: no warning.
    const roomy = await call('PATCH', `/api/cron/jobs/${jobs[1]!.id}`, { max_tokens: apiCost + 1 });
    expect(roomy.body.warnings).toBeUndefined();
    const roomyCli = await runHermes(env, ['cron', 'edit', 'by-cli', '--max-tokens', String(apiCost * 10)]);
    expect(roomyCli.stderr).not.toContain('Warning');
  });
});

describe.concurrent('a manual run of a cron job paused by its budget', () => {
  it('is refused naming the spend by `cron run`, POST /api/…/run and the console, and runs when forced', async ({ cleanups, expect }) => {
    const KEY = 'budget-key';
    const { c, env, model } = await startAgentStack(cleanups, { 'api_server.port': 0, 'api_server.key': KEY });
    model.respond(() => 'Nothing new.');
    const api = openCronService(env.config);
    cleanups.push(() => api.close());
    const { gw, call } = await startCronApiGateway(cleanups, env, KEY);
    const job = await api.service.add({ schedule: 'every 1h', prompt: 'anything new?', name: 'tight', max_tokens: 5 }, cli);
    const byHand = await api.service.add({ schedule: 'every 1h', prompt: 'anything new?', name: 'by-hand', paused: true }, cli);
    const runsOf = async (id: string) => (await api.store.runs(id, 100)).filter((r) => r.deliveries.every((d) => d.status !== 'pending'));
    const ran = (id: string, count: number) =>
      waitFor(async () => ((await runsOf(id)).length >= count ? true : undefined), 20_000, `${count} runs`);
    // Its first run spends more than its budget: the job pauses, the spend named.
    await api.service.runNow(job.id, cli);
    await ran(job.id, 1);
    const paused = await waitFor(
      async () => {
        const j = await api.store.get(job.id);
        return j?.state === 'paused' ? j : undefined;
      },
      20_000,
      'paused by its budget',
    );
    expect(paused.paused_reason).toMatch(
      /^token budget of 5 reached \(--max-tokens\): [\d,]+ tokens since it was set or resumed; in all 1 model call, /,
    );
    const refusal = `is paused by its token budget: ${paused.paused_reason}. A run now would spend more; resume it (a fresh allowance) or run it with`;

    const shell = await runHermes(env, ['cron', 'run', 'tight']);
    expect(shell).toMatchObject({ code: 2, stdout: '' });
    expect(shell.stderr).toBe(`hermes: Cron job "tight" (${job.id}) ${refusal} --force.\n`);

    const http = await call('POST', `/api/cron/jobs/${job.id}/run`);
    expect(http.status).toBe(400);
    expect(http.body.error).toMatchObject({
      code: 'SCHEDULE_INPUT',
      param: 'force',
      message: `Cron job "tight" (${job.id}) ${refusal} \`force\`.`,
    });
    expect((await call('POST', `/api/cron/jobs/${job.id}/run`, { force: 'yes' })).status).toBe(400);

    const basic = {
      authorization: `Basic ${Buffer.from(`hermes:${KEY}`).toString('base64')}`,
      'hx-request': 'true',
      origin: gw.httpAddress.url,
    };
    const panel = await fetch(`${gw.httpAddress.url}/ui/cron/${job.id}/run`, { method: 'POST', headers: basic });
    const html = await panel.text();
    expect(html).toContain('is paused by its token budget: token budget of 5 reached');
    expect(html).toContain(`hx-post="/ui/cron/${job.id}/run-anyway"`);
    // Nothing ran: only the first run is recorded once no tick job is left.
    await waitForNoTickJobs(c);
    expect(await runsOf(job.id)).toHaveLength(1);

    // Forced, from each surface: three more runs, the job still paused.
    const anyway = await fetch(`${gw.httpAddress.url}/ui/cron/${job.id}/run-anyway`, { method: 'POST', headers: basic });
    expect(anyway.status).toBe(200);
    expect(await anyway.text()).not.toContain('is paused by its token budget');
    await ran(job.id, 2);
    expect((await call('POST', `/api/cron/jobs/${job.id}/run`, { force: true })).status).toBe(202);
    await ran(job.id, 3);
    expect(await runHermes(env, ['cron', 'run', 'tight', '--force'])).toMatchObject({ code: 0 });
    await ran(job.id, 4);
    await waitForNoTickJobs(c);
    expect(await runsOf(job.id)).toHaveLength(4);
    expect((await api.store.get(job.id))!.state).toBe('paused');

    // A job paused by hand is no budget's: it runs without force.
    expect(await runHermes(env, ['cron', 'run', 'by-hand'])).toMatchObject({ code: 0 });
    await ran(byHand.id, 1);
  });
});
