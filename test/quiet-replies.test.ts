/**
 * Quiet replies on every path a reply is delivered from (docs/CONTEXT.md, "Quiet ticks"): a loop tick, a
 * cron run, a goal continuation and a chat reply each answered with every shape of `[SILENT]` real models
 * write (test/support/quiet-replies.ts) send nothing to their Telegram route, and keep the text in the
 * event stream (and the transcript, or the cron run record); a reply that only mentions the marker is
 * delivered. `--notify always` delivers a quiet reply as it was written, for loops and cron jobs alike.
 * Real Redis, real BullMQ, a real worker, the real `openai` client against the local model server.
 */
import { describe } from 'vitest';
import { telegramOutboundQueue } from '../scheduler/delivery/outbound.ts';
import { enqueueInput } from '../scheduler/session/inbox.ts';
import type { Origin } from '../scheduler/session/origin.ts';
import type { NotifyMode } from '../scheduler/economy/notify.ts';
import { startAgentStack } from './support/agent-stack.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { openCronService } from './support/cron-worker.ts';
import { lastUserText, type FakeOpenAI, type RecordedRequest } from './support/fake-openai.ts';
import { NEAR_MISSES, SILENT_LINES, SILENT_SHAPES } from './support/quiet-replies.ts';
import { events, waitFor, waitForEvents, type TestClients } from './support/stack.ts';

/** Every reply the model gives, one per case: quiet ones first, then the near misses. */
const CASES = [
  ...[...SILENT_SHAPES, ...SILENT_LINES].map(([name, text]) => ({ name, text, quiet: true })),
  ...NEAR_MISSES.map(([name, text]) => ({ name, text, quiet: false })),
];

const isJudge = (req: RecordedRequest) => req.messages[0]?.role === 'system' && req.messages[0].content.startsWith('You judge');

/** A worker whose model answers `case N` (anywhere in the last user message) with case N's reply, and every judge with "done". */
async function setup(
  cleanups: CleanUp[],
): Promise<{ c: TestClients; model: FakeOpenAI; env: Awaited<ReturnType<typeof startAgentStack>>['env'] }> {
  const stack = await startAgentStack(cleanups, {});
  stack.model.respond((req) => {
    if (isJudge(req)) return '{"verdict":"done","reason":"checked"}';
    const n = /\bcase (\d+)\b/.exec(lastUserText(req));
    return n ? CASES[Number(n[1])]!.text : 'That is all.';
  });
  return stack;
}

const route = (chatId: string): Origin => ({ surface: 'telegram', route: { platform: 'telegram', chatId } });

/** What the Telegram outbound queue holds, by chat, in the order queued. */
async function sentByChat(c: TestClients): Promise<Map<string, string[]>> {
  const outbound = telegramOutboundQueue(c.keys, c.redis);
  try {
    const jobs = await outbound.getJobs(['waiting', 'delayed', 'prioritized', 'active', 'completed', 'failed']);
    const byChat = new Map<string, string[]>();
    for (const j of jobs.sort((a, b) => a.timestamp - b.timestamp))
      byChat.set(j.data.chatId, [...(byChat.get(j.data.chatId) ?? []), j.data.text]);
    return byChat;
  } finally {
    await outbound.close();
  }
}

/** Wait until every chat of `chats` got its last message `last(chat)`; the map of what each was sent. */
async function waitForLast(c: TestClients, chats: string[], last: (chat: string) => string, what: string): Promise<Map<string, string[]>> {
  return await waitFor(
    async () => {
      const sent = await sentByChat(c);
      return chats.every((chat) => sent.get(chat)?.at(-1) === last(chat)) ? sent : undefined;
    },
    60_000,
    what,
  );
}

