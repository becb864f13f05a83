/**
 * Redis Lua scripts kept as files (`scripts/<name>-<numberOfKeys>.lua`, each
 * with a header listing KEYS, ARGV and the return value), loaded once per
 * client with ioredis `defineCommand` so every call is an EVALSHA.
 */
import { readFileSync } from 'node:fs';
import type { RedisClient } from './connection-factory.ts';

/** One script file: its command name, key count and source. */
export interface LuaScript {
  /** Command name on the client (`hermes_<name>`). */
  readonly command: string;
  readonly numberOfKeys: number;
  readonly lua: string;
}

const SCRIPTS_DIR = new URL('./scripts/', import.meta.url);

/**
 * Read `scripts/<file>` once (at module load of the store that uses it).
 * The key count is the number at the end of the file name (`claim-tick-4.lua`).
 * @throws Error when the file is missing or its name has no key count
 */
export function luaScript(file: string): LuaScript {
  const m = /^([a-z0-9-]+)-(\d+)\.lua$/.exec(file);
  if (!m) throw new Error(`script file name must be <name>-<numberOfKeys>.lua, got ${file}`);
  return {
    command: `hermes_${m[1]!.replace(/-/g, '_')}`,
    numberOfKeys: Number(m[2]),
    lua: readFileSync(new URL(file, SCRIPTS_DIR), 'utf8'),
  };
}

/**
 * Run `script` on `redis` (defined on the client at first use, EVALSHA after).
 * @param keys - exactly `script.numberOfKeys` keys
 * @returns the script's reply as ioredis decodes it
 * @throws Error when the key count does not match; whatever Redis answers on failure
 */
export async function runLuaScript(redis: RedisClient, script: LuaScript, keys: string[], args: Array<string | number>): Promise<unknown> {
  if (keys.length !== script.numberOfKeys) throw new Error(`${script.command} takes ${script.numberOfKeys} keys, got ${keys.length}`);
  const client = redis as unknown as Record<string, ((...a: Array<string | number>) => Promise<unknown>) | undefined>;
  if (typeof client[script.command] !== 'function') {
    redis.defineCommand(script.command, { numberOfKeys: script.numberOfKeys, lua: script.lua });
  }
  return await client[script.command]!(...keys, ...args);
}
