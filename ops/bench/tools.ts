/**
 * Benchmark (not a test) of agent turns with tools, on a private Redis started
 * for the run (never 127.0.0.1:6379), against the local model server:
 *
 *   npx tsx ops/bench/tools.ts [--n 300]
 *
 * 1. Overhead per tool call: a turn of the real AgentRunner with the real
 *    Toolbox (read_file on a small file, events appended to a session stream
 *    in Redis) makes two model calls (the tool call, then the answer) and one
 *    tool call. Its overhead = the turn's time − 2 × a direct model call
 *    (p50, same client settings, measured in the same run) − the tool's own
 *    time (p50 of the read_file function called directly). p50/p99 of that.
 *    The same with 5 calls in one model answer (run at once), per call.
 * 2. `/v1` time to first token: a streamed `POST /v1/chat/completions` through
 *    the gateway (queue → worker → model with `stream: true` → run events →
 *    gateway) versus the same streamed request made directly to the model
 *    server with the official `openai` client; first content chunk, in ms.
 *
 * Prints Markdown tables for docs/BENCHMARKS.md.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { startGateway } from '../../gateway/gateway-process.ts';
import { loadConfig } from '../../scheduler/config/config.ts';
import { Keys } from '../../scheduler/store/keys.ts';
import { createLogger } from '../../scheduler/logger.ts';
import { openRedisClient, topologyFromConfig } from '../../scheduler/store/redis/connection-factory.ts';
import { startEmbeddedRedis } from '../../scheduler/store/redis/embedded-redis.ts';
import { sessionStoreFor } from '../../scheduler/services.ts';
import { lastToolResult, startFakeOpenAI } from '../../test/support/fake-openai.ts';
import { startV1Worker } from '../../test/support/v1-worker.ts';
import { fileTools } from '../../worker/tools/file-tools.ts';
import { Toolbox } from '../../worker/tools/toolbox.ts';
import { ToolOutput } from '../../worker/tools/tool-output.ts';
import type { ScheduleStatusSources } from '../../worker/tools/schedule-status-tool.ts';
import { AgentRunner } from '../../worker/turn-runners/agent-runner.ts';
import { percentiles, runBench, type Percentiles } from './bench-support.ts';

const args = process.argv.slice(2);
const arg = (name: string, def: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : def;
};
const N = Number(arg('n', '300'));
const WARMUP = 20;
const KEY = 'bench-key';

type Stats = Percentiles;
const stats = percentiles;

const fmt = (n: number) => n.toFixed(2);

async function time(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'hermes-bench-tools-'));
  const root = join(dir, 'root');
  const redisServer = await startEmbeddedRedis({ dir: join(dir, 'redis'), appendonly: false });
  const model = await startFakeOpenAI();
  mkdirSync(root);
  writeFileSync(join(root, 'state.txt'), 'GREEN\n');
  const prefix = '{bench-tools}';
  const config = loadConfig({
    env: { HERMES_HOME: dir },
    overrides: {
      'redis.url': redisServer.url,
      'redis.prefix': prefix,
      log_level: 'silent',
      'api_server.port': 0,
      'api_server.key': KEY,
      'agent.base_url': model.baseUrl,
      'agent.api_key': 'bench',
      'tools.files.roots': [root],
    },
  });
  let calls = 1;
  model.respond((req) => {
    if (req.messages.at(-1)!.content === 'stream') return 'the build on main is green now and stays green';
    if (req.tools.length === 0 || lastToolResult(req) !== undefined) return 'GREEN';
    return { toolCalls: Array.from({ length: calls }, () => ({ name: 'read_file', arguments: { path: 'state.txt' } })) };
  });

  // 1. overhead per tool call
  const redis = openRedisClient(topologyFromConfig(config), 'commands');
  const sessions = sessionStoreFor(config, redis, new Keys(prefix));
  const toolbox = new Toolbox(config, {} as ScheduleStatusSources);
  const runner = new AgentRunner({ baseUrl: model.baseUrl, apiKey: 'bench', model: 'm', timeoutSeconds: 60, maxToolCalls: 20 }, toolbox);
  const bare = new AgentRunner({ baseUrl: model.baseUrl, apiKey: 'bench', model: 'm', timeoutSeconds: 60 });
  const readFile = fileTools([root])[0]!;
  const t = config.tools;
  const ctx = () => ({
    sessionId: 'bench',
    surface: 'cli' as const,
    signal: new AbortController().signal,
    output: new ToolOutput({ maxBytes: t.max_result_bytes, headShare: t.result_head_share, fileReadBytes: t.files.max_scan_bytes }),
    timeoutMs: 30_000,
  });
  const turnMessages = [{ role: 'user' as const, content: 'is it green?' }];
  const onEvent = (e: { type: string; data: Record<string, unknown> }) => sessions.appendEvent('bench', e.type, e.data);
  const signal = new AbortController().signal;
  const modelMs: number[] = [];
  const toolMs: number[] = [];
  const turn1: number[] = [];
  const turn5: number[] = [];
  for (let i = 0; i < N + WARMUP; i++) {
    const m = await time(() => bare.complete(turnMessages, signal, 'bench'));
    const t = await time(() => readFile.call({ path: 'state.txt' }, ctx()));
    calls = 1;
    const a = await time(() => runner.run({ sessionId: 'bench', messages: turnMessages, signal, surface: 'cli', onEvent }));
    calls = 5;
    const b = await time(() => runner.run({ sessionId: 'bench', messages: turnMessages, signal, surface: 'cli', onEvent }));
    if (i < WARMUP) continue;
    modelMs.push(m);
    toolMs.push(t);
    turn1.push(a);
    turn5.push(b);
  }
  const model50 = stats(modelMs).p50;
  const tool50 = stats(toolMs).p50;
  const over1 = stats(turn1.map((t) => t - 2 * model50 - tool50));
  // five calls run at once: their own time overlaps, so only one tool time is taken off
  const over5 = stats(turn5.map((t) => (t - 2 * model50 - tool50) / 5));

  // 2. /v1 time to first token
  const gw = await startGateway({ config, redisUrl: redisServer.url, log: createLogger({ level: 'silent' }) });
  const v1Worker = await startV1Worker(
    { redisUrl: redisServer.url, prefix, home: dir, config, childEnv: {}, cleanup: () => {} },
    { concurrency: 8 },
  );
  const direct = new OpenAI({ baseURL: model.baseUrl, apiKey: 'bench', maxRetries: 0 });
  const viaGateway = new OpenAI({ baseURL: `${gw.httpAddress.url}/v1`, apiKey: KEY, maxRetries: 0 });
  const ttft = async (client: OpenAI): Promise<number> => {
    const t0 = performance.now();
    let first = -1;
    const stream = await client.chat.completions.create({
      model: 'hermes-agent',
      messages: [{ role: 'user', content: 'stream' }],
      stream: true,
    });
    for await (const chunk of stream) {
      if (first < 0 && chunk.choices[0]?.delta.content) first = performance.now() - t0;
    }
    return first;
  };
  const directTtft: number[] = [];
  const gatewayTtft: number[] = [];
  for (let i = 0; i < N + WARMUP; i++) {
    const d = await ttft(direct);
    const g = await ttft(viaGateway);
    if (i < WARMUP) continue;
    directTtft.push(d);
    gatewayTtft.push(g);
  }
  const dt = stats(directTtft);
  const gt = stats(gatewayTtft);

  console.log(`\nTools benchmark: n=${N}, node ${process.version}\n`);
  console.log('| measurement | p50 ms | p99 ms | max ms |');
  console.log('|---|---|---|---|');
  const row = (name: string, s: Stats) => console.log(`| ${name} | ${fmt(s.p50)} | ${fmt(s.p99)} | ${fmt(s.max)} |`);
  row('model call, direct (openai client)', stats(modelMs));
  row('read_file, the tool function alone', stats(toolMs));
  row('turn with 1 tool call (2 model calls)', stats(turn1));
  row('overhead per tool call (1 call per turn)', over1);
  row('turn with 5 tool calls at once (2 model calls)', stats(turn5));
  row('overhead per tool call (5 at once)', over5);
  console.log('');
  console.log('| /v1 streamed, time to first token | p50 ms | p99 ms | max ms |');
  console.log('|---|---|---|---|');
  row('model called directly (openai client)', dt);
  row('through the gateway (queue → worker → run events → SSE)', gt);
  console.log(`| difference | ${fmt(gt.p50 - dt.p50)} | ${fmt(gt.p99 - dt.p99)} | — |`);

  await gw.close();
  await v1Worker.close();
  redis.disconnect();
  await model.close();
  await redisServer.stop();
  rmSync(dir, { recursive: true, force: true });
}

runBench(main);