describe.concurrent('a quiet reply is kept, not sent; a near miss is sent', () => {
  it('on a loop tick', async ({ cleanups, expect }) => {
    const { c } = await setup(cleanups);
    const chat = (i: number) => String(1000 + i);
    await Promise.all(
      CASES.map((_, i) =>
        c.schedules.set(
          `loop-${i}`,
          'loop',
          { prompt: `answer case ${i}`, intervalSeconds: 3600, times: 1, until: null, notes: [] },
          {
            origin: route(chat(i)),
            runner: { kind: 'agent' },
          },
        ),
      ),
    );
    // The notice that the loop finished is sent after its tick's reply: once it is there, nothing else comes.
    const sent = await waitForLast(
      c,
      CASES.map((_, i) => chat(i)),
      () => 'Loop finished: ran 1 times.',
      'every loop finished',
    );
    for (const [i, k] of CASES.entries()) {
      const expected = k.quiet ? ['Loop finished: ran 1 times.'] : [k.text.trim(), 'Loop finished: ran 1 times.'];
      expect(sent.get(chat(i)), k.name).toEqual(expected);
      const [reply] = await waitForEvents(c, `loop-${i}`, 'reply', 1);
      expect(reply!.data, k.name).toMatchObject({ text: k.text, ...(k.quiet ? { silent: true } : {}) });
      if (!k.quiet) expect(reply!.data.silent, k.name).toBeUndefined();
      expect((await c.sessions.transcript(`loop-${i}`)).at(-1), k.name).toMatchObject({ role: 'assistant', content: k.text });
      expect((await c.loops.get(`loop-${i}`, 'loop'))!.silentTicks ?? 0, k.name).toBe(k.quiet ? 1 : 0);
    }
  });

  it('on a cron run', async ({ cleanups, expect }) => {
    const { c, env } = await setup(cleanups);
    const api = openCronService(env.config);
    cleanups.push(() => api.close());
    const cli = { origin: { surface: 'cli' as const }, trusted: true };
    const chat = (i: number) => String(2000 + i);
    const jobs = await Promise.all(
      CASES.map(async (_, i) => {
        const job = await api.service.add(
          { schedule: 'every 1h', prompt: `answer case ${i}`, name: `case ${i}`, deliver: `telegram:${chat(i)}` },
          cli,
        );
        await api.service.runNow(job.id, cli);
        return job;
      }),
    );
    const runs = await waitFor(
      async () => {
        const all = await Promise.all(jobs.map(async (j) => (await api.store.runs(j.id, 10))[0]));
        return all.every((r) => r && r.deliveries.every((d) => d.status !== 'pending')) ? all.map((r) => r!) : undefined;
      },
      60_000,
      'every run recorded with its deliveries',
    );
    const sent = await sentByChat(c);
    for (const [i, k] of CASES.entries()) {
      expect(runs[i], k.name).toMatchObject({
        status: 'ok',
        output: k.text,
        silent: k.quiet,
        deliveries: [{ target: `telegram:${chat(i)}`, status: k.quiet ? 'silent' : 'queued' }],
      });
      expect(sent.get(chat(i)), k.name).toEqual(k.quiet ? undefined : [k.text]);
    }
  });

  it('on a goal continuation', async ({ cleanups, expect }) => {
    const { c } = await setup(cleanups);
    const chat = (i: number) => String(3000 + i);
    await Promise.all(
      CASES.map((_, i) =>
        enqueueInput(
          { redis: c.redis, keys: c.keys, queues: c.queues, maxChars: 10_000 },
          { sessionId: `goal-${i}`, text: `/goal reach case ${i}`, messageId: 'm1', origin: route(chat(i)) },
        ),
      ),
    );
    // The judge says "done": "Goal achieved" is sent after the turn's reply.
    const sent = await waitForLast(
      c,
      CASES.map((_, i) => chat(i)),
      (ch) => `Goal achieved: reach case ${Number(ch) - 3000}`,
      'every goal achieved',
    );
    for (const [i, k] of CASES.entries()) {
      const set = sent.get(chat(i))![0]!;
      expect(set, k.name).toMatch(/^Goal set/);
      expect(sent.get(chat(i)), k.name).toEqual([set, ...(k.quiet ? [] : [k.text.trim()]), `Goal achieved: reach case ${i}`]);
      const [reply] = (await events(c, `goal-${i}`, 'reply')).filter((e) => e.data.source === 'goal');
      expect(reply!.data, k.name).toMatchObject({ text: k.text, ...(k.quiet ? { silent: true } : {}) });
      expect((await c.sessions.transcript(`goal-${i}`)).at(-1), k.name).toMatchObject({ role: 'assistant', content: k.text });
    }
  });

  it('on a chat reply', async ({ cleanups, expect }) => {
    const { c } = await setup(cleanups);
    const chat = (i: number) => String(4000 + i);
    const say = (i: number, text: string, messageId: string) =>
      enqueueInput(
        { redis: c.redis, keys: c.keys, queues: c.queues, maxChars: 10_000 },
        { sessionId: `chat-${i}`, text, messageId, origin: route(chat(i)) },
      );
    // A second message in each session: its reply is sent after the first one's, whatever that was.
    for (const i of CASES.keys()) {
      await say(i, `anything new? case ${i}`, 'm1');
      await say(i, 'and now?', 'm2');
    }
    const sent = await waitForLast(
      c,
      CASES.map((_, i) => chat(i)),
      () => 'That is all.',
      'every chat answered twice',
    );
    for (const [i, k] of CASES.entries()) {
      expect(sent.get(chat(i)), k.name).toEqual([...(k.quiet ? [] : [k.text.trim()]), 'That is all.']);
      const [reply] = await waitForEvents(c, `chat-${i}`, 'reply', 2);
      expect(reply!.data, k.name).toMatchObject({ text: k.text, ...(k.quiet ? { silent: true } : {}) });
      expect(
        (await c.sessions.transcript(`chat-${i}`)).find((m) => m.role === 'assistant'),
        k.name,
      ).toMatchObject({ content: k.text });
    }
  });
});

