/**
 * `hermes mcp` and the gateway's `/mcp` (gateway/mcp/; docs/MCP.md) through the official MCP client
 * of the SDK: over stdio against a spawned `hermes mcp`, its tools listed, a cron job "weekdays at
 * 9am" in Europe/Berlin created and its next fires read back, the job shown by `hermes cron list`;
 * over Streamable HTTP the same with the API key, 401 without; a command turn refused unless
 * `mcp.command_turns`; the per-day limit of creations; every change on the session's stream; a loop
 * made over MCP fires and its reply reaches (the fake) Telegram; `send` starts a turn whose reply is in
 * the transcript resource.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, type ExpectStatic } from 'vitest';
import { MCP_TOOL_NAMES } from '../scheduler/config/config.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { startCronApiGateway } from './support/cron-api-gateway.ts';
import { clients, events, HERMES_BIN, openTestClients, runHermes, startWorker, waitFor, type TestClients } from './support/stack.ts';
import { startFakeTelegram } from './support/fake-telegram.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { ALLOWED_USER, telegramEnv } from './support/telegram-env.ts';
import { startGateway } from '../gateway/gateway-process.ts';
import { createLogger } from '../scheduler/logger.ts';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { mcpDepsFor } from '../gateway/mcp/mcp-deps.ts';
import { createMcpServer } from '../gateway/mcp/mcp-server.ts';
import type { TestEnv } from './support/env.ts';
import { camelKeys } from './support/wire-case.ts';

const KEY = 'mcp-test-key-0123456789';

/** A client of `hermes mcp` spawned on `env`, closed (and the process ended) through `cleanups`. */
async function stdioClient(cleanups: CleanUp[], env: TestEnv): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [HERMES_BIN, 'mcp'],
    env: Object.fromEntries(Object.entries(env.childEnv).filter((e): e is [string, string] => e[1] !== undefined)),
    stderr: 'pipe',
  });
  const client = new Client({ name: 'hermes-test', version: '1.0.0' });
  await client.connect(transport);
  cleanups.push(() => client.close());
  return client;
}

/** A client of the gateway's `/mcp` with `key` (none: no Authorization header). */
async function httpClient(cleanups: CleanUp[], url: string, key?: string): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
    requestInit: key ? { headers: { Authorization: `Bearer ${key}` } } : {},
  });
  const client = new Client({ name: 'hermes-test', version: '1.0.0' });
  await client.connect(transport);
  cleanups.push(() => client.close());
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<{ text: string; isError: boolean }> {
  const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
  const text = r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
  return { text, isError: r.isError === true };
}

/** Create "weekdays at 9am" in Europe/Berlin and read its next fires after a Friday noon: the next Monday and Tuesday 09:00 CET. */
async function weekdaysAtNine(client: Client, c: TestClients, expect: ExpectStatic): Promise<string> {
  const created = await call(client, 'create_schedule', {
    kind: 'cron',
    schedule: 'weekdays at 9am',
    tz: 'Europe/Berlin',
    prompt: 'summarise open pull requests',
    name: 'pull requests',
  });
  expect(created.isError, created.text).toBe(false);
  const job = (JSON.parse(created.text) as { schedule: { id: string; tz: string; origin?: unknown; created_by: unknown } }).schedule;
  expect(job.tz).toBe('Europe/Berlin');
  expect(job.created_by).toEqual({ by: 'agent', surface: 'mcp', session_id: 'main' });
  const next = await call(client, 'next', { id: job.id, from: '2026-03-06T12:00:00Z', count: 2 });
  expect(next.isError, next.text).toBe(false);
  expect(JSON.parse(next.text)).toEqual({
    schedule: 'weekdays at 09:00',
    tz: 'Europe/Berlin',
    next: [
      { utc: '2026-03-09T08:00:00Z', local: expect.stringMatching(/^2026-03-09 09:00/) },
      { utc: '2026-03-10T08:00:00Z', local: expect.stringMatching(/^2026-03-10 09:00/) },
    ],
  });
  // The change is told on the session's stream, by `mcp`.
  const notices = await events(c, 'main', 'notice');
  expect(notices.map((n) => [n.data.by, n.data.action, (n.data.schedule as { id: string }).id])).toEqual([['mcp', 'create', job.id]]);
  return job.id;
}

