/**
 * The pure parts of signed webhooks (docs/GATEWAY.md "Webhooks"): the two signature schemes
 * (GitHub's example from its documentation, the 5-minute tolerance both ways, secret rotation, a
 * body changed by one byte), the template (own fields only, values clipped to one line, the input
 * cut, nothing evaluated) and the `hooks.<name>` settings (one target, one secret source, the
 * action's default, secrets read from the environment or a file).
 */
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hooksRouter, type HookRouteDeps } from '../gateway/http/hook-routes.ts';
import { githubSignature, hermesSignature, verifyHookSignature } from '../gateway/hooks/hook-signature.ts';
import { createLogger } from '../scheduler/logger.ts';
import { payloadMatches, renderHookTemplate } from '../gateway/hooks/hook-template.ts';
import { loadConfig } from '../scheduler/config/config.ts';
import { ConfigError } from '../scheduler/errors/config-error.ts';
import { tempDirsRemovedAfterAll } from './support/temp-dirs.ts';

const SECRET = 'a-secret-of-enough-length';
const NOW_MS = 1_765_000_000_000;
const T = NOW_MS / 1000;

describe('signatures', () => {
  it('GitHub\'s documented example verifies (secret "It\'s a Secret to Everybody", body "Hello, World!")', () => {
    const sig = 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17';
    expect(githubSignature("It's a Secret to Everybody", 'Hello, World!')).toBe(sig);
    const ok = verifyHookSignature(
      'github',
      "It's a Secret to Everybody",
      Buffer.from('Hello, World!'),
      { 'x-hub-signature-256': sig, 'x-github-delivery': 'd1', 'x-github-event': 'push' },
      NOW_MS,
    );
    expect(ok).toEqual({ ok: true, deliveryId: 'd1', event: 'push' });
  });

  it('a body changed by one byte, another secret, a short or missing header, no delivery id: refused', () => {
    const body = Buffer.from('{"a":1}');
    const headers = { 'x-hub-signature-256': githubSignature(SECRET, body), 'x-github-delivery': 'd1' };
    expect(verifyHookSignature('github', SECRET, body, headers, NOW_MS).ok).toBe(true);
    expect(verifyHookSignature('github', SECRET, Buffer.from('{"a":2}'), headers, NOW_MS).ok).toBe(false);
    expect(verifyHookSignature('github', `${SECRET}x`, body, headers, NOW_MS).ok).toBe(false);
    expect(
      verifyHookSignature(
        'github',
        SECRET,
        body,
        { ...headers, 'x-hub-signature-256': headers['x-hub-signature-256'].slice(0, -2) },
        NOW_MS,
      ).ok,
    ).toBe(false);
    expect(verifyHookSignature('github', SECRET, body, { 'x-github-delivery': 'd1' }, NOW_MS).ok).toBe(false);
    expect(verifyHookSignature('github', SECRET, body, { 'x-hub-signature-256': headers['x-hub-signature-256'] }, NOW_MS)).toEqual({
      ok: false,
      reason: expect.stringContaining('X-GitHub-Delivery'),
    });
  });

  it('hermes: within 300 s either way; 301 s off refused; a rotated secret accepted beside the old; the signature is the delivery without an id', () => {
    const body = Buffer.from('{"alert":"disk"}');
    const at = (t: number, h: Record<string, string> = {}) =>
      verifyHookSignature('hermes', SECRET, body, { 'x-hermes-signature': hermesSignature(SECRET, body, t), ...h }, NOW_MS);
    expect(at(T - 300).ok).toBe(true);
    expect(at(T + 300).ok).toBe(true);
    expect(at(T - 301)).toEqual({ ok: false, reason: expect.stringContaining('timestamp') });
    expect(at(T + 301).ok).toBe(false);
    expect(at(T, { 'x-hermes-delivery': 'alert-7', 'x-hermes-event': 'firing' })).toEqual({
      ok: true,
      deliveryId: 'alert-7',
      event: 'firing',
    });
    const own = at(T);
    expect(own.ok && own.deliveryId).toMatch(/^v1=[0-9a-f]{64}$/);
    const old = hermesSignature('the-old-secret-0123456', body, T).split(',')[1]!;
    const rotated = `${hermesSignature(SECRET, body, T)},${old}`;
    expect(verifyHookSignature('hermes', SECRET, body, { 'x-hermes-signature': rotated }, NOW_MS).ok).toBe(true);
    expect(verifyHookSignature('hermes', SECRET, body, { 'x-hermes-signature': `t=${T},${old}` }, NOW_MS).ok).toBe(false);
    // The timestamp is signed: another t with the same v1 does not verify.
    const v1 = hermesSignature(SECRET, body, T).split(',')[1]!;
    expect(verifyHookSignature('hermes', SECRET, body, { 'x-hermes-signature': `t=${T - 1},${v1}` }, NOW_MS).ok).toBe(false);
  });
});

