/**
 * Commands in chats: whom a command is addressed to (field report F16), and
 * `/start`, `/help` and unknown commands (F21) — through the real grammY
 * gateway against the local Bot API server, a real worker and a local model.
 */
import { describe, expect, it } from 'vitest';
import { startGateway } from '../gateway/gateway-process.ts';
import { parseChatCommand } from '../scheduler/session/chat-command.ts';
import { createLogger } from '../scheduler/logger.ts';
import { WorkerProcess } from '../worker/worker-process.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from './support/fake-telegram.ts';
import { waitFor } from './support/http.ts';
import { ALLOWED_USER, telegramEnv } from './support/telegram-env.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const cleanups = cleanupAfterEach();

describe('whom a command is for (scheduler/session/chat-command.ts)', () => {
  it('a command with @name is ours only when name is this bot; otherwise it is for another bot', () => {
    expect(parseChatCommand('/loop@Hermes_Test_Bot 10m x', 'hermes_test_bot')).toEqual({
      kind: 'command',
      name: 'loop',
      args: '10m x',
      text: '/loop 10m x',
    });
    expect(parseChatCommand('/stop@other_bot', 'hermes_test_bot')).toEqual({ kind: 'other-bot', name: 'stop', bot: 'other_bot' });
    expect(parseChatCommand('/stop@other_bot')).toMatchObject({ kind: 'other-bot' });
    expect(parseChatCommand('/STOP')).toEqual({ kind: 'command', name: 'stop', args: '', text: '/STOP' });
    expect(parseChatCommand('/etc/hosts is broken')).toEqual({ kind: 'message' });
    expect(parseChatCommand('hello /stop@other_bot')).toEqual({ kind: 'message' });
  });

  it('--run, --command and --script are found as words of their own, not inside backticks', async () => {
    const { shellOnlyFlag } = await import('../scheduler/session/chat-command.ts');
    expect(shellOnlyFlag("10m check disk --run 'df -h'")).toBe('--run');
    expect(shellOnlyFlag('10m check --command=ci')).toBe('--command');
    expect(shellOnlyFlag('every 1h x --script "date"')).toBe('--script');
    expect(shellOnlyFlag('10m check that `npm test --run` passes')).toBeUndefined();
    expect(shellOnlyFlag('10m rerun --running-total')).toBeUndefined();
  });

  it('F16: a worker ignores an addressed command that reached it (the gateway strips its own name)', async () => {
    const { runSlashCommand } = await import('../worker/chat/slash-commands.ts');
    const ctx = { sessionId: 's', origin: { surface: 'chat' as const }, schedules: undefined as never, config: undefined as never };
    expect(await runSlashCommand('/stop@other_bot', ctx)).toEqual({ kind: 'ignored', reason: 'other-bot' });
    expect(await runSlashCommand('just text', ctx)).toEqual({ kind: 'message' });
  });
});

async function stack(fake: FakeTelegram, overrides: Record<string, unknown> = {}) {
  const model = await startFakeOpenAI();
  model.respond(() => 'all green');
  cleanups.push(() => model.close());
  const env = telegramEnv(fake, { 'agent.base_url': model.baseUrl, 'agent.api_key': 'k', ...overrides });
  cleanups.push(() => env.cleanup());
  const log = createLogger({ level: 'silent' });
  const worker = await WorkerProcess.start({ config: env.config, redisUrl: env.redisUrl, log });
  cleanups.push(() => worker.drain());
  const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log });
  cleanups.push(() => gw.close());
  /** Send `text` and wait for the bot's next `n` messages. */
  const say = async (text: string, n = 1) => {
    const before = fake.sent.length;
    fake.pushMessage({ fromId: ALLOWED_USER, text });
    await waitFor(() => fake.sent.length >= before + n, 20_000, `answer to ${text}`);
    return fake.sent.slice(before).map((m) => m.text);
  };
  return { model, worker, say };
}