describe.concurrent('hermes as an MCP server', () => {
  it('over stdio: tools listed, a cron job made and its fires read back, shown by `hermes cron list`', async ({ cleanups, expect }) => {
    const { env, c } = openTestClients(cleanups, {});
    const client = await stdioClient(cleanups, env);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...MCP_TOOL_NAMES].sort());
    const create = tools.find((t) => t.name === 'create_schedule')!;
    expect(create.description).toMatch(/durable schedule/);
    expect(Object.keys(create.inputSchema.properties ?? {})).toEqual(
      expect.arrayContaining(['kind', 'schedule', 'tz', 'prompt', 'interval']),
    );
    const id = await weekdaysAtNine(client, c, expect);
    const list = await runHermes(env, ['cron', 'list', '--json']);
    expect(list.code, list.stderr).toBe(0);
    const jobs = JSON.parse(list.stdout) as Array<{ id: string; name: string; created_by: unknown }>;
    expect(jobs.map((j) => [j.id, j.name])).toEqual([[id, 'pull requests']]);
  });

  it('a command turn is refused by default (nothing written), and made when mcp.command_turns allows it', async ({ cleanups, expect }) => {
    const { env, c } = openTestClients(cleanups, { 'api_server.port': 0, 'api_server.key': KEY });
    const { gw } = await startCronApiGateway(cleanups, env, KEY);
    const client = await httpClient(cleanups, gw.httpAddress.url, KEY);
    const loop = await call(client, 'create_schedule', { kind: 'loop', interval: '5m', prompt: 'disk use', command: 'df -h /' });
    expect(loop).toEqual({ isError: true, text: expect.stringContaining('mcp.command_turns') });
    const cron = await call(client, 'create_schedule', { kind: 'cron', schedule: 'every 2h', prompt: 'x', command: 'rm -rf /tmp/x' });
    expect(cron).toEqual({ isError: true, text: expect.stringContaining('mcp.command_turns') });
    expect(await c.loops.get('main', 'loop')).toBeNull();
    expect(await c.redis.scard(c.keys.cronJobIndex)).toBe(0);
    expect(await events(c, 'main', 'notice')).toEqual([]);

    const allowed = openTestClients(cleanups, { 'api_server.port': 0, 'api_server.key': KEY, 'mcp.command_turns': true });
    const gw2 = await startCronApiGateway(cleanups, allowed.env, KEY);
    const client2 = await httpClient(cleanups, gw2.gw.httpAddress.url, KEY);
    const made = await call(client2, 'create_schedule', { kind: 'loop', interval: '5m', prompt: 'disk use', command: 'df -h /' });
    expect(made.isError, made.text).toBe(false);
    expect((await allowed.c.loops.get('main', 'loop'))?.runner).toMatchObject({ kind: 'command', command: 'df -h /' });
  });

  it('over HTTP: 401 without the key; with it, the same tools and a cron job; the per-day limit holds', async ({ cleanups, expect }) => {
    const { env, c } = openTestClients(cleanups, { 'api_server.port': 0, 'api_server.key': KEY, 'mcp.max_created_per_day': 2 });
    const { gw } = await startCronApiGateway(cleanups, env, KEY);
    const bare = await fetch(`${gw.httpAddress.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(bare.status).toBe(401);
    await expect(httpClient(cleanups, gw.httpAddress.url)).rejects.toMatchObject({ code: 401 });
    await expect(httpClient(cleanups, gw.httpAddress.url, 'wrong-key')).rejects.toMatchObject({ code: 401 });

    const client = await httpClient(cleanups, gw.httpAddress.url, KEY);
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual([...MCP_TOOL_NAMES].sort());
    await weekdaysAtNine(client, c, expect);
    // The second creation of the day (a heartbeat) is the last the limit allows; the third is refused, nothing written.
    const hb = await call(client, 'create_schedule', { kind: 'heartbeat', session: 'ops', interval: '1h', prompt: 'anything new?' });
    expect(hb.isError, hb.text).toBe(false);
    // Removing does not give a creation back.
    expect((await call(client, 'remove_schedule', { kind: 'heartbeat', session: 'ops' })).isError).toBe(false);
    const third = await call(client, 'create_schedule', { kind: 'loop', session: 'ops', interval: '10m', prompt: 'check the deploy' });
    expect(third).toEqual({ isError: true, text: expect.stringContaining('the limit is 2 (mcp.max_created_per_day)') });
    // Nor is a slash command sent as a message a way around it: `send` takes messages only.
    const slash = await call(client, 'send', { session: 'ops', text: '/loop 10m check the deploy' });
    expect(slash).toEqual({ isError: true, text: expect.stringContaining('not slash commands') });
    expect(await c.loops.get('ops', 'loop')).toBeNull();
    expect((await events(c, 'ops')).map((n) => [n.type, n.data.action])).toEqual([
      ['notice', 'create'],
      ['notice', 'remove'],
    ]);
  });

  it('a loop made over MCP fires and its reply reaches Telegram; send starts a turn whose reply the transcript resource shows', async ({
    cleanups,
    expect,
  }) => {
    const fake = await startFakeTelegram();
    const model = await startFakeOpenAI();
    model.respond(() => 'all green');
    cleanups.push(
      () => fake.close(),
      () => model.close(),
    );
    const env = telegramEnv(fake, { 'agent.base_url': model.baseUrl, 'agent.api_key': 'k', 'api_server.key': KEY });
    const c = clients(env);
    cleanups.push(
      () => env.cleanup(),
      () => c.close(),
    );
    const log = createLogger({ level: 'silent' });
    const worker = await startWorker(env);
    cleanups.push(() => worker.drain());
    const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log });
    cleanups.push(() => gw.close());
    const client = await httpClient(cleanups, gw.httpAddress.url, KEY);

    const made = await call(client, 'create_schedule', {
      kind: 'loop',
      session: 'deploy',
      interval: '1m',
      prompt: 'check the deploy',
      deliver: `telegram:${ALLOWED_USER}`,
    });
    expect(made.isError, made.text).toBe(false);
    await waitFor(() => fake.sent.length >= 1, 20_000, 'the first tick delivered to Telegram');
    expect([fake.sent[0]!.chat_id, fake.sent[0]!.text]).toEqual([String(ALLOWED_USER), 'all green']);
    expect(await c.loops.get('deploy', 'loop')).toMatchObject({ origin: { surface: 'mcp' }, createdBy: { by: 'agent', surface: 'mcp' } });

    // With `wait_seconds` the answer carries the reply of the turn the message started.
    const sent = JSON.parse((await call(client, 'send', { session: 'deploy', text: 'is it live?', wait_seconds: 30 })).text) as {
      occurrence_id: string;
      transcript: string;
      status: string;
      reply: string | null;
    };
    expect([sent.status, sent.reply]).toEqual(['replied', 'all green']);
    const replies = await events(c, 'deploy', 'reply');
    expect(replies.map((r) => r.data.occurrenceId)).toContain(sent.occurrence_id);
    const resource = await client.readResource({ uri: sent.transcript });
    const messages = JSON.parse((resource.contents[0] as { text: string }).text) as Array<{
      role: string;
      content: string;
      surface?: string;
    }>;
    expect(messages.slice(-2).map((m) => [m.role, m.content, m.surface])).toEqual([
      ['user', 'is it live?', 'mcp'],
      ['assistant', 'all green', 'mcp'],
    ]);
    // One casing on every wire (docs/GATEWAY.md): the tools' results and the resource, at every depth.
    const listed = JSON.parse((await call(client, 'list_schedules', { session: 'deploy' })).text) as { loops: Array<{ spend: object }> };
    expect(listed.loops[0]!.spend).toMatchObject({ calls: expect.any(Number), input_tokens: expect.any(Number) });
    expect(camelKeys([JSON.parse(made.text), listed, messages, sent])).toEqual([]);
  });

  it('mcp.tools offers only the tools it lists: another is neither listed nor callable; status and runs read', async ({
    cleanups,
    expect,
  }) => {
    const { env, c } = openTestClients(cleanups, { 'mcp.tools': 'list_schedules,status,runs' });
    const server = createMcpServer(mcpDepsFor(env.config, c, createLogger({ level: 'silent' })), { version: '0.0.0' });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const client = new Client({ name: 'hermes-test', version: '1.0.0' });
    await client.connect(clientSide);
    cleanups.push(
      () => client.close(),
      () => server.close(),
    );
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(['list_schedules', 'runs', 'status']);
    const create = await call(client, 'create_schedule', { kind: 'cron', schedule: 'every 2h', prompt: 'x' }).catch((err: Error) => ({
      isError: true,
      text: err.message,
    }));
    expect(create).toEqual({ isError: true, text: expect.stringMatching(/create_schedule not found/) });
    expect(await c.redis.scard(c.keys.cronJobIndex)).toBe(0);
    expect(JSON.parse((await call(client, 'status')).text)).toEqual({ workers: 0, loops: [], cron_jobs: [] });
    expect(JSON.parse((await call(client, 'runs')).text)).toEqual([]);
  });

  it('creations asked at once over HTTP still stop at the per-day limit (each request its own server)', async ({ cleanups, expect }) => {
    const { env, c } = openTestClients(cleanups, { 'api_server.port': 0, 'api_server.key': KEY, 'mcp.max_created_per_day': 2 });
    const { gw } = await startCronApiGateway(cleanups, env, KEY);
    const clients = await Promise.all([1, 2, 3, 4].map(() => httpClient(cleanups, gw.httpAddress.url, KEY)));
    const results = await Promise.all(
      clients.map((client, i) => call(client, 'create_schedule', { kind: 'cron', schedule: 'every 2h', prompt: `job ${i}` })),
    );
    expect(results.filter((r) => !r.isError)).toHaveLength(2);
    expect(results.filter((r) => r.isError).map((r) => r.text)).toEqual([
      expect.stringContaining('mcp.max_created_per_day'),
      expect.stringContaining('mcp.max_created_per_day'),
    ]);
    expect(await c.redis.scard(c.keys.cronJobIndex)).toBe(2);
  });

  it('a cron job after all of two jobs (after_all), and back to after each on update', async ({ cleanups, expect }) => {
    const { env } = openTestClients(cleanups, { 'api_server.port': 0, 'api_server.key': KEY });
    const { gw } = await startCronApiGateway(cleanups, env, KEY);
    const client = await httpClient(cleanups, gw.httpAddress.url, KEY);
    for (const name of ['scanner', 'lint'])
      expect((await call(client, 'create_schedule', { kind: 'cron', schedule: 'every 2h', prompt: name, name })).isError).toBe(false);
    const one = await call(client, 'create_schedule', { kind: 'cron', prompt: 'digest', after: ['scanner'], after_all: true });
    expect(one).toEqual({ isError: true, text: expect.stringContaining('name two or more') });
    const made = await call(client, 'create_schedule', {
      kind: 'cron',
      prompt: 'digest',
      name: 'digest',
      after: ['scanner', 'lint'],
      after_all: true,
    });
    expect(made.isError, made.text).toBe(false);
    const job = (JSON.parse(made.text) as { schedule: { id: string; after_all: boolean; after: unknown[] } }).schedule;
    expect([job.after_all, job.after.length]).toEqual([true, 2]);
    const updated = await call(client, 'update_schedule', { kind: 'cron', id: job.id, after_all: false });
    expect(updated.isError, updated.text).toBe(false);
    expect((JSON.parse(updated.text) as { schedule: { after_all: boolean } }).schedule.after_all).toBe(false);
  });
});
