/**
 * A window learned from a provider's refusal is the fleet's (docs/CONTEXT.md "Refusals"): stored
 * in Redis by endpoint and model, it outlives the worker that learned it, a second worker uses it
 * without being refused, and `hermes models` and `GET /api/models` show it with where it came from.
 * Real Redis, real workers, the real `openai` client against the local model server, the CLI as
 * a child process, the gateway's express server.
 */
import { describe } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startGateway } from '../gateway/gateway-process.ts';
import { createLogger } from '../scheduler/logger.ts';
import { startAgentStack } from './support/agent-stack.ts';
import { it } from './support/cleanup.ts';
import { readJson } from './support/http.ts';
import { events, runHermes, startWorker, waitFor, waitForEvents } from './support/stack.ts';
import { ciLog, ciWatcher, loopSpec } from './support/ci-watch.ts';

/** A window the 16 KB tool result of each tick does not fit: without the learned window every tick is refused first. */
const WINDOW = 4_000;
const KEY = 'models-api-key';

describe.concurrent('learned windows', () => {
  it('survive a worker restart: the second worker uses the learned window and is never refused', async ({ cleanups, expect }) => {
    const { env, c, model, dir, worker } = await startAgentStack(cleanups, {}, { contextWindow: WINDOW, refusal: 'openai' });
    const log = join(dir, 'ci.log');
    writeFileSync(log, ciLog(40, 'running'));
    model.respond(ciWatcher(log));
    await c.schedules.set('ci', 'loop', loopSpec('watch the CI build', 0.2, null), {
      origin: { surface: 'cli' },
      runner: { kind: 'agent' },
    });
    await waitForEvents(c, 'ci', 'reply', 3, 60_000);
    await worker.drain();
    const refusedByFirst = model.refusedForLength;
    expect(refusedByFirst).toBeGreaterThanOrEqual(1);
    const sentByFirst = model.requests.length;
    const repliesByFirst = (await events(c, 'ci', 'reply')).length;

    const second = await startWorker(env);
    cleanups.push(() => second.drain());
    await waitForEvents(c, 'ci', 'reply', repliesByFirst + 3, 60_000);
    await c.schedules.stop('ci', 'loop');
    // The second worker's first request already fit: it read the window the first one learned.
    const sentBySecond = model.requests.slice(sentByFirst);
    expect(sentBySecond.length).toBeGreaterThanOrEqual(6);
    expect(sentBySecond.filter((r) => r.refusedForLength)).toEqual([]);
    expect(Math.max(...sentBySecond.map((r) => r.promptTokens))).toBeLessThanOrEqual(WINDOW);
    expect(model.refusedForLength).toBe(refusedByFirst);
    expect(await events(c, 'ci', 'tick.failed')).toEqual([]);
  }, 150_000);

  it('are shown by `hermes models` and GET /api/models, with where they came from', async ({ cleanups, expect }) => {
    const { env, c, model, dir } = await startAgentStack(
      cleanups,
      { 'api_server.port': 0, 'api_server.key': KEY },
      { contextWindow: WINDOW, refusal: 'llama.cpp-counts' },
    );
    const log = join(dir, 'ci.log');
    writeFileSync(log, ciLog(40, 'running'));
    model.respond(ciWatcher(log));
    await c.schedules.set('ci', 'loop', loopSpec('watch the CI build', 0.2, 1), { origin: { surface: 'cli' }, runner: { kind: 'agent' } });
    await waitFor(async () => ((await c.loops.get('ci', 'loop'))?.status === 'finished' ? true : undefined), 60_000, 'the tick ran');
    expect(model.refusedForLength).toBeGreaterThanOrEqual(1);

    const learned = {
      tokens: WINDOW,
      how: 'stated',
      provider: 'llama.cpp',
      at: expect.stringMatching(/Z$/),
      said: expect.stringMatching(/^request \(\d+ tokens\) exceeds the available context size \(4000 tokens\)/),
    };
    const row = {
      name: 'primary',
      model: 'gpt-4o-mini',
      endpoint: model.baseUrl,
      window_tokens: WINDOW,
      source: 'learned',
      configured_tokens: null,
      known_tokens: 128_000,
      learned,
      breaker: { state: 'closed', failures: 0, probe_at: null, last_error: null },
    };

    const cli = await runHermes(env, ['models', '--json']);
    expect(cli.stderr).toBe('');
    expect(cli.code).toBe(0);
    expect(JSON.parse(cli.stdout)).toEqual({ object: 'list', data: [row] });
    const text = await runHermes(env, ['models']);
    expect(text.code).toBe(0);
    const lines = text.stdout.split('\n');
    expect(lines[0]).toMatch(/^NAME\s+MODEL\s+ENDPOINT\s+WINDOW\s+FROM\s+CONFIGURED\s+KNOWN\s+LEARNED\s+BREAKER$/);
    expect(lines[1]).toMatch(
      new RegExp(
        `^primary\\s+gpt-4o-mini\\s+${model.baseUrl.replace(/[.]/g, '\\.')}\\s+4,000\\s+learned\\s+-\\s+128,000\\s+4,000\\s+closed$`,
      ),
    );
    expect(text.stdout).toMatch(
      /gpt-4o-mini at \S+: 4,000 tokens, stated in a refusal \(llama\.cpp\) at \S+Z: "request \(\d+ tokens\) exceeds/,
    );

    const gateway = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }) });
    cleanups.push(() => gateway.close());
    const url = `${gateway.httpAddress.url}/api/models`;
    expect((await fetch(url)).status).toBe(401);
    const api = await fetch(url, { headers: { authorization: `Bearer ${KEY}` } });
    expect(api.status).toBe(200);
    expect(await readJson(api)).toEqual({ object: 'list', data: [row] });
  }, 150_000);
});
