/**
 * Text from outside is shown escaped on a terminal (`cli/terminal-text.ts`): a reply or a name
 * cannot set the window title, hide text or move the cursor.
 */
import { describe, expect, it } from 'vitest';
import { terminalSafe } from '../cli/terminal-text.ts';
import { formatEvent } from '../cli/event-format.ts';
import { formatSchedules } from '../cli/status-format.ts';
import { createLoop } from '../scheduler/loop/loop-state.ts';

describe('terminal-safe text', () => {
  it('escapes C0/C1 controls, DEL and bidi overrides; keeps newlines, tabs and ordinary Unicode', () => {
    expect(terminalSafe('\x1b]0;owned\x07title')).toBe('\\x1b]0;owned\\x07title');
    expect(terminalSafe('a\x1b[8mhidden\x1b[0m')).toBe('a\\x1b[8mhidden\\x1b[0m');
    expect(terminalSafe('x\x9b2Jy\x7f')).toBe('x\\x9b2Jy\\x7f');
    expect(terminalSafe('evil\u202Egnp.exe')).toBe('evil\\u{202e}gnp.exe');
    expect(terminalSafe('line 1\n\tline 2 — ✓ ünïcödé')).toBe('line 1\n\tline 2 — ✓ ünïcödé');
  });

  it('hermes chat prints a reply carrying escape sequences escaped', () => {
    const line = formatEvent({ id: '1700000000000-0', type: 'reply', data: { source: 'message', text: 'ok\x1b]0;pwned\x07\x1b[2J' } })!;
    // eslint-disable-next-line no-control-regex -- the raw escape characters are what must not get through
    expect(line).not.toMatch(/\x1b|\x07/);
    expect(line).toContain('ok\\x1b]0;pwned\\x07\\x1b[2J');
  });

  it('hermes status prints a prompt carrying escape sequences escaped', () => {
    const loop = createLoop({
      kind: 'loop',
      loopId: 'l1',
      sessionId: 's',
      prompt: 'watch \x1b[8msecret',
      intervalSeconds: 60,
      times: null,
      until: null,
      maxTicks: 100,
      selfPacedFloorSeconds: 60,
      runner: { kind: 'agent' },
      origin: { surface: 'cli' },
      now: 0,
    });
    const lines = formatSchedules([loop], new Map(), 0, { all: false }).map(terminalSafe);
    // eslint-disable-next-line no-control-regex -- the raw escape character is what must not get through
    expect(lines.join('\n')).not.toMatch(/\x1b/);
    expect(lines.join('\n')).toContain('watch \\x1b[8msecret');
  });
});