describe('templates', () => {
  const vars = { hook: 'ci', event: 'workflow_run', delivery: 'd1' };
  const limits = { maxValueChars: 20, maxInputChars: 200 };
  const payload = { workflow_run: { conclusion: 'failure', steps: [{ name: 'test' }], log: 'line 1\nline 2' }, n: 3, ok: false };

  it('fields by path and index, the $ names, numbers and booleans as text, objects as JSON, missing fields empty', () => {
    expect(
      renderHookTemplate(
        '{{$hook}}/{{$event}}/{{$delivery}}: {{workflow_run.conclusion}} {{workflow_run.steps.0.name}} {{n}} {{ ok }} [{{nope.deeper}}]',
        payload,
        vars,
        limits,
      ),
    ).toBe('ci/workflow_run/d1: failure test 3 false []');
    expect(renderHookTemplate('{{workflow_run.steps}}', payload, vars, { ...limits, maxValueChars: 100 })).toBe('[{"name":"test"}]');
  });

  it('only own fields: constructor, __proto__ and toString find nothing; no expression is evaluated', () => {
    expect(
      renderHookTemplate('[{{constructor}}][{{__proto__}}][{{n.toString}}][{{workflow_run.steps.length}}]', payload, vars, limits),
    ).toBe('[][][][]');
    expect(renderHookTemplate('{{n + 1}} {{process.env.HOME}} {{#each x}}', payload, vars, limits)).toBe('{{n + 1}}  {{#each x}}');
  });

  it('a value is one line clipped to maxValueChars; the input is cut at maxInputChars', () => {
    expect(renderHookTemplate('{{workflow_run.log}}', payload, vars, limits)).toBe('line 1 line 2');
    expect(renderHookTemplate('{{v}}', { v: 'x'.repeat(50) }, vars, limits)).toBe(`${'x'.repeat(19)}…`);
    const long = renderHookTemplate('{{v}} '.repeat(30), { v: 'y'.repeat(50) }, vars, limits);
    expect(long).toHaveLength(200);
    expect(long.endsWith('…')).toBe(true);
  });

  it('match: every field equal, numbers and booleans by their text', () => {
    expect(payloadMatches(payload, { 'workflow_run.conclusion': 'failure', n: '3', ok: 'false' })).toBe(true);
    expect(payloadMatches(payload, { 'workflow_run.conclusion': 'success' })).toBe(false);
    expect(payloadMatches(payload, { 'workflow_run.steps': '[{"name":"test"}]' })).toBe(false);
    expect(payloadMatches(payload, {})).toBe(true);
  });
});

