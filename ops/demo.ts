/**
 * `npm run demo` — the main job, end to end, on real parts, in well under a
 * minute and without an API key:
 *
 *   1. start the stack: an embedded Redis and two `hermes worker` processes;
 *   2. set a loop (every 3 s) whose turns read a real file through the command
 *      runner — or, when OPENAI_BASE_URL is set, an agent loop: the model at
 *      that endpoint checks the build itself with the `ci_status` tool the
 *      demo's config declares (and may `read_file` in the demo's folder), and
 *      `hermes chat` shows one line per tool call;
 *   3. attach `hermes chat`, watch two ticks, detach (Ctrl+D);
 *   4. change the file while no client is attached;
 *   5. reattach: the ticks that fired meanwhile are shown first, and their
 *      output reflects the change;
 *   6. SIGKILL the worker that is in the middle of a tick, and show that the
 *      tick completed once, on the other worker, and was delivered once;
 *   7. print a summary and clean up.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openRedisClient } from '../scheduler/store/redis/connection-factory.ts';
import { Keys } from '../scheduler/store/keys.ts';
import type { SessionEvent, SessionStore } from '../scheduler/session/session-store.ts';
import { loadConfig } from '../scheduler/config/config.ts';
import { sessionStoreFor } from '../scheduler/services.ts';
import { startSupervisedRedis } from '../scheduler/store/redis/embedded-supervisor.ts';
import { createLogger } from '../scheduler/logger.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const bin = join(root, 'cli', 'hermes.mjs');
const SESSION = 'demo';
const INTERVAL = '3s';
const started = Date.now();

const home = mkdtempSync(join(tmpdir(), 'hermes-demo-'));
const stateFile = join(home, 'ci-status.txt');
const useModel = Boolean(process.env.OPENAI_BASE_URL);
const env: NodeJS.ProcessEnv = {
  ...process.env,
  HERMES_HOME: home,
  HERMES_LOG_LEVEL: 'warn',
  HERMES_LOOPS_MIN_INTERVAL_SECONDS: '1',
  // Short locks so a killed worker's tick is picked up again within seconds.
  HERMES_WORKER_LOCK_DURATION_MS: '2500',
  HERMES_WORKER_STALLED_INTERVAL_MS: '1000',
};
const children: ChildProcess[] = [];

const bold = (text: string) => (process.stdout.isTTY ? `\x1b[1m${text}\x1b[0m` : text);
const say = (text: string) => process.stdout.write(`\n${bold(`▶ ${text}`)}  (t+${((Date.now() - started) / 1000).toFixed(1)}s)\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Output of each `hermes` child so far (to wait for a line). */
const outputs = new Map<ChildProcess, string>();

