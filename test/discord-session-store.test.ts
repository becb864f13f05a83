/**
 * The Discord gateway session as `@discordjs/ws` updates it (gateway/discord/session-store.ts): the library
 * neither awaits nor catches `updateSessionInfo`, so a write Redis refuses (the gateway stopping, its Redis
 * connection closed while the socket closes) is logged and never becomes an unhandled rejection.
 */
import type { SessionInfo } from '@discordjs/ws';
import { describe, expect, it } from 'vitest';
import { DiscordSessionStore } from '../gateway/discord/session-store.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { redisTestEnv } from './support/redis-env.ts';
import { memoryLogger } from './support/telegram-env.ts';

const cleanups = cleanupAfterEach();

const ready = (sessionId: string, sequence: number): SessionInfo => ({
  sessionId,
  sequence,
  resumeURL: 'wss://gateway.example/',
  shardId: 0,
  shardCount: 1,
});

describe('Discord session store', () => {
  it('a new session is saved and a forgotten one removed while Redis answers', async () => {
    const { redis, keys } = redisTestEnv(cleanups);
    const key = keys.discordGatewaySession('bot');
    const { log, lines } = memoryLogger();
    const store = new DiscordSessionStore(redis, key, log);
    await store.update(ready('s-1', 7));
    expect(JSON.parse((await redis.get(key))!)).toMatchObject({ sessionId: 's-1', sequence: 7 });
    await store.update(null);
    expect(await redis.get(key)).toBeNull();
    expect(lines.filter((l) => l.level === 40)).toEqual([]);
  });

  it('a session Redis cannot save or forget is logged, the update resolves, and the session stays known here', async () => {
    const { redis, keys } = redisTestEnv(cleanups);
    const { log, lines } = memoryLogger();
    const store = new DiscordSessionStore(redis, keys.discordGatewaySession('bot'), log);
    redis.disconnect(); // the gateway stopping: its connection closed before the socket's last update
    await expect(store.update(ready('s-2', 3))).resolves.toBeUndefined();
    expect(store.retrieve()).toMatchObject({ sessionId: 's-2', sequence: 3 });
    await expect(store.update(null)).resolves.toBeUndefined();
    const warned = lines.filter((l) => l.level === 40).map((l) => l.msg);
    expect(warned).toEqual([
      'Discord gateway session not saved in Redis: the next holder identifies anew',
      'Discord gateway session not saved in Redis: the next holder identifies anew',
    ]);
  });
});