describe.concurrent('--notify always sends a quiet reply as it was written', () => {
  const quiet = [...SILENT_SHAPES, ...SILENT_LINES];

  it('for a loop; auto and done do not', async ({ cleanups, expect }) => {
    const { c } = await setup(cleanups);
    const modes: NotifyMode[] = ['always', 'auto', 'done'];
    const chat = (m: number, i: number) => String(5000 + 100 * m + i);
    await Promise.all(
      modes.flatMap((notify, m) =>
        quiet.map((_, i) =>
          c.schedules.set(
            `notify-${notify}-${i}`,
            'loop',
            { prompt: `answer case ${i}`, intervalSeconds: 3600, times: 1, until: null, notes: [], economy: { notify } },
            { origin: route(chat(m, i)), runner: { kind: 'agent' } },
          ),
        ),
      ),
    );
    const chats = modes.flatMap((_, m) => quiet.map((__, i) => chat(m, i)));
    const sent = await waitForLast(c, chats, () => 'Loop finished: ran 1 times.', 'every loop finished');
    for (const [i, [name, text]] of quiet.entries()) {
      expect(sent.get(chat(0, i)), name).toEqual([text.trim(), 'Loop finished: ran 1 times.']);
      expect(sent.get(chat(1, i)), name).toEqual(['Loop finished: ran 1 times.']);
      expect(sent.get(chat(2, i)), name).toEqual(['Loop finished: ran 1 times.']);
      // Sent, so not marked "kept, not sent" on the stream; still counted as a quiet tick.
      const [reply] = await waitForEvents(c, `notify-always-${i}`, 'reply', 1);
      expect(reply!.data.silent, name).toBeUndefined();
      expect((await c.loops.get(`notify-always-${i}`, 'loop'))!.silentTicks, name).toBe(1);
    }
  });

  it('for a cron job; auto (the default, given by its earlier word failure) and never do not', async ({ cleanups, expect }) => {
    const { env } = await setup(cleanups);
    const api = openCronService(env.config);
    cleanups.push(() => api.close());
    const cli = { origin: { surface: 'cli' as const }, trusted: true };
    const [name, text] = SILENT_SHAPES[5]!; // bold
    const jobs = await Promise.all(
      (['always', 'failure', 'never'] as const).map(async (notify) => {
        const job = await api.service.add({ schedule: 'every 1h', prompt: 'answer case 5', name: notify, notify, deliver: 'local' }, cli);
        await api.service.runNow(job.id, cli);
        return job;
      }),
    );
    const runs = await waitFor(
      async () => {
        const all = await Promise.all(jobs.map(async (j) => (await api.store.runs(j.id, 10))[0]));
        return all.every((r) => r && r.deliveries.every((d) => d.status !== 'pending')) ? all.map((r) => r!) : undefined;
      },
      30_000,
      'three runs',
    );
    expect(runs[0], name).toMatchObject({ silent: true, output: text, deliveries: [{ target: 'local', status: 'delivered' }] });
    expect(runs[1], name).toMatchObject({ silent: true, deliveries: [{ target: 'local', status: 'silent' }] });
    expect(runs[2], name).toMatchObject({ silent: true, deliveries: [{ target: 'local', status: 'silent' }] });
    const replies = async (id: string) =>
      (await api.redis.xrange(api.keys.events(`cron:${id}`), '-', '+')).filter(([, f]) => f.includes('reply'));
    expect(await replies(jobs[0]!.id)).toHaveLength(1);
    expect(await replies(jobs[1]!.id)).toHaveLength(0);
  });
});