describe('hooks.<name> settings', () => {
  const home = tempDirsRemovedAfterAll('hermes-hooks-');
  const load = (hook: Record<string, unknown>, env: Record<string, string> = {}) =>
    loadConfig({ env: { HERMES_HOME: home(), ...env }, overrides: { 'hooks.ci': hook } });

  it('the action follows the target; the defaults come from the schema', () => {
    const c = load({ session: 'ops', secret: SECRET });
    expect(c.hooks.ci).toMatchObject({
      action: 'turn',
      signature: 'hermes',
      max_body_bytes: 1_048_576,
      max_input_chars: 4000,
      replay_window_seconds: 604_800,
      events: [],
      allow_from: [],
    });
    expect(load({ cron_job: 'digest', secret: SECRET }).hooks.ci!.action).toBe('run_job');
    expect(load({ session: 'ops', action: 'wake_loop', secret: SECRET }).hooks.ci).toMatchObject({ action: 'wake_loop', schedule: 'loop' });
    expect(load({ session: 'ops', action: 'wake_loop', schedule: 'heartbeat', secret: SECRET }).hooks.ci!.schedule).toBe('heartbeat');
  });

  it('one target, one secret source, a matching action, real addresses: else the setting is named', () => {
    expect(() => load({ session: 'ops', cron_job: 'x', secret: SECRET })).toThrow(
      /hooks\.ci\.session.*exactly one of session and cron_job/,
    );
    expect(() => load({ session: 'ops' })).toThrow(/hooks\.ci\.secret.*exactly one of secret, secret_env and secret_file/);
    expect(() => load({ session: 'ops', secret: SECRET, secret_env: 'X' })).toThrow(/exactly one of secret/);
    expect(() => load({ session: 'ops', secret: 'short' })).toThrow(/at least 16 characters/);
    expect(() => load({ session: 'ops', secret: SECRET, action: 'run_job' })).toThrow(/hooks\.ci\.action/);
    expect(() => load({ cron_job: 'digest', secret: SECRET, action: 'wake_loop' })).toThrow(/hooks\.ci\.action.*wake_loop need a session/);
    expect(() => load({ session: 'ops', secret: SECRET, schedule: 'heartbeat' })).toThrow(/hooks\.ci\.schedule.*only by action wake_loop/);
    expect(() => load({ session: 'ops', secret: SECRET, action: 'wake_loop', schedule: 'goal' })).toThrow(/hooks\.ci\.schedule/);
    expect(() => load({ session: 'ops', secret: SECRET, allow_from: ['github.com'] })).toThrow(/hooks\.ci\.allow_from.*CIDR/);
    expect(() => load({ session: 'ops', secret: SECRET, replay_window_seconds: 60 })).toThrow(/replay_window_seconds/);
  });

  it('secret_env and secret_file are read at load into secret; unset, unreadable or short is named in secret_problem, never the value, and the gateway refuses to start on it', () => {
    expect(load({ session: 'ops', secret_env: 'CI_SECRET' }, { CI_SECRET: ` ${SECRET}\n` }).hooks.ci!.secret).toBe(SECRET);
    // The CLI and workers load the same config.yaml from a shell without the gateway's secrets: no stop for them.
    const unset = load({ session: 'ops', secret_env: 'CI_SECRET' });
    expect(unset.hooks.ci!.secret).toBeUndefined();
    expect(unset.hooks.ci!.secret_problem).toMatch(/^Invalid setting hooks\.ci\.secret_env .*CI_SECRET is not set\.$/);
    const refused = (() => {
      try {
        hooksRouter({ ...({} as HookRouteDeps), config: unset, log: createLogger({ level: 'silent' }) });
      } catch (err) {
        return err;
      }
    })();
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as ConfigError).message).toBe(unset.hooks.ci!.secret_problem);
    const dir = home();
    const file = join(dir, 'ci.secret');
    writeFileSync(file, `${SECRET}\n`);
    chmodSync(file, 0o600);
    expect(load({ session: 'ops', secret_file: file }).hooks.ci!.secret).toBe(SECRET);
    expect(load({ session: 'ops', secret_file: join(dir, 'none') }).hooks.ci!.secret_problem).toMatch(
      /hooks\.ci\.secret_file .*cannot be read \(ENOENT\)/,
    );
    writeFileSync(file, 'short');
    const short = load({ session: 'ops', secret_file: file }).hooks.ci!;
    expect([short.secret, short.secret_problem]).toEqual([
      undefined,
      expect.stringMatching(/hooks\.ci\.secret_file.*at least 16 characters/),
    ]);
  });
});
