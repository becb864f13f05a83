/**
 * Terminal log lines (pino-pretty, `scheduler/logger.ts`) escape control characters in a message: a
 * chat's or a payload's text cannot fake a log line or send the terminal an ANSI sequence. The logger
 * runs in a child process writing to its stderr, as in `hermes worker` on a terminal.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { escapeControls } from '../scheduler/logger.ts';

const run = promisify(execFile);

describe('terminal log lines', () => {
  it('escape line breaks, tabs, ANSI escapes and C1 controls; other text is unchanged', () => {
    expect(escapeControls('a\nb\tc\u001b[2Jd\u009be é ✓')).toBe('a\\nb\\tc\\u001b[2Jd\\u009be é ✓');
  });

  it('a pretty logger writes a message holding a fake line and an ANSI escape as one line, escaped', async () => {
    const code = `
      const { createLogger } = await import(${JSON.stringify(new URL('../scheduler/logger.ts', import.meta.url).href)});
      createLogger({ pretty: true }).info('from chat: hi\\nINFO [00:00:00] fake line\\u001b[2J');
    `;
    const { stderr } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
      env: { ...process.env, NO_COLOR: '1' },
    });
    const lines = stderr.split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('from chat: hi\\nINFO [00:00:00] fake line\\u001b[2J');
    expect(stderr).not.toContain('\u001b[2J');
  });
});
