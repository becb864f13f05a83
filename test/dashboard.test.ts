/**
 * The queue dashboard (`@bull-board/express`) at `/admin/queues`: HTTP Basic
 * auth with the API key as password, read-only unless `dashboard.read_only:
 * false`. The page in a real headless browser (it loads and lists the `ticks`
 * queue) is tested in test/console.test.ts, which has the browser running.
 */
import { describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { createLogger } from '../scheduler/logger.ts';
import { testEnv } from './support/env.ts';
import { clients } from './support/stack.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const KEY = 'dashboard-key-9876';
const cleanups = cleanupAfterEach();

async function gateway(overrides: Record<string, unknown> = {}): Promise<{ gw: Gateway; prefix: string; env: ReturnType<typeof testEnv> }> {
  const env = testEnv({ 'api_server.port': 0, 'api_server.key': KEY, ...overrides });
  cleanups.push(() => env.cleanup());
  const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }) });
  cleanups.push(() => gw.close());
  return { gw, prefix: env.prefix, env };
}

const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });

describe('/admin/queues', () => {
  it('answers 401 (asking for Basic auth) without the key, 200 with any user and the key as password', async () => {
    const { gw } = await gateway();
    const url = `${gw.httpAddress.url}/admin/queues`;
    const none = await fetch(url);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Basic realm=/);
    expect((await fetch(url, { headers: basic('admin', 'wrong') })).status).toBe(401);
    expect((await fetch(url, { headers: basic('admin', '') })).status).toBe(401);
    const ok = await fetch(url, { headers: basic('anyone', KEY) });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toMatch(/<html/i);
    const api = await fetch(`${url}/api/queues`, { headers: basic('ops', KEY) });
    expect(api.status).toBe(200);
    const body = (await api.json()) as { queues: Array<{ name: string; readOnlyMode: boolean }> };
    expect(body.queues.map((q) => q.name).sort()).toEqual([
      'inbox',
      'outbound-discord',
      'outbound-slack',
      'outbound-telegram',
      'ticks',
      'v1-runs',
    ]);
    expect(body.queues.every((q) => q.readOnlyMode)).toBe(true);
  });

  it('is read-only by default: actions are refused and change nothing; dashboard.read_only: false allows them', async () => {
    const { gw, env } = await gateway();
    const c = clients(env);
    cleanups.push(() => c.close());
    const pause = await fetch(`${gw.httpAddress.url}/admin/queues/api/queues/ticks/pause`, { method: 'PUT', headers: basic('ops', KEY) });
    expect(pause.status).toBe(405);
    expect(await c.queues.ticks.isPaused()).toBe(false);

    const writable = await gateway({ 'dashboard.read_only': false });
    const c2 = clients(writable.env);
    cleanups.push(() => c2.close());
    const paused = await fetch(`${writable.gw.httpAddress.url}/admin/queues/api/queues/inbox/pause`, {
      method: 'PUT',
      headers: basic('ops', KEY),
    });
    expect(paused.status).toBe(200);
    expect(await c2.queues.inbox.isPaused()).toBe(true);
  });

  it("lists each shard's queues apart when the key space has several shards", async () => {
    const { gw } = await gateway({ 'redis.shards': 2 });
    const api = await fetch(`${gw.httpAddress.url}/admin/queues/api/queues`, { headers: basic('ops', KEY) });
    const names = ((await api.json()) as { queues: Array<{ name: string }> }).queues.map((q) => q.name);
    expect(names).toHaveLength(8);
    expect(names.filter((n) => n.endsWith(':ticks'))).toHaveLength(2);
    expect(new Set(names).size).toBe(8);
  });
});
