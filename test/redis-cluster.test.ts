/**
 * Redis Cluster with a sharded key space (docs/DESIGN.md §2): a local three-master
 * cluster started by this file, `redis.shards` 6. Every session and cron job
 * lives on one shard (records, locks, streams, its `ticks` and `inbox`
 * queues), the shards spread over the masters, and workers consume every
 * shard or only `worker.shards`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway } from '../gateway/gateway-process.ts';
import { checkRedis } from '../scheduler/store/redis/connect.ts';
import { openRedisClient } from '../scheduler/store/redis/connection-factory.ts';
import { enqueueInput } from '../scheduler/session/inbox.ts';
import { Keys } from '../scheduler/store/keys.ts';
import { createLogger } from '../scheduler/logger.ts';
import type { RunnerSpec } from '../scheduler/session/origin.ts';
import { openCronService } from './support/cron-worker.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { readJson, readSseUntil } from './support/http.ts';
import { clusterEnv, startRedisCluster, type TestCluster } from './support/redis-cluster.ts';
import { openTestClients, runHermes, spawnWorker, startWorker, waitFor, waitForEvents } from './support/stack.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { captureLog } from './support/log-capture.ts';

const SHARDS = 6;
const KEY = 'cluster-test-key';
let cluster: TestCluster;
const cleanups = cleanupAfterEach();

beforeAll(async () => {
  cluster = await startRedisCluster(3);
}, 180_000); // beside two other copies of the suite, starting and joining the servers can take a minute
afterAll(async () => {
  await cluster?.stop();
});

/** Clients on the cluster with `SHARDS` shards. */
const setup = (overrides: Record<string, unknown> = {}) =>
  openTestClients(cleanups, { 'redis.shards': SHARDS, ...overrides }, (o) => clusterEnv(cluster, o));

/** One session id per shard: `<tag>-<n>` for the first n that lands on each shard. */
function sessionPerShard(keys: Keys, tag: string): string[] {
  const out: string[] = [];
  for (let n = 0; out.filter(Boolean).length < keys.shardCount; n++) {
    const id = `${tag}-${n}`;
    out[keys.shardOfSession(id)] ??= id;
  }
  return out;
}

const echo = (text: string): RunnerSpec => ({ kind: 'command', command: `echo ${text}`, timeoutSeconds: 10 });
const every = (prompt: string, intervalSeconds: number) => ({ prompt, intervalSeconds, times: null, until: null, notes: [] });
const cli = { origin: { surface: 'cli' as const } };