function hermes(args: string[], options: { pipeIn?: boolean; prefix?: string } = {}): ChildProcess {
  const child = spawn(process.execPath, [bin, ...args], { env, stdio: [options.pipeIn ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
  children.push(child);
  outputs.set(child, '');
  const prefix = options.prefix;
  child.stdout!.on('data', (d: Buffer) => {
    outputs.set(child, outputs.get(child) + d.toString());
    if (prefix !== undefined) process.stdout.write(d.toString().replace(/^(?=.)/gm, prefix));
  });
  child.stderr!.on('data', (d: Buffer) => process.stderr.write(d.toString().replace(/^(?=.)/gm, '  [stderr] ')));
  return child;
}

async function run(args: string[]): Promise<string> {
  const child = hermes(args);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  if (code !== 0) throw new Error(`hermes ${args.join(' ')} exited with ${code}`);
  return out.trim();
}

async function main(): Promise<void> {
  say('Starting the stack: embedded Redis (AOF on) and two worker processes');
  // The operator's tools (used when a model is configured): read files in the demo's folder, and a
  // `ci_status` command (it takes a second, like a real CI query, so the crash below lands mid-tick).
  writeFileSync(
    join(home, 'config.yaml'),
    [
      'tools:',
      `  files: { roots: [${JSON.stringify(home)}] }`,
      '  commands:',
      '    ci_status:',
      `      command: ${JSON.stringify(`sleep 1; cat '${stateFile}'`)}`,
      '      description: The status of the CI build, as it is now.',
      '',
    ].join('\n'),
    // 0600: a config.yaml others may read is warned about by every process at start (the home is mkdtemp's 0700).
    { mode: 0o600 },
  );
  // The embedded Redis of the demo's HERMES_HOME, as `hermes up` runs it (a unix socket with a
  // password); the workers and the CLI find it through HERMES_HOME.
  delete env.REDIS_URL;
  const redis = await startSupervisedRedis({ home, log: createLogger({ level: 'warn', name: 'redis' }), maxRestarts: 5 });
  const workers = [hermes(['worker']), hermes(['worker'])];
  const client = openRedisClient(redis.topology, 'commands');
  const config = loadConfig({ env });
  const keys = new Keys(config.redis.prefix, { shards: config.redis.shards });
  const sessions = sessionStoreFor(config, client, keys);
  try {
    for (let i = 0; i < 100 && (await client.zcard(keys.workers)) < 2; i++) await sleep(100);
    console.log(`  Redis unix:${redis.paths.socket} (pid ${redis.pid}); workers pid ${workers.map((w) => w.pid).join(' and ')}`);

    writeFileSync(stateFile, 'CI build #42: RUNNING (3 of 7 jobs done)\n');
    say(`Setting a loop every ${INTERVAL} on session "${SESSION}" that reads ${stateFile}`);
    const loopArgs = useModel
      ? [
          'loop',
          INTERVAL,
          'Call the ci_status tool (the build changes; check it afresh every time) and report the CI build status in one line.',
          '--session',
          SESSION,
        ]
      : [
          'loop',
          INTERVAL,
          'report the CI build status',
          '--session',
          SESSION,
          '--run',
          `sleep 1; printf 'CI status now: %s' "$(cat '${stateFile}')"`,
          '--timeout-seconds',
          '10',
        ];
    if (useModel)
      console.log(
        `  (OPENAI_BASE_URL is set: an agent loop; the model at ${process.env.OPENAI_BASE_URL} checks the build with the ci_status tool)`,
      );
    console.log(indent(await run(loopArgs)));

    say('Attaching a client (hermes chat) and watching two ticks');
    let chat = hermes(['chat', '--session', SESSION], { pipeIn: true, prefix: '  │ ' });
    await waitForEvents(sessions, '0', 'reply', 2, 15_000);
    say('Detaching the client (Ctrl+D); the laptop lid closes');
    chat.stdin!.end();
    await new Promise((r) => chat.on('exit', r));
    const detachedAt = await sessions.lastEventId(SESSION);

    say('While nobody is attached, the CI build turns green');
    writeFileSync(stateFile, 'CI build #42: GREEN (7 of 7 jobs passed)\n');
    const whileAway = await waitForEvents(sessions, detachedAt, 'reply', 2, 15_000);

    say('Reattaching: the client first prints what it missed');
    chat = hermes(['chat', '--session', SESSION], { pipeIn: true, prefix: '  │ ' });
    const reattached = chat;
    await waitFor(async () => (/now live|nothing new since you left/.test(outputs.get(reattached) ?? '') ? true : undefined), 20_000);

    say('Killing (SIGKILL) the worker that is in the middle of the next tick');
    const from = await sessions.lastEventId(SESSION);
    const [startEvent] = await waitForEvents(sessions, from, 'tick.started', 1, 15_000);
    const victimPid = Number(startEvent!.data.pid);
    const occurrence = String(startEvent!.data.occurrenceId);
    await sleep(300);
    process.kill(victimPid, 'SIGKILL');
    console.log(`  killed worker pid ${victimPid} during tick #${Number(startEvent!.data.tick)} (${occurrence})`);
    const replies = await waitFor(async () => {
      const evs = (await sessions.readEvents(SESSION, from, { count: 1000 })).filter(
        (e) => e.type === 'reply' && e.data.occurrenceId === occurrence,
      );
      return evs.length > 0 ? evs : undefined;
    }, 20_000);
    await sleep(4_000); // let a duplicate show up, if there were one
    const finalReplies = (await sessions.readEvents(SESSION, from, { count: 1000 })).filter(
      (e) => e.type === 'reply' && e.data.occurrenceId === occurrence,
    );
    chat.stdin!.end();
    await new Promise((r) => chat.on('exit', r));

    await run(['loop', 'stop', '--session', SESSION]);
    const all = (await sessions.readEvents(SESSION, '0', { count: 10_000 })).filter((e) => e.type === 'reply');
    say('Summary');
    const green = whileAway.filter((e) => /GREEN/i.test(String(e.data.text))).length;
    const toolCalls = (await sessions.readEvents(SESSION, '0', { count: 10_000 })).filter(
      (e) => e.type === 'tool.result' && e.data.name === 'ci_status' && !e.data.error,
    );
    const summary = [
      `ticks delivered: ${all.length}, median lateness ${median(all.map((e) => Number(e.data.latenessMs)))} ms`,
      `ticks fired while no client was attached: ${whileAway.length} (${green} of them already saw the GREEN build)`,
      `killed worker pid ${victimPid} mid-tick; ${occurrence} completed by pid ${Number(replies[0]!.data.pid)}`,
      `deliveries of that tick: ${finalReplies.length} (exactly once: ${finalReplies.length === 1 ? 'yes' : 'NO'})`,
      ...(useModel
        ? [`agent loop: the model called ci_status ${toolCalls.length} time(s); its tools are only the ones the config declares`]
        : []),
      `total time: ${((Date.now() - started) / 1000).toFixed(1)} s`,
    ];
    console.log(indent(summary.join('\n')));
    if (
      finalReplies.length !== 1 ||
      whileAway.length < 1 ||
      green < 1 ||
      Number(replies[0]!.data.pid) === victimPid ||
      (useModel && toolCalls.length === 0)
    ) {
      process.exitCode = 1;
      console.log('  DEMO FAILED: the scenario did not hold');
    }
  } finally {
    say('Cleaning up');
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
    await Promise.all(
      children.map(async (c) => (c.exitCode === null && c.signalCode === null ? new Promise((r) => c.on('exit', r)) : undefined)),
    );
    client.disconnect();
    await redis.stop();
    rmSync(home, { recursive: true, force: true });
  }
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n');
}

function median(xs: number[]): number {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)]! : NaN;
}

async function waitFor<T>(fn: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error('the demo timed out waiting for the stack');
    await sleep(100);
  }
}

async function waitForEvents(sessions: SessionStore, after: string, type: string, n: number, timeoutMs: number): Promise<SessionEvent[]> {
  return await waitFor(async () => {
    const evs = (await sessions.readEvents(SESSION, after, { count: 1000 })).filter((e) => e.type === type);
    return evs.length >= n ? evs.slice(0, n) : undefined;
  }, timeoutMs);
}

main().catch((err: Error) => {
  console.error(`demo failed: ${err.message}`);
  process.exitCode = 1;
});
