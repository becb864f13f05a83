/**
 * What Redis was asked while a piece of code ran: a `MONITOR` connection records every command
 * (scripts' own calls included) that names a key under a test's prefix, so a test can count the
 * keys a request read. Other tests share the server; their prefixes differ, so they are not counted.
 */
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { waitFor } from './wait-for.ts';

/** One command seen: its name (upper case) and arguments. */
export interface SeenCommand {
  name: string;
  args: string[];
}

/**
 * Run `fn` and return what was asked under `prefix` meanwhile (in order).
 * The end is marked by an `ECHO` of a token of its own sent through `redis`, so nothing is cut off.
 */
export async function commandsDuring(
  redisUrl: string,
  redis: RedisClient,
  prefix: string,
  fn: () => Promise<unknown>,
): Promise<SeenCommand[]> {
  const seen: SeenCommand[] = [];
  const mark = `end-${randomBytes(6).toString('hex')}`;
  let started = false;
  let ended = false;
  // A plain socket: MONITOR's replies are lines of quoted words (`+<time> [0 <addr>] "get" "<key>"`).
  const url = new URL(redisUrl);
  const socket = connect(Number(url.port || 6379), url.hostname);
  let buffered = '';
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    for (let nl = buffered.indexOf('\r\n'); nl >= 0; nl = buffered.indexOf('\r\n')) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 2);
      if (line === '+OK') started = true;
      const args = [...line.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => unquote(m[1]!));
      if (args[0]?.toUpperCase() === 'ECHO' && args[1] === mark) ended = true;
      else if (!ended && args.slice(1).some((a) => a.includes(prefix))) seen.push({ name: args[0]!.toUpperCase(), args: args.slice(1) });
    }
  });
  try {
    const auth = url.password ? `AUTH ${decodeURIComponent(url.password)}\r\n` : '';
    socket.write(`${auth}MONITOR\r\n`);
    await waitFor(() => started, 15_000, 'MONITOR to start');
    await fn();
    await redis.echo(mark);
    await waitFor(() => ended, 15_000, 'the monitor to see the end mark');
    return seen;
  } finally {
    socket.destroy();
  }
}

const ESCAPES: Record<string, string> = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' };

/** A word of a MONITOR line as its bytes were (`\"`, `\\`, `\n`, `\xNN` undone), read as UTF-8. */
function unquote(word: string): string {
  const bytes = word.replace(/\\(x[0-9a-f]{2}|.)/g, (_, e: string) =>
    e.length === 3 ? String.fromCharCode(parseInt(e.slice(1), 16)) : (ESCAPES[e] ?? e),
  );
  return Buffer.from(bytes, 'latin1').toString('utf8');
}
