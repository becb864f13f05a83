/**
 * Text from outside reaches a terminal escaped (`cli/terminal-text.ts`): a job name, a prompt, a
 * run's output, a reply or an error that echoes input cannot set the window title, write the
 * clipboard (OSC 52), hide text, move the cursor or reorder a line. The real `hermes` command, run as
 * a process against a worker, a model server and Redis, prints every name, prompt, output and
 * reply of every printing command with none of those characters raw; `--json` stays valid JSON with
 * the same values.
 */
import { describe, expect } from 'vitest';
import { terminalJson, terminalSafe } from '../cli/terminal-text.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { runHermes, startWorkerStack, waitFor, waitForEvents } from './support/stack.ts';
import { it } from './support/cleanup.ts';

/**
 * What injected text would send: OSC 52 (write the clipboard), OSC 0 (the window title), BEL, an
 * erase, C1 CSI (0x9b) and NEL (0x85), CR (overwrite the line), and the bidi override, embedding and
 * isolate characters.
 */
const EVIL = 'x\x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07\x1b[2J\r\x9b31m\x85\u202eevil\u202a\u202c\u2066\u2069\u2028end';

/** Every character that must not reach a terminal raw: C0 but newline and tab, DEL, C1, separators, bidi. */
// eslint-disable-next-line no-control-regex
const RAW = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

/** How `EVIL`'s start looks escaped. */
const SHOWN = 'x\\x1b]52;c;ZXZpbA==\\x07\\x1b]0;pwned\\x07';

/** Every string in a parsed JSON value. */
function strings(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (typeof value !== 'object' || value === null) return [];
  return Object.values(value).flatMap(strings);
}

describe('terminalSafe and terminalJson', () => {
  it('escape C0/C1 controls, DEL, separators and bidi characters; keep newlines, tabs and ordinary Unicode', () => {
    expect(terminalSafe('\x1b]0;owned\x07title')).toBe('\\x1b]0;owned\\x07title');
    expect(terminalSafe('a\x1b[8mhidden\x1b[0m')).toBe('a\\x1b[8mhidden\\x1b[0m');
    expect(terminalSafe('x\x9b2Jy\x7f\x85')).toBe('x\\x9b2Jy\\x7f\\x85');
    expect(terminalSafe('evil\u202Egnp.exe\u2066\u2069\u2028')).toBe('evil\\u{202e}gnp.exe\\u{2066}\\u{2069}\\u{2028}');
    expect(terminalSafe('over\rwrite')).toBe('over\\x0dwrite');
    expect(terminalSafe('line 1\n\tline 2 — ✓ ünïcödé \u00a0\u200f')).toBe('line 1\n\tline 2 — ✓ ünïcödé \u00a0\u200f');
    expect(terminalSafe(terminalSafe(EVIL))).toBe(terminalSafe(EVIL));
  });

  it('terminalJson is valid JSON with the same values and no raw control character', () => {
    const value = { name: EVIL, list: [EVIL, 1, null], nested: { '\u202ekey': 'a\x9bb' } };
    for (const indent of [2, 0]) {
      const text = terminalJson(value, indent);
      expect(text).not.toMatch(RAW);
      expect(JSON.parse(text)).toEqual(value);
    }
    expect(terminalJson({ a: 1 })).toBe(JSON.stringify({ a: 1 }, null, 2));
    expect(terminalJson(['\x9b'], 0)).toBe('["\\u009b"]');
  });
});

