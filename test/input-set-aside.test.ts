/**
 * A session input whose handling keeps failing never holds up the inputs after it (docs/RELIABILITY.md,
 * "Session input runs in order, and a bad input is set aside"): it is tried `worker.input_attempts`
 * times, then set aside — on the session's stream with its error, in `hermes status`, on the console's
 * session page and at `GET /api/sessions/:id/set-aside` — and the session's next message is answered.
 *
 * The fault is one a store can hold: a loop record that does not parse (what a write cut short leaves),
 * which `/loop status` reads and a plain message does not. Real Redis, BullMQ, worker, gateway and the
 * local model server.
 */
import { Worker, type Job } from 'bullmq';
import { describe } from 'vitest';
import { enqueueInput, inboxJobId, inputOccurrenceId, pendingInput, type InboxJobData } from '../scheduler/session/inbox.ts';
import { setAsideInputs } from '../scheduler/session/set-aside.ts';
import { QUEUES } from '../scheduler/store/keys.ts';
import { openRedisClient, topologyFromConfig } from '../scheduler/store/redis/connection-factory.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { startCronApiGateway } from './support/cron-api-gateway.ts';
import { testEnv } from './support/env.ts';
import { lastUserText, startFakeOpenAI } from './support/fake-openai.ts';
import {
  events,
  openTestClients,
  runHermes,
  startWorker,
  startWorkerStack,
  waitFor,
  waitForEvents,
  type TestClients,
} from './support/stack.ts';

const KEY = 'set-aside-key';

/** Ceilings of a wait and of a test: generous, for a machine that runs several suites at once. */
const WAIT_MS = 120_000;
const TEST_MS = 300_000;

/** The model server answering `re: <message>`, and the overrides of an environment whose agent calls it. */
async function model(cleanups: CleanUp[]) {
  const m = await startFakeOpenAI();
  m.respond((req) => `re: ${lastUserText(req)}`);
  cleanups.push(() => m.close());
  return { m, overrides: { 'agent.base_url': m.baseUrl, 'agent.api_key': 'k', 'api_server.port': 0, 'api_server.key': KEY } };
}

function say(c: TestClients, sessionId: string, text: string, messageId: string) {
  return enqueueInput(
    { redis: c.redis, keys: c.keys, queues: c.queues, maxChars: 1000 },
    { sessionId, text, messageId, origin: { surface: 'chat' } },
  );
}

/** A loop record cut short: `/loop status` cannot read it (a SyntaxError, no error of the product's). */
async function breakLoopRecord(c: TestClients, sessionId: string): Promise<void> {
  await c.redis.set(c.keys.schedule(sessionId, 'loop'), '{"status":"act');
}

