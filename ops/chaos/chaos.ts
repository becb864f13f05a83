/**
 * `npm run chaos -- --minutes N [--json]`: a fleet under faults, and what it
 * recorded. See docs/RELIABILITY.md for the definitions and the last results.
 *
 * The run: its own Redis (AOF on), 3 `hermes worker` processes, a
 * `hermes gateway` polling the local Telegram server (test/support/fake-telegram.ts)
 * with turns answered by the local model server; 100 command loops (90 plain,
 * 10 in Telegram chats with two-part replies), 3 cron `--script` jobs, and a
 * stream of inbound Telegram messages in those chats. Faults: a random worker
 * SIGKILLed every ~20 s and restarted, the gateway SIGKILLed 4 times and
 * restarted at once, Redis restarted once on its AOF (SIGTERM, so the AOF is
 * flushed), and a random worker partitioned from Redis every ~30 s for 2–10 s
 * (each worker reaches Redis through a TCP proxy of its own that black-holes its
 * connections: test/support/tcp-proxy.ts; past the 3 s lock its jobs are taken
 * over while it fences itself off). Then a quiet period, and the counts
 * (ops/chaos/measure.ts) from Redis, from the messages the Telegram server
 * accepted, and from the side-effect file each finished command appends to.
 */
import { Command } from 'commander';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../scheduler/config/config.ts';
import { inputOccurrenceId } from '../../scheduler/session/inbox.ts';
import { Keys } from '../../scheduler/store/keys.ts';
import { createLogger } from '../../scheduler/logger.ts';
import { openRedisClient, type RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { parseStreamEntry } from '../../scheduler/session/session-store.ts';
import { freePort } from '../../scheduler/store/redis/embedded-redis.ts';
import { cronServiceFor, loopStoreFor, loopServiceFor, openQueues } from '../../scheduler/services.ts';
import { lastUserText, startFakeOpenAI } from '../../test/support/fake-openai.ts';
import { startFakeTelegram } from '../../test/support/fake-telegram.ts';
import { startTcpProxy } from '../../test/support/tcp-proxy.ts';
import { ChaosRedis, alive, startHermes, stopProc, type Proc } from './fleet.ts';
import {
  countDoubleEffects,
  countDuplicates,
  countLoopSlots,
  countReplies,
  keyFamily,
  memoryGrowthPerThousandTicks,
  p99,
  recoveryTimes,
  type MemorySample,
  type QueuedReply,
  type TickCommit,
  type TickStart,
} from './measure.ts';

const program = new Command('chaos')
  .option('--minutes <n>', 'minutes of faults', '3')
  .option('--json', 'print one JSON line with the counts last')
  .option('--loops <n>', 'command loops (10 of them in Telegram chats)', '100')
  .option('--interval-seconds <n>', 'loop interval', '30')
  .option('--workers <n>', 'worker processes', '3')
  .option('--quiet-seconds <n>', 'wait after the faults before counting', '45')
  .option('--sample-seconds <n>', 'how often Redis memory and keys are read', '10')
  .option('--keep', 'keep the run folder (logs, Redis AOF)')
  .option('--no-partitions', 'leave out the worker–Redis partitions')
  .option(
    '--on-doubt <policy>',
    'worker.command_turn_on_doubt of the fleet: report (its commands write side effects) or rerun (the product default)',
    'report',
  )
  .parse();
const opts = program.opts<{
  minutes: string;
  json?: boolean;
  loops: string;
  intervalSeconds: string;
  workers: string;
  quietSeconds: string;
  sampleSeconds: string;
  keep?: boolean;
  partitions: boolean;
  onDoubt: string;
}>();

const minutes = Number(opts.minutes);
const LOOPS = Number(opts.loops);
const INTERVAL_S = Number(opts.intervalSeconds);
const WORKERS = Number(opts.workers);
const CHATS = Array.from({ length: 10 }, (_, i) => String(1001 + i));
const BOT_TOKEN = '5555:chaos-run-token';
const say = (text: string) => process.stderr.write(`[chaos ${new Date().toISOString().slice(11, 19)}] ${text}\n`);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const rand = (lo: number, hi: number) => lo + Math.random() * (hi - lo);

async function main(): Promise<void> {
  if (!(minutes > 0)) throw new Error('--minutes must be a positive number');
  const dir = mkdtempSync(join(tmpdir(), 'hermes-chaos-'));
  const logDir = join(dir, 'logs');
  mkdirSync(join(dir, 'home'), { recursive: true });
  const load = { start: loadavg()[0]!, end: 0 };
  say(`run folder ${dir}; load average ${load.start.toFixed(2)} on this machine`);

  const redis = new ChaosRedis(join(dir, 'redis'), await freePort());
  await redis.start();
  const telegram = await startFakeTelegram();
  const model = await startFakeOpenAI();
  model.respond((req) => `ack ${lastUserText(req)}`);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HERMES_HOME: join(dir, 'home'),
    REDIS_URL: redis.url,
    TELEGRAM_BOT_TOKEN: BOT_TOKEN,
    TELEGRAM_ALLOWED_USERS: CHATS.join(','),
    TELEGRAM_API_ROOT: telegram.apiRoot,
    OPENAI_BASE_URL: model.baseUrl,
    OPENAI_API_KEY: 'chaos',
    API_SERVER_PORT: '0',
    HERMES_LOG_LEVEL: 'warn',
    HERMES_LOOPS_MAX_TICKS: '0',
    // The loops' commands write a side effect: a tick cut before its result was recorded is not run again.
    HERMES_WORKER_COMMAND_TURN_ON_DOUBT: opts.onDoubt,
    // A run may go below the product's 30 s minimum to do many ticks in a short run (the memory run).
    ...(INTERVAL_S < 30 ? { HERMES_LOOPS_MIN_INTERVAL_SECONDS: String(INTERVAL_S) } : {}),
  };
  const config = loadConfig({ env });
  const keys = new Keys(config.redis.prefix, { shards: config.redis.shards });
  const client: RedisClient = openRedisClient({ kind: 'single', url: redis.url }, 'commands');
  client.on('error', () => {});
  const queues = openQueues(keys, client);
  const log = createLogger({ level: 'silent' });

  let workerSeq = 0;
  const workers: Proc[] = [];
  // Worker i reaches Redis through proxy i, also after a restart.
  const proxies = await Promise.all(Array.from({ length: WORKERS }, () => startTcpProxy(redis.url)));
  const startWorker = (i: number) => startHermes(`worker-${++workerSeq}`, ['worker'], { ...env, REDIS_URL: proxies[i]!.url }, logDir);
  for (let i = 0; i < WORKERS; i++) workers.push(startWorker(i));
  let gatewaySeq = 0;
  const startGatewayProc = () => startHermes(`gateway-${++gatewaySeq}`, ['gateway'], env, logDir);
  let gateway = startGatewayProc();
  for (let i = 0; i < 300 && (await client.zcard(keys.workers).catch(() => 0)) < WORKERS; i++) await sleep(100);
  say(`${WORKERS} workers and a gateway up`);

  // Load: loops (staggered over 10 s), cron jobs, inbound messages.
  // HERMES_LOOPS_MAX_TICKS=0 above: the loops run for the whole run.
  const schedules = loopServiceFor(config, loopStoreFor(config, { redis: client, keys, queues }), log);
  const sessions: string[] = [];
  for (let i = 0; i < LOOPS; i++) {
    const chat = i < CHATS.length ? CHATS[i]! : undefined;
    const sessionId = chat ? `telegram:${chat}` : `chaos-${i}`;
    sessions.push(sessionId);
    // Each run records itself and takes about a second (so a worker kill cuts some);
    // Telegram loops answer in two parts (over 4096 characters).
    // The side effect is its last step: a tick whose effect line is there twice finished twice.
    const record = `echo "$HERMES_SESSION_ID $HERMES_TICK $(date +%s%3N)" >> '${join(dir, 'ticks.log')}'; sleep 1; echo "$HERMES_SESSION_ID $HERMES_TICK" >> '${join(dir, 'effects.log')}'`;
    const command = chat
      ? `${record}; printf 't%s a %04090d\\nt%s b end\\n' "$HERMES_TICK" 0 "$HERMES_TICK"`
      : `${record}; echo "tick $HERMES_TICK of $HERMES_SESSION_ID"`;
    await schedules.set(
      sessionId,
      'loop',
      { prompt: `chaos loop ${i}`, intervalSeconds: INTERVAL_S, times: null, until: null, notes: [] },
      {
        origin: chat ? { surface: 'cli', route: { platform: 'telegram', chatId: chat } } : { surface: 'cli' },
        runner: { kind: 'command', command, timeoutSeconds: 20 },
      },
    );
    await sleep(10_000 / LOOPS);
  }
  const cron = cronServiceFor(config, { redis: client, keys, queues }, log);
  const cronJobs: string[] = [];
  for (let i = 0; i < 3; i++) {
    const job = await cron.add(
      {
        schedule: 'every 1m',
        name: `chaos-cron-${i}`,
        script: `echo "$HERMES_CRON_OCCURRENCE_ID" >> '${join(dir, 'cron.log')}'; echo cron ${i}`,
      },
      { origin: { surface: 'cli' }, trusted: true },
    );
    cronJobs.push(job.id);
  }
  say(`${LOOPS} loops every ${INTERVAL_S}s and 3 cron jobs set; faults start`);

  const durationMs = minutes * 60_000;
  const faultsStart = Date.now();
  const faultsEnd = faultsStart + durationMs;
  const kills: Array<{ pid: number; at: number }> = [];
  const partitions: Array<{ worker: number; ms: number }> = [];
  const pushed: Array<{ updateId: number; chat: string }> = [];
  let gatewayKills = 0;
  let redisDowntimeMs = 0;
  let keysWarm: number | null = null;

  const inbound = (async () => {
    let n = 0;
    while (Date.now() < faultsEnd) {
      const chat = CHATS[Math.floor(Math.random() * CHATS.length)]!;
      n++;
      pushed.push({ updateId: telegram.pushMessage({ fromId: Number(chat), text: `m${n}` }), chat });
      await sleep(rand(500, 1500));
    }
  })();
  const workerFaults = (async () => {
    let next = Date.now() + rand(15_000, 25_000);
    while (next < faultsEnd - 5_000) {
      await sleep(next - Date.now());
      const i = Math.floor(Math.random() * workers.length);
      const victim = workers[i]!;
      if (alive(victim)) {
        kills.push({ pid: victim.pid, at: Date.now() });
        victim.child.kill('SIGKILL');
        await victim.exited;
        say(`worker pid ${victim.pid} SIGKILLed`);
      }
      await sleep(1000);
      workers[i] = startWorker(i);
      next += rand(15_000, 25_000);
    }
  })();
  const gatewayFaults = (async () => {
    for (const at of [0.2, 0.45, 0.7, 0.9]) {
      await sleep(Math.max(0, faultsStart + at * durationMs + rand(-3000, 3000) - Date.now()));
      gateway.child.kill('SIGKILL');
      await gateway.exited;
      gatewayKills++;
      say(`gateway pid ${gateway.pid} SIGKILLed; restarting`);
      gateway = startGatewayProc();
    }
  })();
  const partitionFaults = (async () => {
    if (!opts.partitions) return;
    let next = Date.now() + rand(20_000, 40_000);
    while (next < faultsEnd - 15_000) {
      await sleep(next - Date.now());
      const i = Math.floor(Math.random() * proxies.length);
      const ms = Math.round(rand(2_000, 10_000));
      proxies[i]!.cut();
      say(`worker ${i} partitioned from Redis for ${ms} ms`);
      await sleep(ms);
      proxies[i]!.heal();
      partitions.push({ worker: i, ms });
      next += rand(20_000, 40_000);
    }
  })();
  const redisFault = (async () => {
    await sleep(Math.max(0, faultsStart + 0.55 * durationMs - Date.now()));
    redisDowntimeMs = await redis.restart();
    say(`Redis restarted on its AOF (down ${redisDowntimeMs} ms)`);
  })();
  let familiesWarm = new Map<string, FamilySize>();
  const warm = (async () => {
    await sleep(Math.max(0, faultsStart + Math.min(durationMs / 3, (INTERVAL_S + 10) * 1000) - Date.now()));
    keysWarm = await client.dbsize();
    familiesWarm = await keyFamilies(client);
  })();
  // Redis memory and keys against the ticks started so far (one line per tick in ticks.log).
  const ticksLog = join(dir, 'ticks.log');
  const memory: MemorySample[] = [];
  const sampler = (async () => {
    while (Date.now() < faultsEnd) {
      await sleep(Number(opts.sampleSeconds) * 1000);
      try {
        const info = await client.info('memory');
        const usedMemoryBytes = Number(/used_memory:(\d+)/.exec(info)?.[1]);
        const ticksStarted = existsSync(ticksLog) ? readFileSync(ticksLog, 'utf8').split('\n').length - 1 : 0;
        memory.push({
          at: Date.now(),
          usedMemoryBytes,
          keys: await client.dbsize(),
          ticksStarted,
          historyBytes: await historyBytes(client, keys, sessions),
        });
      } catch {
        // Redis is being restarted: no sample this time.
      }
    }
  })();
  await Promise.all([inbound, workerFaults, gatewayFaults, partitionFaults, redisFault, warm, sampler]);
  say(`faults over; quiet for ${opts.quietSeconds}s`);
  await sleep(Number(opts.quietSeconds) * 1000);

  load.end = loadavg()[0]!;

  // --- counting, from what was recorded ---
  const commits: TickCommit[] = [];
  const starts: TickStart[] = [];
  const queued: QueuedReply[] = [];
  const inboundSeen = new Map<string, number>();
  let inDoubt = 0;
  for (const sessionId of sessions) {
    const entries = await client.xrange(keys.events(sessionId), '-', '+');
    for (const { type, data } of entries.map(([id, fields]) => parseStreamEntry(id, fields))) {
      const occ = typeof data.occurrenceId === 'string' ? data.occurrenceId : '';
      if (type === 'tick.started') starts.push({ sessionId, occurrenceId: occ, startedAt: Number(data.startedAt), pid: Number(data.pid) });
      if (type === 'tick.failed' && String(data.error).startsWith("The command's outcome is unknown")) inDoubt++;
      if ((type === 'reply' || type === 'tick.failed') && data.tick !== undefined && data.source !== 'message') {
        commits.push({
          sessionId,
          occurrenceId: occ,
          tick: Number(data.tick),
          dueAt: Number(data.dueAt),
          startedAt: Number(data.startedAt),
          pid: Number(data.pid),
        });
      }
      if (occ !== '' && (data.source === 'message' || type === 'notice' || type === 'error'))
        inboundSeen.set(occ, (inboundSeen.get(occ) ?? 0) + 1);
      if (type === 'reply' && sessionId.startsWith('telegram:') && typeof data.text === 'string' && data.text.trim() !== '') {
        const seq = await client.hget(keys.outboundSent(occ), 'seq');
        queued.push({
          chatId: sessionId.slice('telegram:'.length),
          occurrenceId: occ,
          text: String(data.text).trim(),
          seq: seq === null ? null : Number(seq),
        });
      }
    }
  }
  // Slots due up to the end of the faults; the quiet period gives them time to run (or recover).
  const windowEnd = faultsEnd;
  const slots = { occurrences: 0, run: 0, covered: 0, missed: 0 };
  for (const sessionId of sessions) {
    const s = countLoopSlots(
      commits.filter((c) => c.sessionId === sessionId),
      INTERVAL_S * 1000,
      windowEnd,
    );
    slots.occurrences += s.occurrences;
    slots.run += s.run;
    slots.covered += s.covered;
    slots.missed += s.missed;
  }
  let cronRuns = 0;
  let cronMissed = 0;
  for (const id of cronJobs) {
    const runs = (await cron.store.runs(id, 1000)).filter((r) => r.due_at <= windowEnd).sort((a, b) => a.due_at - b.due_at);
    cronRuns += runs.length;
    for (let i = 1; i < runs.length; i++) cronMissed += Math.max(0, Math.round((runs[i]!.due_at - runs[i - 1]!.due_at) / 60_000) - 1);
  }
  const dups = countDuplicates(commits);
  const effectsLog = join(dir, 'effects.log');
  const doubleEffects = countDoubleEffects(existsSync(effectsLog) ? readFileSync(effectsLog, 'utf8') : '');
  const recovery = recoveryTimes(kills, starts, commits);
  const replies = countReplies(telegram.sent, queued);
  const lostInbound = pushed.filter((p) => !inboundSeen.has(inputOccurrenceId(`telegram:${p.chat}`, `tg-${p.updateId}`))).length;
  const duplicateInbound = [...inboundSeen.values()].filter((n) => n > 1).length;
  const lateness = commits.map((c) => c.startedAt - c.dueAt);
  const keysEnd = await client.dbsize();
  const familiesEnd = await keyFamilies(client);
  const growth = memoryGrowthPerThousandTicks(memory);
  // The same without the sessions' history (transcripts and event streams, which are kept on
  // purpose and bounded per session by worker.transcript_max_messages and the stream cap).
  const bookkeeping = memoryGrowthPerThousandTicks(
    memory.map((m) => ({ ...m, usedMemoryBytes: m.usedMemoryBytes - (m.historyBytes ?? 0) })),
  );
  const ticksStarted = memory.at(-1)?.ticksStarted ?? 0;
  const result = {
    occurrences: slots.occurrences + cronRuns + cronMissed,
    missed: slots.missed + cronMissed,
    duplicates: dups.committedTwice + dups.repeatedTick,
    double_side_effects: doubleEffects,
    ticks_in_doubt: inDoubt,
    partitions: partitions.length,
    lost_inbound: lostInbound,
    duplicate_replies: replies.duplicateReplies,
    out_of_order: replies.outOfOrder,
    recovery_p99_ms: p99(recovery.samples),
    lateness_p99_ms: p99(lateness),
    redis_keys_growth: keysEnd - (keysWarm ?? keysEnd),
    ticks_started: ticksStarted,
    redis_memory_bytes_per_1000_ticks: growth.bytesPerThousandTicks,
    redis_memory_bytes_per_1000_ticks_without_history: bookkeeping.bytesPerThousandTicks,
  };
  const rows: Array<[string, string | number]> = [
    ['minutes of faults', minutes],
    ['load average (1 min) start / end', `${load.start.toFixed(2)} / ${load.end.toFixed(2)}`],
    ['loop occurrences (run + covered + missed)', `${slots.occurrences} (${slots.run} + ${slots.covered} + ${slots.missed})`],
    ['cron occurrences recorded / missed', `${cronRuns} / ${cronMissed}`],
    ['duplicates (committed twice / repeated tick number)', `${result.duplicates} (${dups.committedTwice} / ${dups.repeatedTick})`],
    [
      'worker SIGKILLs / ticks cut / not recovered',
      `${kills.length} / ${recovery.samples.length + recovery.unrecovered} / ${recovery.unrecovered}`,
    ],
    ['worker partitions (s each)', `${partitions.length} (${partitions.map((p) => (p.ms / 1000).toFixed(1)).join(', ') || '—'})`],
    ['ticks whose side effect happened twice', doubleEffects],
    [`ticks in doubt, not run again (on doubt: ${opts.onDoubt})`, inDoubt],
    ['recovery p99 / max (ms)', `${result.recovery_p99_ms} / ${recovery.samples.length ? Math.max(...recovery.samples) : 0}`],
    ['lateness p99 (ms)', result.lateness_p99_ms],
    ['gateway SIGKILLs', gatewayKills],
    ['Redis restart downtime (ms)', redisDowntimeMs],
    ['inbound messages / lost / turned twice', `${pushed.length} / ${lostInbound} / ${duplicateInbound}`],
    [
      'Telegram parts queued / sent twice / out of order / not sent',
      `${replies.parts} / ${replies.duplicateReplies} / ${replies.outOfOrder} / ${replies.unsentParts}`,
    ],
    ['other Telegram messages (notices, errors)', replies.otherMessages],
    ['Redis keys one interval in / at the end (growth)', `${keysWarm ?? '?'} / ${keysEnd} (${result.redis_keys_growth})`],
    ['ticks started (the faults)', ticksStarted],
    [
      'Redis memory, first / last sample (MiB)',
      memory.length ? `${mib(memory[0]!.usedMemoryBytes)} / ${mib(memory.at(-1)!.usedMemoryBytes)}` : '?',
    ],
    ['Redis memory per 1,000 ticks, second half (B)', `${growth.bytesPerThousandTicks ?? '?'} (over ${growth.ticks} ticks)`],
    ['  of which not session history (B)', bookkeeping.bytesPerThousandTicks ?? '?'],
    [
      'session history, first / last sample (MiB)',
      memory.length ? `${mib(memory[0]!.historyBytes ?? 0)} / ${mib(memory.at(-1)!.historyBytes ?? 0)}` : '?',
    ],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  process.stdout.write(`${rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n')}\n`);
  // The key families whose memory changed between one interval in and the end, largest change first.
  const none: FamilySize = { keys: 0, bytes: 0 };
  const changed = [...new Set([...familiesWarm.keys(), ...familiesEnd.keys()])]
    .map((f) => ({ f, warm: familiesWarm.get(f) ?? none, end: familiesEnd.get(f) ?? none }))
    .filter((x) => x.warm.keys !== x.end.keys || x.warm.bytes !== x.end.bytes)
    .sort((a, b) => Math.abs(b.end.bytes - b.warm.bytes) - Math.abs(a.end.bytes - a.warm.bytes));
  const size = (x: FamilySize) => `${x.keys} keys ${(x.bytes / 1024).toFixed(0)} KiB`;
  process.stdout.write(
    `\nkey families that changed (one interval in → end):\n${changed.map((x) => `  ${x.f.padEnd(44)} ${size(x.warm).padStart(22)} → ${size(x.end)}`).join('\n') || '  none'}\n`,
  );
  process.stdout.write(
    `memory samples (s into the faults: MiB used/of it history, keys, ticks): ${memory.map((m) => `${Math.round((m.at - faultsStart) / 1000)}:${mib(m.usedMemoryBytes)}/${mib(m.historyBytes ?? 0)},${m.keys},${m.ticksStarted}`).join(' ')}\n`,
  );

  // --- teardown ---
  await Promise.allSettled([...workers, gateway].map((p) => stopProc(p, 'SIGTERM', 5_000)));
  await Promise.all(proxies.map((p) => p.close()));
  await queues.close();
  client.disconnect();
  await redis.stop();
  await telegram.close();
  await model.close();
  if (opts.keep) say(`kept ${dir}`);
  else rmSync(dir, { recursive: true, force: true });
  if (opts.json) process.stdout.write(`${JSON.stringify(result)}\n`);
}

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

/** `MEMORY USAGE` of each key (every element counted), in one pipeline; 0 for a key that is gone. */
async function memoryUsage(client: RedisClient, keys: string[]): Promise<number[]> {
  const pipeline = client.pipeline();
  for (const key of keys) pipeline.call('MEMORY', 'USAGE', key, 'SAMPLES', '0');
  const replies = (await pipeline.exec()) ?? [];
  return keys.map((_, i) => {
    const [err, bytes] = replies[i] ?? [null, 0];
    return err ? 0 : Number(bytes ?? 0);
  });
}

/** Bytes Redis holds for the sessions' transcripts and event streams. */
async function historyBytes(client: RedisClient, keys: Keys, sessionIds: string[]): Promise<number> {
  const sizes = await memoryUsage(
    client,
    sessionIds.flatMap((s) => [keys.transcript(s), keys.events(s)]),
  );
  return sizes.reduce((sum, b) => sum + b, 0);
}

/** Keys of one family and the memory they take. */
interface FamilySize {
  keys: number;
  bytes: number;
}

/** Every key of the run's Redis by family (`keyFamily`), with its memory (`memoryUsage`). */
async function keyFamilies(client: RedisClient): Promise<Map<string, FamilySize>> {
  const families = new Map<string, FamilySize>();
  let cursor = '0';
  do {
    const [next, batch] = await client.scan(cursor, 'COUNT', 1000);
    cursor = next;
    const sizes = await memoryUsage(client, batch);
    batch.forEach((key, i) => {
      const family = keyFamily(key);
      const f = families.get(family) ?? { keys: 0, bytes: 0 };
      families.set(family, { keys: f.keys + 1, bytes: f.bytes + sizes[i]! });
    });
  } while (cursor !== '0');
  return families;
}

main().then(
  () => process.exit(0),
  (err: Error) => {
    process.stderr.write(`chaos run failed: ${err.stack ?? err.message}\n`);
    process.exit(1);
  },
);
