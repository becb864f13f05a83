/** `/v1` on a server whose workers have no model configured: 503 with a message that says what to set. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { createLogger } from '../scheduler/logger.ts';
import { HermesMetrics } from '../scheduler/metrics.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { readJson } from './support/http.ts';
import { startV1Worker, type TestV1Worker } from './support/v1-worker.ts';

const KEY = 'test-key-0123456789';
let env: TestEnv;
let gw: Gateway;
let worker: TestV1Worker;

beforeAll(async () => {
  env = testEnv({ 'api_server.port': 0, 'api_server.key': KEY }); // no agent.base_url
  gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }) });
  worker = await startV1Worker(env);
  worker.deps.metrics = new HermesMetrics({ processMetrics: false });
});

afterAll(async () => {
  await gw?.close();
  await worker?.close();
  env?.cleanup();
});

function complete(): Promise<Response> {
  return fetch(`${gw.httpAddress.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'hermes-agent', messages: [{ role: 'user', content: 'hi' }] }),
  });
}

describe('/v1 without a model', () => {
  it('answers 503 model_not_configured naming what to set, not 500', async () => {
    expect(env.config.agent.base_url ?? undefined).toBeUndefined();
    const res = await complete();
    expect(res.status).toBe(503);
    const body = await readJson(res);
    expect(body.error).toMatchObject({ code: 'model_not_configured', type: 'service_unavailable' });
    expect(body.error.message).toMatch(/No model is configured.*agent\.base_url/);
  });

  it('counts the failed /v1 turn in hermes_turns_total and hermes_turn_duration_seconds as kind="v1"', async () => {
    expect((await complete()).status).toBe(503);
    const text = (await worker.deps.metrics!.exposition()).body;
    expect(text).toMatch(/^hermes_turns_total\{kind="v1",outcome="failed"\} [1-9]\d*$/m);
    expect(text).toMatch(/^hermes_turn_duration_seconds_count\{kind="v1"\} [1-9]\d*$/m);
  });
});
