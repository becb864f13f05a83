/**
 * Input to a session is answered in the order it was sent, even when several messages arrive in the
 * same millisecond.
 */
import { describe, expect, it } from 'vitest';
import { startWorkerStack, waitForEvents } from './support/stack.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { enqueueInput } from '../scheduler/session/inbox.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const cleanups = cleanupAfterEach();

describe('session input order', () => {
  it('messages that arrive in the same millisecond are answered in the order they were sent', async () => {
    const model = await startFakeOpenAI();
    model.respond((req) => `re: ${req.messages.at(-1)!.content}`);
    cleanups.push(() => model.close());
    const { c } = await startWorkerStack(cleanups, { 'agent.base_url': model.baseUrl, 'agent.api_key': 'k' });
    const at = Date.now();
    const ids = ['f', 'a', 'e', 'b', 'd', 'c']; // random-looking ids: order must not come from them
    await Promise.all(
      ids.map((id, i) =>
        enqueueInput(
          { redis: c.redis, keys: c.keys, queues: c.queues, maxChars: 1000 },
          {
            sessionId: 'ord',
            text: `m${i + 1}`,
            messageId: id,
            origin: { surface: 'chat' },
            receivedAt: at,
          },
        ),
      ),
    );
    const replies = await waitForEvents(c, 'ord', 'reply', 6, 15_000);
    expect(replies.map((e) => e.data.text)).toEqual(['re: m1', 're: m2', 're: m3', 're: m4', 're: m5', 're: m6']);
  });
});
