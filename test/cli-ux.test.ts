/**
 * The `hermes` command as a user at a terminal meets it: `--version`, a closed
 * pipe, Ctrl+C typed into `hermes up` and `hermes worker` (in a real pty),
 * human-readable logs on a terminal and JSON elsewhere, `hermes status`,
 * `loop`/`heartbeat`/`goal` from the shell, and shell completion.
 *
 * What is about the process (exit codes, stdout and stderr, signals, a real bash completing) runs
 * `hermes`; the wording of `status`, `loop`, `heartbeat`, `goal` and the completion scripts comes
 * from the commands' own code run in this process (`registerLoopCommand`, `runStatus`,
 * `completionScript`), each a process start (~0.45 s of CPU) fewer.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { freePort } from '../scheduler/store/redis/embedded-redis.ts';
import { formatEvent } from '../cli/event-format.ts';
import { connectCli } from '../cli/connect-cli.ts';
import { registerLoopCommand } from '../cli/commands/loop.ts';
import { runStatus } from '../cli/commands/status.ts';
import { registerCronCommands } from '../cli/commands/cron.ts';
import { completionScript, registerCompletionCommand } from '../cli/commands/completion.ts';
import { reportError } from '../cli/run-command.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { clients, HERMES_BIN, ROOT, runHermes, SPAWN_START_TIMEOUT_MS, waitFor } from './support/stack.ts';
import { runInTerminal } from './support/terminal.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { runLoopCli } from './support/loop-cli.ts';
import type { CliResult } from './support/cron-cli.ts';
import { alive } from './support/child-processes.ts';

const cleanups = cleanupAfterEach();

function env(): TestEnv {
  const e = testEnv();
  cleanups.push(() => e.cleanup());
  return e;
}

const STACK_TRACE = /^\s+at .+\(?.*:\d+:\d+\)?$/m;

/** `hermes loop|heartbeat|hb|goal <args>` run in this process (test/support/loop-cli.ts). */
const shellCommand = (e: TestEnv, args: string[]): Promise<CliResult> => runLoopCli(e.config, args);

/** `hermes status [--all|--json]` run in this process (`runStatus`, connecting as `hermes` does): its output. */
async function status(e: TestEnv, opts: { all?: boolean; json?: boolean } = {}): Promise<string> {
  const conn = await connectCli(e.config);
  const lines: string[] = [];
  try {
    await runStatus(e.config, conn, opts, (line) => lines.push(line));
  } finally {
    await conn.close();
  }
  return lines.map((l) => `${l}\n`).join('');
}

describe('hermes --version', () => {
  it('prints the package version', async () => {
    const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
    const r = await runHermes(env(), ['--version']);
    expect(r).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
  });
});

