/**
 * A command turn's timeout and abort stop the whole shell command at once, compound commands too
 * (not only the first process of `a; b`).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CommandRunner } from '../worker/turn-runners/command-runner.ts';
import { TurnError } from '../scheduler/errors/turn-error.ts';

describe('command runner stop', () => {
  it('the command timeout stops a compound shell command at once', async () => {
    const runner = new CommandRunner('sleep 10; echo late', 300);
    const started = Date.now();
    const err = await runner.run({ sessionId: 's', messages: [], signal: new AbortController().signal }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TurnError);
    expect((err as TurnError).kind).toBe('timeout');
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(Date.now() - started).toBeLessThan(3_000); // not the 10 s of the command's first part
  });

  it('an abort stops a compound shell command at once', async () => {
    const runner = new CommandRunner('sleep 10; echo late', 60_000);
    const ac = new AbortController();
    const started = Date.now();
    const pending = runner.run({ sessionId: 's', messages: [], signal: ac.signal }).catch((e: unknown) => e);
    setTimeout(() => ac.abort(), 300);
    const err = await pending;
    expect((err as TurnError).kind).toBe('aborted');
    expect(Date.now() - started).toBeLessThan(3_500);
  });

  it('a signal aborted before the turn starts runs no process at all', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hermes-cmd-'));
    try {
      const ran = join(dir, 'ran');
      const runner = new CommandRunner(`touch ${ran}; sleep 10`, 60_000);
      const ac = new AbortController();
      ac.abort();
      const started = Date.now();
      const err = await runner.run({ sessionId: 's', messages: [], signal: ac.signal }).catch((e: unknown) => e);
      expect((err as TurnError).kind).toBe('aborted');
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(existsSync(ran)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