describe('every printing command of the real CLI', () => {
  it('prints names, prompts, outputs, replies and echoed input with no control character raw', async ({ cleanups }) => {
    const model = await startFakeOpenAI();
    cleanups.push(() => model.close());
    model.respond(() => `reply ${EVIL}`);
    const { env, c } = await startWorkerStack(cleanups, { 'agent.base_url': model.baseUrl, 'agent.api_key': 'k' });
    const hermes = (...args: string[]) => runHermes(env, args);
    const checked: string[] = [];
    /** Run `args`; nothing raw on stdout or stderr; `shows` (escaped) in the output when given. */
    const clean = async (args: string[], expected: { code?: number; shows?: string; json?: boolean } = {}) => {
      const r = await hermes(...args);
      const label = `hermes ${args.map((a) => terminalSafe(a)).join(' ')}`;
      checked.push(label);
      // Soft: a failure names every command that let something through, not only the first.
      expect.soft(r.stdout, `${label}: stdout`).not.toMatch(RAW);
      expect.soft(r.stderr, `${label}: stderr`).not.toMatch(RAW);
      expect.soft(r.code, `${label}: exit code (stderr: ${r.stderr})`).toBe(expected.code ?? 0);
      if (expected.shows !== undefined) expect.soft(`${r.stdout}${r.stderr}`, label).toContain(expected.shows);
      if (expected.json) {
        // Valid JSON, the text in it as it was (names and prompts collapse their whitespace).
        const texts = strings(JSON.parse(r.stdout));
        for (const part of ['\x1b]52;c;ZXZpbA==\x07', '\x9b31m\x85\u202eevil\u202a'])
          expect
            .soft(
              texts.some((t) => t.includes(part)),
              `${label}: ${JSON.stringify(part)} in the JSON`,
            )
            .toBe(true);
      }
      return r;
    };

    // A cron job named and prompted with the text (as `/api`, the console or the agent could make it).
    const added = await clean(['cron', 'add', 'every 1h', `watch ${EVIL}`, '--name', `job ${EVIL}`, '--json'], { json: true });
    const id = (JSON.parse(added.stdout) as { id: string }).id;
    await clean(['cron', 'edit', id, '--prompt', `check ${EVIL}`], { shows: SHOWN });
    await clean(['cron', 'run', id], { shows: 'job x\\x1b]52' });
    await waitFor(
      async () => {
        const runs = JSON.parse((await hermes('cron', 'runs', id, '--json')).stdout) as Array<{ status: string }>;
        return runs.some((r) => r.status === 'ok') || undefined;
      },
      30_000,
      'the run finished',
    );
    // A loop in a session, whose tick the model answers with the text.
    await clean(['loop', '1h', `loop ${EVIL}`, '--session', 's'], { shows: SHOWN });
    await waitForEvents(c, 's', 'reply', 1, 30_000);

    // What only reads runs side by side.
    await Promise.all([
      clean(['cron', 'list'], { shows: 'job x\\x1b]52' }),
      clean(['cron', 'list', '--json'], { json: true }),
      clean(['cron', 'show', id], { shows: `check ${SHOWN}` }),
      clean(['cron', 'show', id, '--json'], { json: true }),
      clean(['cron', 'runs'], { shows: 'reply x\\x1b]52' }),
      clean(['cron', 'runs', id, '--output'], { shows: `reply ${SHOWN}` }),
      clean(['cron', 'runs', '--json'], { json: true }),
      clean(['cron', 'logs', id], { shows: `reply ${SHOWN}` }),
      clean(['cron', 'logs', id, '--json'], { json: true }),
      clean(['cron', 'status'], { shows: 'job x\\x1b]52' }),
      clean(['status'], { shows: `loop ${SHOWN}` }),
      clean(['status', '--json'], { json: true }),
      clean(['loop', 'status', '--session', 's'], { shows: `loop ${SHOWN}` }),
      clean(['loop', 'status', '--session', 's', '--json'], { json: true }),
      // The chat client: the reply of the loop's tick, with its formatting (indented under its header).
      clean(['chat', '--session', 's'], { shows: `    reply ${SHOWN}` }),
      // Errors that echo what was typed.
      clean(['cron', 'show', `nope ${EVIL}`], { code: 2, shows: `nope ${SHOWN}` }),
      clean(['cron', 'add', `every ${EVIL}`, 'x'], { code: 2, shows: 'every x\\x1b]52' }),
      clean(['cron', 'list', `--${EVIL}`], { code: 2, shows: '--x\\x1b]52' }),
      clean([EVIL], { code: 2, shows: SHOWN }),
      clean(['loop', '1h', 'x', '--session', `s${EVIL}`], { code: 2, shows: 'Invalid session id "sx\\x1b]52' }),
    ]);
    await clean(['cron', 'pause', id], { shows: 'job x\\x1b]52' });
    await clean(['cron', 'resume', id], { shows: 'job x\\x1b]52' });
    await clean(['cron', 'remove', id], { shows: 'job x\\x1b]52' });
    expect(checked.length).toBeGreaterThan(25);
  }, 180_000);
});