describe('hermes heartbeat --help', () => {
  it('lists every control word the command accepts, stop among them', async () => {
    const r = await shellCommand(env(), ['heartbeat', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Usage: hermes heartbeat\|hb \[options\] \[args\.\.\.\]/);
    expect(r.stdout.replace(/\s+/g, ' ')).toContain('status|pause|resume|stop|clear|help');
  });

  it('names every platform a reply can go to (a loop and a heartbeat also a webhook), and the gateway every relay', async () => {
    for (const kind of ['loop', 'heartbeat']) {
      const r = await shellCommand(env(), [kind, '--help']);
      expect(r.stdout.replace(/\s+/g, ' '), kind).toMatch(
        /telegram:<chat>\[:<thread>\], slack:<channel>\[:<thread_ts>\], discord:<channel>\[:<thread>\], an http\(s\) webhook, or local/,
      );
    }
    const goal = await shellCommand(env(), ['goal', '--help']);
    expect(goal.stdout.replace(/\s+/g, ' ')).toMatch(/telegram:<chat>\[:<thread>\], slack:<channel>\[:<thread_ts>\] or discord:<channel>/);
    const top = await runHermes(env(), ['--help']);
    expect(top.stdout.replace(/\s+/g, ' ')).toContain('gateway sidecar: Telegram, Slack and Discord relays');
  });
});

describe('a closed pipe', () => {
  it('`hermes status` whose reader has gone ends quietly (exit 0, no stack trace)', async () => {
    const e = env();
    const c = clients(e);
    cleanups.push(() => c.close());
    await c.schedules.set(
      'pipe',
      'loop',
      { prompt: 'p', intervalSeconds: 600, times: null, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: { kind: 'command', command: 'true', timeoutSeconds: 5 },
      },
    );
    // The reader closes before the command writes a byte: every write meets EPIPE.
    const child = spawn(process.execPath, [HERMES_BIN, 'status'], { env: e.childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    // The same through a shell pipeline, as typed (at the same time: the two runs are independent).
    const piped = spawn('sh', ['-c', `"${process.execPath}" "${HERMES_BIN}" status | head -1`], {
      env: e.childEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    piped.stdout.on('data', (d: Buffer) => (out += d.toString()));
    piped.stderr.on('data', (d: Buffer) => (err += d.toString()));
    // 'close', not 'exit': output still in the pipe is read before the checks
    const [code] = await Promise.all([new Promise<number | null>((r) => child.on('close', r)), new Promise((r) => piped.on('close', r))]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(out).toMatch(/^workers alive: 0\n$/);
    expect(err).toBe('');
  });
});

describe('Ctrl+C typed into a terminal', () => {
  it('`hermes up` with the chat attached stops everything it started: worker, gateway, embedded Redis; no stack trace', async () => {
    const home = mkdtempSync(join(tmpdir(), 'hermes-up-'));
    cleanups.push(() => rmSync(home, { recursive: true, force: true }));
    const port = await freePort();
    const childEnv: NodeJS.ProcessEnv = { ...process.env, HERMES_HOME: home, API_SERVER_PORT: String(port), HERMES_LOG_LEVEL: 'info' };
    for (const k of ['REDIS_URL', 'TELEGRAM_BOT_TOKEN', 'API_SERVER_HOST', 'API_SERVER_KEY', 'OPENAI_BASE_URL', 'OPENAI_API_KEY'])
      delete childEnv[k];
    const term = runInTerminal([process.execPath, HERMES_BIN, 'up'], childEnv);
    cleanups.push(() => {
      if (term.child.exitCode === null) term.child.kill('SIGKILL');
    });
    await waitFor(() => term.output().includes('Attached to session main'), SPAWN_START_TIMEOUT_MS, 'chat attached');
    const logFile = join(home, 'logs', 'hermes.log');
    const started = readFileSync(logFile, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const redis = started.find((l) => l.msg === 'embedded Redis started')!;
    const redisPid = Number(redis.redisPid);
    const redisSocket = String(redis.socket);
    expect(redisSocket).toBe(join(home, 'redis', 'redis.sock'));
    expect(alive(redisPid)).toBe(true);
    await waitFor(() => readFileSync(logFile, 'utf8').includes('gateway listening'), 15_000, 'gateway up');
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    expect(health.status).toBe(200);

    term.type('\x03'); // Ctrl+C at the keyboard: SIGINT to the terminal's foreground process group
    const code = await Promise.race([term.exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 30_000))]);
    const shown = term.output();
    expect(code, shown).toBe(0);
    expect(shown).toContain('Stopped.');
    expect(shown).not.toMatch(STACK_TRACE);
    expect(shown).not.toMatch(/Error/);
    expect(alive(redisPid)).toBe(false);
    expect(existsSync(redisSocket)).toBe(false);
    await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
    expect(existsSync(join(home, 'redis', 'redis.url'))).toBe(false);
    // The worker drained and the embedded Redis was stopped by `hermes up` (not by the terminal's SIGINT).
    const log = readFileSync(logFile, 'utf8');
    expect(log).toContain('worker stopped');
    expect(log).not.toContain('ECONNREFUSED');
  });

  it('`hermes worker` logs human-readable lines on a terminal, stops on Ctrl+C; JSON lines when stderr is a pipe', async () => {
    const e = env();
    const term = runInTerminal([process.execPath, HERMES_BIN, 'worker'], { ...e.childEnv, HERMES_LOG_LEVEL: 'info' });
    cleanups.push(() => {
      if (term.child.exitCode === null) term.child.kill('SIGKILL');
    });
    // The piped worker starts at the same time (two independent processes; each start costs seconds).
    const piped = spawn(process.execPath, [HERMES_BIN, 'worker'], {
      env: { ...e.childEnv, HERMES_LOG_LEVEL: 'info' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    piped.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    cleanups.push(() => {
      if (piped.exitCode === null) piped.kill('SIGKILL');
    });
    await waitFor(() => term.output().includes('worker started'), SPAWN_START_TIMEOUT_MS, 'worker started');
    expect(term.output()).toMatch(/INFO.*worker started/);
    expect(term.output()).not.toContain('{"level"');
    term.type('\x03');
    expect(await term.exited).toBe(0);
    expect(term.output()).toMatch(/worker stopped/);
    expect(term.output()).not.toMatch(STACK_TRACE);

    await waitFor(() => stderr.includes('worker started'), SPAWN_START_TIMEOUT_MS, 'piped worker started');
    const first = stderr.split('\n')[0]!;
    expect(JSON.parse(first)).toMatchObject({ level: 30, name: 'worker' });
    piped.kill('SIGTERM');
    expect(await new Promise((r) => piped.on('exit', r))).toBe(0);
  });
});

describe('hermes status', () => {
  it('aligns its columns and hides finished schedules unless --all', async () => {
    const e = env();
    const c = clients(e);
    cleanups.push(() => c.close());
    const runner = { kind: 'command' as const, command: 'true', timeoutSeconds: 5 };
    await c.schedules.set(
      'a-long-session-name',
      'loop',
      { prompt: 'watch the build', intervalSeconds: 600, times: null, until: null, notes: [] },
      { origin: { surface: 'cli' }, runner },
    );
    await c.schedules.set(
      'b',
      'heartbeat',
      { prompt: 'inbox', intervalSeconds: 3600, times: null, until: null, notes: [] },
      { origin: { surface: 'cli' }, runner },
    );
    await c.schedules.set(
      'done',
      'loop',
      { prompt: 'old', intervalSeconds: 600, times: null, until: null, notes: [] },
      { origin: { surface: 'cli' }, runner },
    );
    await c.schedules.stop('done', 'loop');

    // Three read-only runs, at the same time (the process itself: 'a closed pipe' above).
    const [r, all, asJson] = await Promise.all([status(e), status(e, { all: true }), status(e, { json: true })]);
    const out = r.trimEnd().split('\n');
    // The loop table, then the goals and the cron jobs (none here).
    expect(out.slice(out.indexOf(''))).toEqual(['', 'goals: none active or paused', '', 'cron jobs: none']);
    expect(out[0]).toMatch(/^workers alive: 0$/);
    expect(out[1]).toBe('platforms: no gateway running (`hermes up` or `hermes gateway` relays Telegram, Slack and Discord)');
    const lines = out.slice(1, out.indexOf(''));
    expect(lines[1]).toMatch(/^SESSION +KIND +STATE +CADENCE +TICKS +NEXT +TOKENS +PROMPT$/);
    expect(lines).toHaveLength(4);
    expect(r).not.toContain('done');
    // Every column starts at the same offset in every row.
    const starts = ['KIND', 'STATE', 'CADENCE', 'TICKS', 'NEXT', 'TOKENS', 'PROMPT'].map((h) => lines[1]!.indexOf(h));
    for (const row of lines.slice(2))
      for (const p of starts) expect(`${row[p - 2]}${row[p - 1]}${row[p] === ' ' ? '_' : 'x'}`, row).toBe('  x');
    expect(lines[2]).toMatch(/^a-long-session-name +loop +active +every 10m +0\/100 +(due now|in .+|pending) +— +watch the build$/);

    expect(all).toMatch(/^done +loop +finished \(stopped by user\) /m);
    const json = JSON.parse(asJson) as { schedules: Array<{ session_id: string; next_due_at: number | null }> };
    expect(json.schedules.map((s) => s.session_id).sort()).toEqual(['a-long-session-name', 'b']);
  });
});

describe('loop, heartbeat and goal from the shell', () => {
  it('loop defaults to session main, prints JSON with --json, delivers to Telegram with --deliver, and names shell commands', async () => {
    const e = env();
    const c = clients(e);
    cleanups.push(() => c.close());
    const set = await shellCommand(e, ['loop', '10m', 'check', 'the', 'build', '--run', 'true', '--deliver', 'telegram:12345:7', '--json']);
    expect(set.code, set.stderr).toBe(0);
    const reply = JSON.parse(set.stdout) as { session: string; kind: string; reply: string; record: { deliver: string[]; status: string } };
    expect(reply).toMatchObject({
      session: 'main',
      kind: 'loop',
      record: { status: 'active', deliver: ['telegram:12345:7'], session_id: 'main', interval_seconds: 600 },
    });
    expect(reply.reply).toMatch(/^Loop set: every 10m/);
    expect(await c.loops.get('main', 'loop')).toMatchObject({ origin: { surface: 'cli' }, deliver: ['telegram:12345:7'] });

    const paused = await shellCommand(e, ['loop', 'pause']);
    expect(paused.stdout).toBe('Loop paused after 0 tick(s). hermes loop resume --session main continues it.\n');
    expect(paused.stdout).not.toContain('/loop');
    const badRoute = await shellCommand(e, ['loop', '10m', 'x', '--deliver', 'slack:1']);
    expect(badRoute).toMatchObject({ code: 2, stdout: '', stderr: expect.stringMatching(/^hermes: Invalid delivery target "slack:1"/) });
    expect(await c.loops.get('main', 'loop')).toMatchObject({ status: 'paused' });
  });

  it('heartbeat works from the shell like loop, with shell wording in replies and errors', async () => {
    const e = env();
    // The refused command is a real process (exit 2, one line on stderr, nothing on stdout); it touches
    // no schedule, so it runs at the same time as the set.
    const [hb, bad] = await Promise.all([
      shellCommand(e, ['heartbeat', 'every', '1h', 'anything', 'new?', '--session', 'ops', '--json']),
      runHermes(e, ['heartbeat', 'soon', 'x']),
    ]);
    expect(JSON.parse(hb.stdout)).toMatchObject({
      session: 'ops',
      kind: 'heartbeat',
      record: { interval_seconds: 3600, prompt: 'anything new?' },
    });
    expect((await shellCommand(e, ['hb', 'pause', '-s', 'ops'])).stdout).toBe(
      'Heartbeat paused after 0 tick(s). hermes heartbeat resume --session ops continues it.\n',
    );
    expect(bad.code).toBe(2);
    expect(bad.stdout).toBe('');
    expect(bad.stderr).toBe(
      'hermes: Usage: hermes heartbeat every <interval> <prompt>, e.g. hermes heartbeat every 30m report on the deploy.\n',
    );
  });

  it('nothing to act on is exit 2 for every kind (as cron show of an unknown job); status answers none with exit 0', async () => {
    const e = env();
    const refused = await Promise.all([
      runHermes(e, ['loop', 'pause', '--session', 'nosuch']),
      runHermes(e, ['loop', 'stop', '--session', 'nosuch']),
      runHermes(e, ['heartbeat', 'resume', '--session', 'nosuch']),
      runHermes(e, ['goal', 'clear', '--session', 'nosuch']),
      runHermes(e, ['cron', 'show', 'nosuch']),
    ]);
    expect(refused.map((r) => [r.code, r.stdout, r.stderr])).toEqual([
      [2, '', 'hermes: No loop in this session.\n'],
      [2, '', 'hermes: No loop in this session.\n'],
      [2, '', 'hermes: No heartbeat in this session.\n'],
      [2, '', 'hermes: No goal in this session.\n'],
      [2, '', expect.stringMatching(/^hermes: No cron job with id or name "nosuch"/)],
    ]);
    expect(await runHermes(e, ['loop', 'status', '--session', 'nosuch'])).toMatchObject({ code: 0, stdout: 'No loop in this session.\n' });
    // A schedule already in the asked state is not an error: the command's wish holds.
    expect((await shellCommand(e, ['loop', '10m', 'x', '--run', 'true', '--session', 'twice'])).code).toBe(0);
    expect((await shellCommand(e, ['loop', 'pause', '--session', 'twice'])).code).toBe(0);
    expect(await shellCommand(e, ['loop', 'pause', '--session', 'twice'])).toMatchObject({
      code: 0,
      stdout: 'Loop is paused; nothing to pause.\n',
    });
  });

  it('goal works from the shell like loop, with shell wording', async () => {
    const e = env();
    const goal = await shellCommand(e, ['goal', 'get', 'the', 'suite', 'green', '--json']);
    // No model in this environment: the reply says so (the shell's configuration, not necessarily the workers').
    expect(JSON.parse(goal.stdout)).toMatchObject({
      session: 'main',
      kind: 'goal',
      record: { status: 'active' },
      reply: expect.stringMatching(
        /^Goal set \(20-turn budget\): get the suite green\nWarning: no model: agent turns will fail — set OPENAI_BASE_URL .*\(this shell's configuration; /,
      ),
    });
    expect((await shellCommand(e, ['goal', 'pause'])).stdout).toBe(
      'Goal paused after 0 turn(s). hermes goal resume --session main continues it.\n',
    );
  });
});

describe('session events without a worker pid', () => {
  it('are shown without "pid ?"', () => {
    const text = formatEvent({ id: '1700000000000-0', type: 'reply', data: { source: 'message', text: 'hi' } })!;
    expect(text).not.toContain('?');
    expect(text.split('\n')[0]).toMatch(/^\[\d\d:\d\d:\d\d\] agent$/);
    expect(formatEvent({ id: '1700000000000-0', type: 'reply', data: { source: 'message', text: 'hi', pid: 42 } })).toContain(
      '(worker pid 42)',
    );
  });
});

describe('hermes completion', () => {
  it('bash completes commands, subcommands and options from the command tree', async () => {
    // The script of the real command tree, from the process; one bash completes every probe.
    const script = await runHermes(env(), ['completion', 'bash']);
    expect(script).toMatchObject({ code: 0, stderr: '' });
    const probes = [
      ['hermes', 'cr'],
      ['hermes', 'cron', 'sh'],
      ['hermes', 'cron', 'add', '--mis'],
      ['hermes', 'loop', '--deli'],
      ['hermes', ''],
    ];
    const probe = [
      script.stdout,
      ...probes.map(
        (words) =>
          `COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; COMPREPLY=(); _hermes_complete; echo "\${COMPREPLY[*]}"`,
      ),
    ].join('\n');
    const child = spawn('bash', ['-c', probe], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    await new Promise((r) => child.on('close', r)); // after the last of its output, not at its exit
    const [cr, cronSh, cronAddMis, loopDeli, top] = out.split('\n').map((line) => line.trim().split(' '));
    expect(cr).toEqual(['cron']);
    expect(cronSh).toEqual(['show']);
    expect(cronAddMis).toEqual(['--misfire']);
    expect(loopDeli).toEqual(['--deliver']);
    expect(top!.sort()).toEqual(
      expect.arrayContaining(['up', 'worker', 'gateway', 'loop', 'heartbeat', 'goal', 'cron', 'chat', 'status', 'completion']),
    );
  });

  it('zsh and fish scripts come from the same tree; another shell is refused as bad input', () => {
    // The tree's generator in this process, on commands registered as cli/main.ts registers them.
    const e = env();
    const program = new Command('hermes');
    registerLoopCommand(program, () => ({ config: e.config, connect: () => connectCli(e.config) }));
    registerCronCommands(program, { config: e.config, connect: () => connectCli(e.config) });
    registerCompletionCommand(program);
    expect(completionScript(program, 'zsh')).toContain('compdef _hermes_complete hermes');
    expect(completionScript(program, 'fish')).toContain("complete -c hermes -n '__fish_seen_subcommand_from cron' -a");
    const refused = (() => {
      try {
        completionScript(program, 'tcsh');
      } catch (err) {
        return err;
      }
    })();
    const lines: string[] = [];
    expect(reportError(refused, (l) => lines.push(l))).toBe(2);
    expect(lines).toEqual(['hermes: Unknown shell "tcsh": use bash, zsh, fish.']);
  });
});
