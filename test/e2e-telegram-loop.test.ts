/**
 * End to end over the real parts: a Telegram chat (local Bot API server, real
 * grammY), the gateway, a worker process and a model (local OpenAI-compatible
 * server): `/loop 1m check the build` from a chat sets the loop, the first tick
 * runs as a turn and its reply is sent back to the chat; `/v1` goes through a worker.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startGateway } from '../gateway/gateway-process.ts';
import { createLogger } from '../scheduler/logger.ts';
import { WorkerProcess } from '../worker/worker-process.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { startFakeTelegram } from './support/fake-telegram.ts';
import { homeKeyAuth, readJson, waitFor } from './support/http.ts';
import { ALLOWED_USER, telegramEnv } from './support/telegram-env.ts';

const cleanups: Array<() => unknown> = [];
afterAll(async () => {
  for (const f of cleanups.reverse()) await f();
});

describe('Telegram → gateway → worker → Telegram', () => {
  it('/loop 1m check … from a chat: confirmed, first tick delivered to the chat; /v1 answered by a worker', async () => {
    const fake = await startFakeTelegram();
    cleanups.push(() => fake.close());
    const model = await startFakeOpenAI();
    model.respond(() => 'all green');
    cleanups.push(() => model.close());
    const env = telegramEnv(fake, { 'agent.base_url': model.baseUrl, 'agent.api_key': 'k' });
    cleanups.push(() => env.cleanup());
    const log = createLogger({ level: 'silent' });
    const worker = await WorkerProcess.start({ config: env.config, redisUrl: env.redisUrl, log });
    cleanups.push(() => worker.drain());
    const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log });
    cleanups.push(() => gw.close());

    fake.pushMessage({ fromId: ALLOWED_USER, text: '/loop 1m check the build' });
    await waitFor(() => fake.sent.length >= 2, 20_000, 'loop confirmation and first tick');
    expect(fake.sent[0]!.text).toMatch(/Loop set: every 1m/);
    expect(fake.sent[1]!.text).toBe('all green');
    const record = await worker.deps.loops.get(`telegram:${fake.sent[0]!.chat_id}`, 'loop');
    expect(record).toMatchObject({ status: 'active', intervalSeconds: 60, runner: { kind: 'agent' }, origin: { surface: 'telegram' } });

    const res = await readJson(
      fetch(`${gw.httpAddress.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...homeKeyAuth(env.home) },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }),
      }),
    );
    expect(res.choices[0].message.content).toBe('all green');
  });
});