describe.concurrent('a failing input is set aside and the session goes on', () => {
  it(
    'tried worker.input_attempts (3) times, set aside with its error — stream, hermes status, console, /api — and the next message is answered',
    async ({ cleanups, expect }) => {
      const { m, overrides } = await model(cleanups);
      const { env, c } = await startWorkerStack(cleanups, { ...overrides, 'worker.input_retry_delay_ms': 50 });
      const { gw, call } = await startCronApiGateway(cleanups, env, KEY);
      await breakLoopRecord(c, 's');
      await say(c, 's', '/loop status', 'a');
      await say(c, 's', 'hello', 'b');
      await waitForEvents(c, 's', 'reply', 1, WAIT_MS);

      const evs = await events(c, 's');
      const setAside = evs.filter((e) => e.type === 'input.set_aside');
      expect(setAside).toHaveLength(1);
      expect(setAside[0]!.data).toMatchObject({ attempts: 3, input: '/loop status', occurrenceId: inputOccurrenceId('s', 'a') });
      expect(String(setAside[0]!.data.error)).toMatch(/JSON/);
      // The chat is told in words, not with the internal error.
      expect(setAside[0]!.data.text).toBe(
        'Your message could not be handled (an internal error) after 3 tries; it was set aside, and your next message goes ahead. Send it again to try once more.',
      );
      expect(evs.findIndex((e) => e.type === 'input.set_aside')).toBeLessThan(evs.findIndex((e) => e.type === 'reply'));
      expect(evs.filter((e) => e.type === 'reply').map((e) => e.data.text)).toEqual(['re: hello']);
      expect(evs.filter((e) => e.type === 'notice')).toEqual([]);
      expect(m.requests.map(lastUserText)).toEqual(['hello']);
      expect(await pendingInput(c.redis, c.keys, 's')).toEqual([]);

      // Readable: the session's list, /api, the console's page, hermes status (text and --json).
      const kept = await setAsideInputs(c.redis, c.keys, 's');
      expect(kept).toEqual([
        expect.objectContaining({ sessionId: 's', messageId: 'a', text: '/loop status', surface: 'chat', attempts: 3 }),
      ]);
      const api = await call('GET', '/api/sessions/s/set-aside');
      expect(api.status).toBe(200);
      expect(api.body.data).toEqual([
        expect.objectContaining({
          session_id: 's',
          message_id: 'a',
          text: '/loop status',
          surface: 'chat',
          attempts: 3,
          error: kept[0]!.error,
        }),
      ]);
      expect((await call('GET', '/api/sessions/nothing-here/set-aside')).body.data).toEqual([]);
      // (The page shows the session's loop too: the broken record goes first.)
      await c.redis.del(c.keys.schedule('s', 'loop'));
      const page = await fetch(`${gw.httpAddress.url}/ui/sessions/s`, {
        headers: { authorization: `Basic ${Buffer.from(`hermes:${KEY}`).toString('base64')}` },
      });
      const html = await page.text();
      expect(html).toContain('<h2>Set aside</h2>');
      expect(html).toContain('set aside after 3 tries');
      expect(html).toContain('/loop status');
      const status = await runHermes(env, ['status']);
      expect(status.code).toBe(0);
      expect(status.stdout).toMatch(/^set-aside input: 1 /m);
      expect(status.stdout).toMatch(/^s +\S+ ago +3 +.*JSON.* +\/loop status$/m);
      const json = JSON.parse((await runHermes(env, ['status', '--json'])).stdout) as { set_aside: unknown[] };
      expect(json.set_aside).toEqual([expect.objectContaining({ session_id: 's', text: '/loop status', attempts: 3 })]);

      // The same message sent again changes nothing: it ended, as an answered one does.
      await say(c, 's', '/loop status', 'a');
      await say(c, 's', 'again', 'c');
      await waitForEvents(c, 's', 'reply', 2, WAIT_MS);
      expect((await events(c, 's', 'input.set_aside')).length).toBe(1);
      expect(await setAsideInputs(c.redis, c.keys, 's')).toHaveLength(1);
    },
    TEST_MS,
  );

  it(
    'with worker.input_attempts 1 the first failure sets it aside',
    async ({ cleanups, expect }) => {
      const { overrides } = await model(cleanups);
      const { c } = await startWorkerStack(cleanups, { ...overrides, 'worker.input_attempts': 1, 'worker.input_retry_delay_ms': 60_000 });
      await breakLoopRecord(c, 'once');
      await say(c, 'once', '/loop status', 'a');
      await say(c, 'once', 'hello', 'b');
      await waitForEvents(c, 'once', 'reply', 1, WAIT_MS);
      const [event] = await events(c, 'once', 'input.set_aside');
      expect(event!.data).toMatchObject({ attempts: 1, input: '/loop status' });
      expect(String(event!.data.text)).toContain('after 1 try;');
    },
    TEST_MS,
  );

  it(
    'a try that fails and then succeeds is answered in its place, before the message after it; nothing is set aside',
    async ({ cleanups, expect }) => {
      const { overrides } = await model(cleanups);
      // The second try would wait ten minutes: the test fixes the record and runs it at once instead.
      const { c } = await startWorkerStack(cleanups, { ...overrides, 'worker.input_retry_delay_ms': 600_000 });
      await breakLoopRecord(c, 'r');
      await say(c, 'r', '/loop status', 'a');
      await say(c, 'r', 'hello', 'b');
      const inbox = c.queues.forSession('r').inbox;
      const first = await waitFor(
        async () => {
          const job = (await inbox.getJob(inboxJobId('r', 'a'))) as Job<InboxJobData> | undefined;
          return job && (await job.getState()) === 'delayed' && job.data.failedTries === 1 ? job : undefined;
        },
        WAIT_MS,
        'the first try failed and the input waits for its second',
      );
      // The message after it waits for it (deferred behind it), unanswered.
      await waitFor(async () => (await inbox.getJobState(inboxJobId('r', 'b'))) === 'delayed', WAIT_MS, 'the next message deferred');
      expect(await events(c, 'r', 'reply')).toEqual([]);
      await c.redis.del(c.keys.schedule('r', 'loop'));
      await first.promote();
      await waitForEvents(c, 'r', 'reply', 1, WAIT_MS);
      const evs = (await events(c, 'r')).filter((e) => e.type === 'notice' || e.type === 'reply' || e.type === 'input.set_aside');
      expect(evs.map((e) => [e.type, e.data.text])).toEqual([
        ['notice', expect.stringMatching(/^No loop/)],
        ['reply', 're: hello'],
      ]);
      expect(await setAsideInputs(c.redis, c.keys, 'r')).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'an input whose job an earlier worker failed is set aside by the next message of its session, which is answered',
    async ({ cleanups, expect }) => {
      const { overrides } = await model(cleanups);
      const { env, c } = openTestClients(cleanups, overrides, testEnv);
      await say(c, 'h', '/loop status', 'a');
      // A worker without the rule: its try throws, BullMQ fails the job, the input stays first in line.
      const connection = openRedisClient(topologyFromConfig(env.config), 'bullmq');
      const earlier = new Worker(
        QUEUES.inbox,
        async () => {
          throw new Error('config.tools.allow_from[group].includes is not a function');
        },
        { connection, prefix: c.keys.forSession('h').bullPrefix },
      );
      cleanups.push(() => connection.disconnect());
      await waitFor(
        async () => (await c.queues.forSession('h').inbox.getJobState(inboxJobId('h', 'a'))) === 'failed',
        WAIT_MS,
        'the job failed',
      );
      await earlier.close();
      expect(await pendingInput(c.redis, c.keys, 'h')).toEqual([inputOccurrenceId('h', 'a')]);

      const worker = await startWorker(env);
      cleanups.push(() => worker.drain());
      await say(c, 'h', 'hello', 'b');
      await waitForEvents(c, 'h', 'reply', 1, WAIT_MS);
      const evs = await events(c, 'h');
      const setAside = evs.find((e) => e.type === 'input.set_aside')!;
      expect(setAside.data).toMatchObject({
        attempts: 1,
        input: '/loop status',
        error: 'config.tools.allow_from[group].includes is not a function',
      });
      expect(String(setAside.data.text)).toContain('could not be handled (its worker failed) after 1 try;');
      expect(evs.indexOf(setAside)).toBeLessThan(evs.findIndex((e) => e.type === 'reply'));
      expect(await setAsideInputs(c.redis, c.keys, 'h')).toEqual([expect.objectContaining({ messageId: 'a', text: '/loop status' })]);
    },
    TEST_MS,
  );
});
