/**
 * `lazyChild`: a tick's logger is made only when it writes a line at an enabled level, and then
 * writes exactly what `child()` would, redaction included.
 */
import { describe, expect, it, vi } from 'vitest';
import { lazyChild, REDACTED_KEYS } from '../scheduler/logger.ts';
import { captureLog } from './support/log-capture.ts';

/** A logger at `level` that redacts as the product's does (`REDACTED_KEYS`), and what it writes. */
const capture = (level: string) =>
  captureLog({ level, redact: { paths: REDACTED_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`]), censor: '[redacted]' } });

describe('lazyChild', () => {
  it('makes no child for lines below the level, and writes with its bindings (redacted) at an enabled level', async () => {
    const { log, records } = capture('info');
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
    const lines = records();
    expect(lines.map((l) => l.msg)).toEqual(['tick committed', 'second line']);
    expect(lines[0]).toMatchObject({ sessionId: 's1', kind: 'loop', token: '[redacted]', tick: 1, nested: { apiKey: '[redacted]' } });
    expect(JSON.stringify(lines)).not.toMatch(/secret-binding|sk-123/);
  });

  it('writes debug lines with its bindings when debug is enabled', async () => {
    const { log, records } = capture('debug');
    lazyChild(log, { sessionId: 's2' }).debug({ tick: 2 }, 'tick started');
    await new Promise((r) => setImmediate(r));
    const lines = records();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ sessionId: 's2', tick: 2, msg: 'tick started' });
  });
});
