/**
 * MCP servers as tool sources (`mcp_servers.<name>`), through the official
 * SDK client against MCP servers written for the tests with the SDK (stdio,
 * and Streamable HTTP):
 * its tools are offered as `<server>__<tool>`, each tick calls them afresh,
 * a server that fails to start is logged and skipped while the others serve,
 * and a stdio server never receives the worker's secrets.
 */
import { describe } from 'vitest';
import { events, openTestClients, ROOT, startWorker, startWorkerStack, waitForEvents } from './support/stack.ts';
import { lastToolResult, startFakeOpenAI } from './support/fake-openai.ts';
import { startMcpHttpServer } from './support/mcp-http-server.ts';
import { it } from './support/cleanup.ts';
import { programArgs } from './support/test-programs.ts';

const COUNTER_SERVER = {
  command: process.execPath,
  args: programArgs('mcp-counter-server'),
  env: { COUNTER_TOKEN: 'declared-by-operator' },
  cwd: ROOT,
};

// Each test has its own model server, MCP server, worker and Redis prefix, so these two run side by side.
describe.concurrent('MCP servers', () => {
  it('a tool of an MCP server returning a counter: two ticks see two different values; a broken server is skipped', async ({
    cleanups,
    expect,
  }) => {
    const model = await startFakeOpenAI();
    model.respond((req) => {
      const result = lastToolResult(req);
      return result === undefined ? { toolCalls: [{ name: 'counter__next_count' }] } : `the counter says ${result}`;
    });
    cleanups.push(() => model.close());
    const { c, worker: w } = await startWorkerStack(cleanups, {
      'agent.base_url': model.baseUrl,
      'agent.api_key': 'k',
      mcp_servers: { counter: COUNTER_SERVER, broken: { command: '/nonexistent/mcp-server', args: [] } },
    });
    expect(w.mcp?.connectedServers).toEqual(['counter']);
    await c.schedules.set(
      'mcp',
      'loop',
      { prompt: 'read the counter', intervalSeconds: 1, times: 2, until: null, notes: [] },
      {
        origin: { surface: 'chat' },
        runner: { kind: 'agent' },
      },
    );
    const replies = await waitForEvents(c, 'mcp', 'reply', 2);
    expect(replies.map((r) => r.data.text)).toEqual(['the counter says count=1', 'the counter says count=2']);
    expect(model.requests[0]!.tools.sort()).toEqual(['counter__echo_env', 'counter__next_count', 'schedule_status']);
    const results = await events(c, 'mcp', 'tool.result');
    expect(results.map((r) => r.data.name)).toEqual(['counter__next_count', 'counter__next_count']);
  });

  it('a Streamable HTTP server: its tools are listed with the configured headers and called per tick', async ({ cleanups, expect }) => {
    const mcp = await startMcpHttpServer({ token: 'tracker-token' });
    const model = await startFakeOpenAI();
    model.respond((req) => {
      const result = lastToolResult(req);
      return result === undefined ? { toolCalls: [{ name: 'tracker__next_ticket' }] } : `got ${result}`;
    });
    cleanups.push(
      () => mcp.close(),
      () => model.close(),
    );
    const { c, worker: w } = await startWorkerStack(cleanups, {
      'agent.base_url': model.baseUrl,
      'agent.api_key': 'k',
      mcp_servers: { tracker: { url: mcp.url, headers: { Authorization: 'Bearer tracker-token' } } },
    });
    expect(w.mcp?.connectedServers).toEqual(['tracker']);
    await c.schedules.set(
      'http-mcp',
      'loop',
      { prompt: 'next ticket', intervalSeconds: 1, times: 2, until: null, notes: [] },
      {
        origin: { surface: 'chat' },
        runner: { kind: 'agent' },
      },
    );
    const replies = await waitForEvents(c, 'http-mcp', 'reply', 2);
    expect(replies.map((r) => r.data.text)).toEqual(['got ticket #1', 'got ticket #2']);
    expect(mcp.unauthorized).toBe(0);
  });
});

// Sets OPENAI_API_KEY in this process's environment (what a stdio server would inherit): alone, after the others.
describe('MCP servers and the worker environment', () => {
  it("a stdio MCP server gets its declared env, never the worker's secrets", async ({ cleanups, expect }) => {
    const model = await startFakeOpenAI();
    let ask = 0;
    model.respond((req) => {
      const result = lastToolResult(req);
      if (result !== undefined) return result;
      const name = ['OPENAI_API_KEY', 'COUNTER_TOKEN'][ask++ % 2]!;
      return { toolCalls: [{ name: 'counter__echo_env', arguments: { name } }] };
    });
    cleanups.push(() => model.close());
    const { env, c } = openTestClients(cleanups, {
      'agent.base_url': model.baseUrl,
      'agent.api_key': 'sk-secret-of-the-worker',
      mcp_servers: { counter: COUNTER_SERVER },
    });
    // The worker's process environment holds a secret a stdio server would inherit by default.
    const saved = process.env.OPENAI_API_KEY;
    process.env.OPENAI_API_KEY = 'sk-secret-of-the-worker';
    cleanups.push(() => {
      if (saved === undefined) delete process.env.OPENAI_API_KEY;
      else process.env.OPENAI_API_KEY = saved;
    });
    const w = await startWorker(env);
    cleanups.push(() => w.drain());
    const { enqueueInput } = await import('../scheduler/session/inbox.ts');
    const deps = { redis: c.redis, keys: c.keys, queues: c.queues, maxChars: 10_000 };
    await enqueueInput(deps, { sessionId: 'env', text: 'which key?', messageId: 'm1', origin: { surface: 'chat' } });
    await enqueueInput(deps, { sessionId: 'env', text: 'which token?', messageId: 'm2', origin: { surface: 'chat' } });
    const replies = await waitForEvents(c, 'env', 'reply', 2);
    expect(replies.map((r) => r.data.text)).toEqual(['OPENAI_API_KEY=(unset)', 'COUNTER_TOKEN=declared-by-operator']);
  });
});