describe('Telegram commands', () => {
  it('F16: /loop@<this bot> sets the loop; /stop@other_bot is ignored entirely: the loop is still active, no model call, no answer', async () => {
    const fake = await startFakeTelegram();
    cleanups.push(() => fake.close());
    const { model, worker, say } = await stack(fake);
    const [set, tick] = await say('/loop@hermes_test_bot 10m check the build', 2);
    expect(set).toMatch(/^Loop set: every 10m/);
    expect(tick).toBe('all green');
    const session = `telegram:${fake.sent[0]!.chat_id}`;
    const calls = model.requests.length;

    fake.pushMessage({ fromId: ALLOWED_USER, text: '/stop@other_bot' });
    fake.pushMessage({ fromId: ALLOWED_USER, text: '/loop@other_bot 1m something else' });
    fake.pushMessage({ fromId: 999, text: '/help@other_bot' }); // not even a refusal: it was not for us
    // Updates are relayed and answered in order: once /status is answered, the three before it were handled.
    const [status] = await say('/status');
    expect(status).toMatch(/^loop: active · every 10m/);
    expect(await worker.deps.loops.get(session, 'loop')).toMatchObject({
      status: 'active',
      intervalSeconds: 600,
      prompt: 'check the build',
    });
    expect(model.requests.length).toBe(calls);
    expect(fake.sent.map((m) => m.text)).toEqual([set, tick, status]);
  });

  it('F21: /start and /help answer a short help text, /foo answers "unknown command" pointing to /help; none is a model turn', async () => {
    const fake = await startFakeTelegram();
    cleanups.push(() => fake.close());
    const { model, worker, say } = await stack(fake, { 'loops.min_interval_seconds': 30 });
    const [start] = await say('/start');
    expect(start).toMatch(/^Hermes runs schedules for this chat/);
    expect(start).toMatch(/\/loop \[every\] <interval> <prompt>/);
    expect(start).toMatch(/You are on this bot's allow-list \(1 user allowed in TELEGRAM_ALLOWED_USERS\)\./);
    expect(start!.length).toBeLessThan(700);
    expect(await say('/help')).toEqual([start]);
    expect(await say('/help@hermes_test_bot')).toEqual([start]);
    expect(await say('/foo bar')).toEqual([
      'Unknown command /foo. Send /help for the commands; anything that is not a command goes to the agent.',
    ]);
    // F22 in the chat: the same refusals as the shell, answered, nothing set
    expect((await say('/loop 1x check'))[0]).toMatch(/^"1x" is not an interval: unknown unit "x"/);
    expect(await say('/loop 5s check')).toEqual(['The interval 5s is below the minimum of 30s (loops.min_interval_seconds).']);
    expect(await worker.deps.loops.get(`telegram:${fake.sent[0]!.chat_id}`, 'loop')).toBeNull();
    expect(model.requests).toHaveLength(0);
  });

  it('--run, --command and --script typed in a chat: the reply says they are shell-only; nothing is set, no model turn', async () => {
    const fake = await startFakeTelegram();
    cleanups.push(() => fake.close());
    const { model, worker, say } = await stack(fake);
    const session = `telegram:${ALLOWED_USER}`;
    const [run] = await say("/loop 10m check disk --run 'df -h /'");
    expect(run).toBe(
      [
        '--run works only in the shell: chat messages can never start a command turn. Nothing was changed.',
        `From a shell on the host: hermes loop <interval> <prompt> --session ${session} --deliver ${session} --run '<shell command>'`,
        'To keep the words in a prompt, put them in backticks.',
      ].join('\n'),
    );
    expect((await say('/hb every 1h inbox --command ci'))[0]).toMatch(
      /^--command works only in the shell: .*\nFrom a shell on the host: hermes heartbeat every <interval> <prompt> --session \S+ --deliver \S+ --command <name>\n/,
    );
    expect((await say('/goal keep the disk clean --script "rm -rf /tmp/x"'))[0]).toMatch(
      /^--script works only in the shell: [\s\S]*hermes cron add "<schedule>" --script '<shell command>'/,
    );
    expect(await worker.deps.loops.get(session, 'loop')).toBeNull();
    expect(await worker.deps.loops.get(session, 'heartbeat')).toBeNull();
    const [status] = await say('/status');
    expect(status).not.toMatch(/active/);
    expect(model.requests).toHaveLength(0);
  });
});
