/**
 * `hermes chat`: attach, detach, reattach and see what was missed (issue: Foundation, point 6).
 *
 * Each test has its own Redis prefix, worker, session and HERMES_HOME (where a client keeps its place in a
 * session), so the tests run side by side: most of their time is spent waiting for ticks.
 */
import { describe } from 'vitest';
import { PassThrough } from 'node:stream';
import { events, startWorkerStack, waitFor, waitForEvents } from './support/stack.ts';
import { runChat } from '../cli/chat-client.ts';
import { connectCli } from '../cli/connect-cli.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { it, type CleanUp } from './support/cleanup.ts';

/** A test env with a worker and a CLI connection, all cleaned up after the test. */
async function attachedStack(cleanups: CleanUp[], overrides: Record<string, unknown> = {}) {
  const { env, c } = await startWorkerStack(cleanups, overrides);
  const conn = await connectCli(env.config, env.redisUrl);
  cleanups.push(() => conn.close());
  return { env, c, conn };
}

describe.concurrent('chat client', () => {
  it('prints live ticks, detaches on end of input, and on reattach first prints what it missed', async ({ cleanups, expect }) => {
    const { env, c, conn } = await attachedStack(cleanups);

    const out1: string[] = [];
    const input1 = new PassThrough();
    const first = runChat(env.config, conn, 'ch', { input: input1, out: (l) => out1.push(l) });
    await c.schedules.set(
      'ch',
      'loop',
      { prompt: 'p', intervalSeconds: 1, times: 4, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: { kind: 'command', command: 'echo "state $HERMES_TICK"', timeoutSeconds: 5 },
      },
    );
    await waitFor(async () => (out1.some((l) => l.includes('state 1')) ? true : undefined), 10_000, 'a tick printed');
    input1.end(); // Ctrl+D
    await first;
    expect(out1.at(-1)).toMatch(/Detached from session ch/);
    const seenWhileAttached = out1.filter((l) => /state \d/.test(l)).length;

    await waitFor(async () => ((await c.loops.get('ch', 'loop'))?.status === 'finished' ? true : undefined), 10_000);
    const out2: string[] = [];
    const input2 = new PassThrough();
    const second = runChat(env.config, conn, 'ch', { input: input2, out: (l) => out2.push(l) });
    await waitFor(() => out2.some((l) => /Loop finished: ran 4 times/.test(l)), 10_000, 'the missed events printed');
    input2.end();
    await second;
    const missedHeader = out2.findIndex((l) => /event\(s\) while you were away/.test(l));
    expect(missedHeader).toBeGreaterThan(0);
    const missed = out2.join('\n').match(/state \d/g) ?? [];
    expect(missed.length).toBe(4 - seenWhileAttached);
    expect(missed.at(-1)).toBe('state 4');
  });

  it('a typed message becomes a user turn whose reply is printed', async ({ cleanups, expect }) => {
    const model = await startFakeOpenAI();
    model.respond((req) => `you said: ${req.messages.at(-1)!.content}`);
    cleanups.push(() => model.close());
    const { env, c, conn } = await attachedStack(cleanups, { 'agent.base_url': model.baseUrl, 'agent.api_key': 'k' });
    const out: string[] = [];
    const input = new PassThrough();
    const chat = runChat(env.config, conn, 'talk', { input, out: (l) => out.push(l) });
    input.write('hello there\n');
    const [reply] = await waitForEvents(c, 'talk', 'reply', 1);
    expect(reply!.data.pid).toBe(process.pid); // the worker that answered (no "pid ?")
    await waitFor(async () => (out.some((l) => l.includes('you said: hello there')) ? true : undefined), 5_000);
    expect(out.find((l) => l.includes('agent'))).toMatch(/agent \(worker pid \d+\)/);
    input.write('/loop 5s check --times 1\n');
    await waitFor(async () => (out.some((l) => l.includes('Loop set: every 5s')) ? true : undefined), 5_000);
    // F16: a command addressed to another bot is not sent (and so never waited for on detach)
    input.write('/stop@other_bot\n');
    await waitFor(async () => (out.some((l) => l === 'Not sent: /stop@other_bot is addressed to another bot.') ? true : undefined), 5_000);
    const detachStarted = Date.now();
    input.end();
    await chat;
    expect(Date.now() - detachStarted).toBeLessThan(5_000);
  });
});

describe.concurrent('Ctrl+C in hermes chat', () => {
  it('during a wakeup turn pauses the loop (docs/DESIGN.md §4) and stops the running turn', async ({ cleanups, expect }) => {
    const { spawn } = await import('node:child_process');
    const { HERMES_BIN, SPAWN_START_TIMEOUT_MS } = await import('./support/stack.ts');
    const { env, c } = await startWorkerStack(cleanups);
    const child = spawn(process.execPath, [HERMES_BIN, 'chat', '--session', 'intr'], {
      env: env.childEnv,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    cleanups.push(() => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    await waitFor(async () => (out.includes('Attached to session intr') ? true : undefined), SPAWN_START_TIMEOUT_MS, 'chat attached');
    await c.schedules.set(
      'intr',
      'loop',
      { prompt: 'slow', intervalSeconds: 1, times: null, until: null, notes: [] },
      {
        origin: { surface: 'cli' },
        runner: { kind: 'command', command: 'sleep 30; echo slow', timeoutSeconds: 60 },
      },
    );
    await waitFor(async () => (out.includes('loop tick #1 claimed, starts at its due time') ? true : undefined), 10_000, 'tick shown');
    child.kill('SIGINT');
    await waitFor(async () => ((await c.loops.get('intr', 'loop'))?.status === 'paused' ? true : undefined), 5_000, 'loop paused');
    await waitFor(async () => (out.includes('Interrupted the wakeup turn. Loop paused') ? true : undefined), 5_000, 'message');
    // The running turn is stopped, not left to finish its 30 s command.
    const failed = (await waitForEvents(c, 'intr', 'tick.failed', 1, 15_000))[0]!;
    expect(failed.data.error).toBe('Interrupted from the chat (Ctrl+C); the loop is paused.');
    expect(await events(c, 'intr', 'reply')).toEqual([]);
    child.stdin.end();
    await new Promise((r) => child.on('exit', r));
  });
});