describe('Redis Cluster, 6 shards on 3 masters', () => {
  it('loops, heartbeats, cron runs, inbox input and /v1 runs all work, and the keys spread over the masters', async () => {
    const model = await startFakeOpenAI();
    cleanups.push(() => model.close());
    const { env, c } = setup({
      'agent.base_url': model.baseUrl,
      'agent.api_key': 'model-key',
      'api_server.port': 0,
      'api_server.key': KEY,
      'heartbeat.min_interval_seconds': 1,
    });
    const w = await startWorker(env);
    cleanups.push(() => w.drain());

    // A loop on one session of every shard.
    const sessions = sessionPerShard(c.keys, 'cl');
    for (const id of sessions) await c.schedules.set(id, 'loop', every('report', 1), { ...cli, runner: echo(`tick-${id}`) });
    for (const id of sessions) {
      const replies = await waitForEvents(c, id, 'reply', 2, 45_000);
      expect(replies[0]!.data.text).toBe(`tick-${id}`);
    }

    // A heartbeat.
    await c.schedules.set('cl-hb', 'heartbeat', every('anything new?', 1), { ...cli, runner: echo('quiet') });
    await waitForEvents(c, 'cl-hb', 'reply', 1, 45_000);

    // Inbox input (a slash command: no model turn) on another shard than the heartbeat.
    const inboxSession = sessions.find((s) => c.keys.shardOfSession(s) !== c.keys.shardOfSession('cl-hb'))!;
    await enqueueInput(
      { redis: c.redis, keys: c.keys, queues: c.queues, maxChars: 10_000 },
      { sessionId: inboxSession, text: '/loop status', messageId: 'm-1', origin: { surface: 'cli' } },
    );
    await waitFor(
      async () => (await c.sessions.readEvents(inboxSession, '0', { count: 1000 })).some((e) => /loop: active/.test(String(e.data.text))),
      45_000,
      'the /loop status reply',
    );

    // A cron job (its records and its session stream on its own shard), run now.
    const cron = openCronService(env.config);
    cleanups.push(() => cron.close());
    const job = await cron.service.add({ schedule: 'every 1h', script: 'echo cron-ok', name: 'cluster-cron' }, { ...cli, trusted: true });
    await cron.service.runNow(job.id, { origin: { surface: 'cli' }, trusted: true });
    const runs = await waitFor(
      async () => {
        const r = await cron.store.runs(job.id, 5);
        return r.length === 1 && r[0]!.status === 'ok' ? r : undefined;
      },
      45_000,
      'the cron run',
    );
    expect(runs[0]!.output).toBe('cron-ok');
    expect((await cron.service.list({ all: true })).map((j) => j.id)).toContain(job.id);

    // A /v1 run through the gateway.
    // The gateway's bound on a Redis call (`gateway.redis_timeout_ms`, 2 s) is not what this test is about: its
    // first queueing of a run on a fresh cluster (BullMQ's scripts loaded on each master) took over 2 s once
    // beside a second suite (load 13), and was answered 503 as the bound says.
    const gwConfig = { ...env.config, gateway: { ...env.config.gateway, redis_timeout_ms: 15_000 } };
    const gw = await startGateway({ config: gwConfig, log: createLogger({ level: env.config.log_level }) });
    cleanups.push(() => gw.close());
    model.respond(() => 'pong from the model');
    const res = await fetch(`${gw.httpAddress.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'hermes-agent', messages: [{ role: 'user', content: 'ping' }] }),
    });
    const body = await readJson(res);
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.choices[0].message.content).toBe('pong from the model');

    // Session event streams on every shard, through the gateway's shared readers (one per shard:
    // a multi-key XREAD must stay within one hash slot).
    const streams = await Promise.all(
      sessions.map(async (id) => {
        const ac = new AbortController();
        const r = await fetch(`${gw.httpAddress.url}/api/sessions/${id}/events?after=$`, {
          headers: { authorization: `Bearer ${KEY}` },
          signal: ac.signal,
        });
        expect(r.status).toBe(200);
        return { id, r, ac };
      }),
    );
    await Promise.all(sessions.map((id) => c.sessions.appendEvent(id, 'notice', { text: `live-${id}` })));
    for (const s of streams) {
      const frames = await readSseUntil(s.r, (f) => f.event === 'notice', s.ac);
      expect(frames.find((f) => f.event === 'notice')!.data).toContain(`live-${s.id}`);
    }

    // Listings read every shard.
    expect((await c.loops.list()).map((r) => r.sessionId).sort()).toEqual([...sessions, 'cl-hb'].sort());

    // The shards' keys live on more than one master: every master that owns a shard's slot holds keys of it.
    const owners = new Set<string>();
    for (const master of cluster.masters()) {
      const mine = await master.keys(`{${env.prefix.slice(1, -1)}:*`);
      if (mine.length > 0) owners.add(`${master.options.port}`);
    }
    expect(owners.size).toBeGreaterThan(1);
  }, 300_000);

  it('a worker restricted to some shards runs only their sessions; the others wait for a worker of theirs', async () => {
    const probe = new Keys('{x}', { shards: SHARDS });
    const [a, b] = sessionPerShard(probe, 'only');
    const { env, c } = setup({ 'worker.shards': [probe.shardOfSession(a!)] });
    const restricted = await startWorker(env);
    cleanups.push(() => restricted.drain());
    await c.schedules.set(a!, 'loop', every('report', 1), { ...cli, runner: echo('a') });
    await c.schedules.set(b!, 'loop', every('report', 1), { ...cli, runner: echo('b') });
    await waitForEvents(c, a!, 'reply', 3, 45_000);
    expect(await c.sessions.readEvents(b!, '0')).toEqual([]); // b's tick is due but its shard has no worker
    expect(await c.queues.forSession(b!).ticks.getJobCountByTypes('waiting', 'prioritized', 'delayed')).toBeGreaterThan(0);

    const all = await startWorker(env, { config: { ...env.config, worker: { ...env.config.worker, shards: [] } } });
    cleanups.push(() => all.drain());
    await waitForEvents(c, b!, 'reply', 1, 45_000);
  }, 120_000);

  it('hermes worker, hermes loop and hermes status as processes (REDIS_CLUSTER_NODES, HERMES_REDIS_SHARDS=6): loops on six sessions fire', async () => {
    const { env, c } = setup();
    const worker = await spawnWorker(cleanups, env);
    cleanups.push(
      () =>
        new Promise<void>((resolve) => {
          if (worker.exitCode !== null) return resolve();
          worker.once('exit', () => resolve());
          worker.kill('SIGTERM');
        }),
    );
    const sessions = sessionPerShard(c.keys, 'proc');
    // One `hermes loop` process (its shard's master is not the first node: the CLI follows the cluster's
    // slots); the other shards' loops are set in-process. Every shard is one the worker process serves.
    const first = cluster.nodes[0]!;
    const owner = async (s: string) => {
      const slot = await cluster.masters()[0]!.cluster('KEYSLOT', c.keys.forSession(s).prefix);
      const range = (await cluster.masters()[0]!.cluster('SLOTS')).find(([lo, hi]) => slot >= lo && slot <= hi)!;
      return `${range[2]![0]}:${range[2]![1]}`;
    };
    const byCli = await (async () => {
      for (const s of sessions) if ((await owner(s)) !== first) return s;
      throw new Error('every shard on the first master');
    })();
    const set = await runHermes(env, ['loop', '1s', 'report', '--session', byCli, '--run', `echo from-${byCli}`]);
    expect(set.code, set.stderr).toBe(0);
    for (const s of sessions) if (s !== byCli) await c.schedules.set(s, 'loop', every('report', 1), { ...cli, runner: echo(`from-${s}`) });
    for (const s of sessions) expect((await waitForEvents(c, s, 'reply', 1, 45_000))[0]!.data.text).toBe(`from-${s}`);
    const status = await runHermes(env, ['status']);
    for (const s of sessions) expect(status.stdout).toContain(s);
    // Each shard's hash tag hashes to its own slot; the slots' masters all hold keys.
    const tags = c.keys.shards().map((k) => k.prefix);
    const slots = await Promise.all(tags.map((t) => cluster.masters()[0]!.cluster('KEYSLOT', t)));
    expect(new Set(slots).size).toBe(SHARDS);
  }, 240_000);

  it('the version and eviction checks run on every master: an evicting policy on one of them is named', async () => {
    const victim = cluster.masters()[1]!;
    await victim.config('SET', 'maxmemory-policy', 'allkeys-lru');
    const client = openRedisClient(
      { kind: 'cluster', nodes: [{ host: '127.0.0.1', port: Number(cluster.nodes[0]!.split(':')[1]) }], tls: false },
      'commands',
    );
    try {
      const { log, lines } = captureLog();
      await checkRedis(client, log);
      const warnings = lines.map((l) => JSON.parse(l) as { policy?: string; server?: string }).filter((l) => l.policy);
      expect(warnings).toEqual([expect.objectContaining({ policy: 'allkeys-lru', server: `127.0.0.1:${victim.options.port}` })]);
    } finally {
      client.disconnect();
      await victim.config('SET', 'maxmemory-policy', 'noeviction');
    }
  });
});
