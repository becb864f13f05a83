/**
 * `lazyChild`: a tick's logger is made only when it writes a line at an enabled level, and then
 * writes exactly what `child()` would, redaction included.
 */
import { describe, expect, it, vi } from 'vitest';
import { pino } from 'pino';
import { Writable } from 'node:stream';
import { lazyChild, REDACTED_KEYS } from '../scheduler/logger.ts';

function capture(level: string) {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  const log = pino({ level, redact: { paths: REDACTED_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`]), censor: '[redacted]' } }, sink);
  return { log, lines };
}

describe('lazyChild', () => {
  it('makes no child for lines below the level, and writes with its bindings (redacted) at an enabled level', async () => {
    const { log, lines } = capture('info');
    const child = vi.spyOn(log, 'child');
    const lazy = lazyChild(log, { sessionId: 's1', kind: 'loop', token: 'secret-binding' });
    lazy.debug({ tick: 1 }, 'tick started');
    lazy.trace('nothing');
    expect(child).not.toHaveBeenCalled();
    expect(lazy.isLevelEnabled('debug')).toBe(false);
    lazy.info({ tick: 1, nested: { apiKey: 'sk-123' } }, 'tick committed');
    lazy.warn('second line');
    expect(child).toHaveBeenCalledTimes(1);
    await new Promise((r) => setImmediate(r));
    expect(lines.map((l) => l.msg)).toEqual(['tick committed', 'second line']);
    expect(lines[0]).toMatchObject({ sessionId: 's1', kind: 'loop', token: '[redacted]', tick: 1, nested: { apiKey: '[redacted]' } });
    expect(JSON.stringify(lines)).not.toMatch(/secret-binding|sk-123/);
  });

  it('writes debug lines with its bindings when debug is enabled', async () => {
    const { log, lines } = capture('debug');
    lazyChild(log, { sessionId: 's2' }).debug({ tick: 2 }, 'tick started');
    await new Promise((r) => setImmediate(r));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ sessionId: 's2', tick: 2, msg: 'tick started' });
  });
});
