/**
 * The turn journal in Redis (docs/RELIABILITY.md, "A turn resumes from its journal"): entries are
 * read back in the order written, expire with the occurrence window, sit on the session's shard and
 * are deleted by the occurrence's commit in the same step; what a journal says about each step
 * (`replayOf`, `callState`) takes the first account of a step. Real Redis.
 */
import { describe } from 'vitest';
import { Redis } from 'ioredis';
import { Keys, compositeId, keyPart } from '../scheduler/store/keys.ts';
import { sessionStoreFor, turnJournalStoreFor } from '../scheduler/services.ts';
import { NO_SPEND } from '../scheduler/model-spend.ts';
import type { JournalEntry } from '../scheduler/journal/journal-entry.ts';
import { callState, inDoubtCalls, isResumed, replayOf, stepId, NO_REPLAY } from '../scheduler/journal/turn-replay.ts';
import { testEnv } from './support/env.ts';
import { it } from './support/cleanup.ts';

const answer = (round: number, calls: string[] = []): JournalEntry => ({
  type: 'answer',
  round,
  content: `answer ${round}`,
  toolCalls: calls.map((name, i) => ({ id: `c${round}-${i}`, name, arguments: '{}' })),
  spend: { ...NO_SPEND, calls: 1, inputTokens: 10, outputTokens: 2, lastInputTokens: 10 },
});
const started = (call: number, name = 'append'): JournalEntry => ({ type: 'started', call, id: `c${call}`, name, at: 1 });
const result = (call: number, content: string, name = 'append'): JournalEntry => ({
  type: 'result',
  call,
  id: `c${call}`,
  name,
  content,
  at: 2,
});

function setUp(cleanups: Array<() => unknown>, overrides: Record<string, unknown> = {}) {
  const env = testEnv(overrides);
  const redis = new Redis(env.redisUrl);
  cleanups.push(
    () => env.cleanup(),
    () => redis.disconnect(),
  );
  const keys = new Keys(env.prefix, { shards: env.config.redis.shards });
  return { env, redis, keys, journals: turnJournalStoreFor(env.config, redis, keys), sessions: sessionStoreFor(env.config, redis, keys) };
}

describe.concurrent('turn journal store', () => {
  it('reads entries back in the order written; each write renews the expiry to the occurrence window', async ({ cleanups, expect }) => {
    const { redis, journals, keys } = setUp(cleanups, { 'worker.occurrence_window_seconds': 120 });
    const entries = [answer(0, ['append']), started(1), result(1, 'ok'), answer(1)];
    for (const e of entries) await journals.append('s1', 'loop:s1:1000', e);
    expect(await journals.read('s1', 'loop:s1:1000')).toEqual(entries);
    expect(await journals.read('s1', 'loop:s1:2000')).toEqual([]);
    const key = keys.turnJournal('s1', 'loop:s1:1000');
    expect(journals.key('s1', 'loop:s1:1000')).toBe(key);
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(110_000);
    expect(ttl).toBeLessThanOrEqual(120_000);
    // Text that is no entry (written by anything else) is left out, the rest still read.
    await redis.rpush(key, 'not json', JSON.stringify({ type: 'result', call: 'x' }));
    expect(await journals.read('s1', 'loop:s1:1000')).toEqual(entries);
  });

  it("the journal key is on the session's shard and holds the occurrence id as one segment", ({ expect }) => {
    const keys = new Keys('{hermes}', { shards: 4 });
    for (const session of ['a', 'b', 'cron:job-1', 'telegram:-100:7']) {
      const occurrence = compositeId('cron', 'job:1', 1_700_000_000_000);
      const key = keys.shard(0).turnJournal(session, occurrence);
      expect(key.startsWith(`${keys.forSession(session).prefix}:session:${keyPart(session)}:`)).toBe(true);
      expect(key.split(':').at(-1)).toBe(keyPart(occurrence));
    }
  });

  it("the commit deletes the occurrence's journal in its step; a commit without one leaves journals alone", async ({
    cleanups,
    expect,
  }) => {
    const { redis, journals, sessions, keys } = setUp(cleanups);
    await journals.append('s2', 'o1', answer(0));
    await journals.append('s2', 'o2', answer(0));
    const turn = (occurrenceId: string, journalKey?: string) => ({
      occurrenceId,
      messages: [{ role: 'assistant' as const, content: 'done', at: 0, source: 'tick' }],
      event: { type: 'reply', data: { occurrenceId } },
      ...(journalKey ? { journalKey } : {}),
    });
    expect((await sessions.commitTurn('s2', turn('o1', journals.key('s2', 'o1')))).status).toBe('committed');
    expect(await redis.exists(journals.key('s2', 'o1'))).toBe(0);
    expect(await journals.read('s2', 'o2')).toHaveLength(1);
    expect((await sessions.commitTurn('s2', turn('o3'))).status).toBe('committed');
    expect(await journals.read('s2', 'o2')).toHaveLength(1);
    // Without a journal the script's placeholder is the committed set, which it keeps.
    expect(await redis.zrange(keys.sessionCommitted('s2'), 0, -1)).toEqual(['o1', 'o3']);
  });
});

describe('what a journal says about a resumed turn', () => {
  it('answers by round, calls done, in doubt or new; the first account of a step wins', ({ expect }) => {
    const replay = replayOf([
      answer(0, ['append', 'append']),
      started(1),
      started(2),
      result(1, 'first'),
      result(1, 'second'),
      answer(0, ['other']),
    ]);
    expect(isResumed(NO_REPLAY)).toBe(false);
    expect(isResumed(replay)).toBe(true);
    expect(replay.answers.get(0)!.toolCalls.map((c) => c.name)).toEqual(['append', 'append']);
    expect(callState(replay, 1)).toEqual({ state: 'done', result: expect.objectContaining({ content: 'first' }) });
    expect(callState(replay, 2)).toEqual({ state: 'in-doubt' });
    expect(callState(replay, 3)).toEqual({ state: 'new' });
    expect(inDoubtCalls(replay)).toEqual([2]);
  });

  it('a step id is the same for the same call of an occurrence and differs for every other', ({ expect }) => {
    expect(stepId('loop:s:1000', 1)).toBe(stepId('loop:s:1000', 1));
    const ids = new Set(['loop:s:1000', 'loop:s:2000'].flatMap((o) => [1, 2, 3].map((n) => stepId(o, n))));
    expect(ids.size).toBe(6);
  });
});
