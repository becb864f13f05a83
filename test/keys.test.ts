/** Key and job id spelling (scheduler/keys.ts). */
import { describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { bullJobId, Keys } from '../scheduler/keys.ts';
import { inboxJobId } from '../scheduler/inbox.ts';
import { outboundJobId } from '../scheduler/outbound.ts';
import { testEnv } from './support/env.ts';

describe('keys', () => {
  it('every key starts with the hash tag, so all keys share one cluster slot', () => {
    const k = new Keys('{hermes}');
    for (const key of [k.schedule('s', 'loop'), k.transcript('s'), k.events('s'), k.turnLock('s'), k.occurrenceDone('o'), k.workers]) {
      expect(key.startsWith('{hermes}:')).toBe(true);
    }
    expect(() => new Keys('hermes')).toThrow(/hash tag/);
  });

  it('custom job ids never contain ":" and stay distinct', () => {
    expect(bullJobId('input', 'telegram:42:7', 'tg-1')).toBe('input|telegram%3A42%3A7|tg-1');
    expect(bullJobId('a|b', 'c')).not.toBe(bullJobId('a', 'b|c'));
    expect(outboundJobId('loop:abc:123')).not.toContain(':');
  });

  it('BullMQ accepts the ids for session ids with colons (Telegram chats and threads)', async () => {
    const env = testEnv();
    const conn = new Redis(env.redisUrl, { maxRetriesPerRequest: null });
    const q = new Queue('ids', { connection: conn, prefix: env.prefix });
    try {
      const id = inboxJobId('telegram:-1001234:55', 'tg-9');
      const job = await q.add('x', {}, { jobId: id });
      expect(job.id).toBe(id);
      const again = await q.add('x', {}, { jobId: id }); // dedupes
      expect(await q.getJobCountByTypes('waiting')).toBe(1);
      expect(again.id).toBe(id);
    } finally {
      await q.obliterate({ force: true });
      await q.close();
      conn.disconnect();
      env.cleanup();
    }
  });
});
