import { describe, expect, it } from 'vitest';
import { parseLoopArgs, parseLoopInterval } from '../scheduler/loop/loop-command.ts';
import { parseHeartbeatInterval } from '../scheduler/loop/heartbeat-command.ts';
import { ScheduleInputError } from '../scheduler/errors/schedule-input-error.ts';
import { parseIntervalToken, formatSeconds } from '../scheduler/interval.ts';
import { refusedPort } from './support/refused-port.ts';

const opts = { minIntervalSeconds: 30, maxPromptChars: 1000 };

describe('/loop grammar (docs/DESIGN.md §4)', () => {
  it('parses a fixed interval and the prompt', () => {
    expect(parseLoopArgs('10m watch the CI build', opts)).toEqual({
      action: 'set',
      prompt: 'watch the CI build',
      intervalSeconds: 600,
      times: null,
      until: null,
      notes: [],
      economy: {},
    });
  });

  it('takes the economy flags anywhere, --until stopping before them (docs/CONTEXT.md)', () => {
    expect(
      parseLoopArgs(
        '10m watch CI --notify done --watch read_file:/srv/ci.log --until it is green --max-tokens 200,000 --model cheap',
        opts,
      ),
    ).toEqual({
      action: 'set',
      prompt: 'watch CI',
      intervalSeconds: 600,
      times: null,
      until: 'it is green',
      notes: [],
      economy: { notify: 'done', watch: 'read_file:/srv/ci.log', maxTokens: 200_000, model: 'cheap' },
    });
  });

  it('refuses a bad economy flag with the flag and the value named, and a flag given twice', () => {
    const err = (text: string) => {
      try {
        parseLoopArgs(text, opts);
        return '';
      } catch (e) {
        expect(e).toBeInstanceOf(ScheduleInputError);
        return (e as Error).message;
      }
    };
    expect(err('10m x --notify loud')).toBe('--notify must be auto, always, done, never; got "loud".');
    expect(err('10m x --max-tokens lots')).toMatch(
      /^--max-tokens needs a positive whole number of tokens up to 1,000,000,000; got "lots"\.$/,
    );
    expect(err('10m x --max-tokens 0')).toMatch(/got "0"/);
    expect(err('10m x --model')).toMatch(/^--model needs a value/);
    expect(err('10m x --watch a --watch b')).toBe('--watch is given twice.');
  });

  it('accepts "every" and compound intervals', () => {
    const c = parseLoopArgs('every 1h30m check the queue', opts);
    expect(c).toMatchObject({ action: 'set', intervalSeconds: 5400, prompt: 'check the queue' });
    expect(parseLoopArgs('every 10 minutes check', opts)).toMatchObject({ intervalSeconds: 600, prompt: 'check' });
  });

  it('treats a bare number as part of the prompt (self-paced)', () => {
    expect(parseLoopArgs('5 things to check', opts)).toMatchObject({ intervalSeconds: null, prompt: '5 things to check' });
  });

  it('no interval means self-paced', () => {
    expect(parseLoopArgs('keep an eye on the deploy', opts)).toMatchObject({ intervalSeconds: null });
  });

  it('F22: refuses an interval below the minimum, naming it', () => {
    expect(() => parseLoopArgs('5s ping', opts)).toThrow('The interval 5s is below the minimum of 30s (loops.min_interval_seconds).');
    expect(() => parseLoopArgs('every 10 seconds ping', opts)).toThrow(/below the minimum of 30s/);
    expect(parseLoopArgs('30s ping', opts)).toMatchObject({ intervalSeconds: 30, notes: [] });
  });

  it('F22: a token written like an interval with an unknown unit is an error naming the unit', () => {
    expect(() => parseLoopArgs('1x check', opts)).toThrow(/^"1x" is not an interval: unknown unit "x"; use s, m, h or d/);
    expect(() => parseLoopArgs('every 5q check', opts)).toThrow(/unknown unit "q"/);
    expect(() => parseLoopArgs('1h30x check', opts)).toThrow(/unknown unit "x"/);
    // words that do not start with a number stay prompts, and a quoted prompt may start with anything
    expect(parseLoopArgs('x1 check', opts)).toMatchObject({ intervalSeconds: null, prompt: 'x1 check' });
    expect(parseLoopArgs('"1x check"', opts)).toMatchObject({ intervalSeconds: null, prompt: '1x check' });
    expect(parseLoopArgs('10 deploys', opts)).toMatchObject({ intervalSeconds: null, prompt: '10 deploys' });
  });

  it('F22: a signed interval (-5m, +1h, -1x) is an error, not a self-paced prompt; a signed bare number stays a prompt', () => {
    expect(() => parseLoopArgs('-5m check', opts)).toThrow(/^"-5m" is not an interval: an interval has no sign/);
    expect(() => parseLoopArgs('+1h check', opts)).toThrow(/"\+1h" is not an interval/);
    expect(() => parseLoopArgs('-1x check', opts)).toThrow(/"-1x" is not an interval/);
    expect(() => parseLoopArgs('every -5m check', opts)).toThrow(/"-5m" is not an interval/);
    expect(parseLoopArgs('10 check', opts)).toMatchObject({ intervalSeconds: null, prompt: '10 check' });
    expect(parseLoopArgs('-5 check', opts)).toMatchObject({ intervalSeconds: null, prompt: '-5 check' });
    expect(parseLoopArgs('"-5m check"', opts)).toMatchObject({ intervalSeconds: null, prompt: '-5m check' });
  });

  it('parses --times and --until anywhere after the prompt', () => {
    expect(parseLoopArgs('2m check CI --times 3', opts)).toMatchObject({ prompt: 'check CI', times: 3 });
    expect(parseLoopArgs('2m check CI --until the build is green --times 4', opts)).toMatchObject({
      prompt: 'check CI',
      until: 'the build is green',
      times: 4,
    });
    expect(parseLoopArgs('2m check --until "it is green"', opts)).toMatchObject({ until: 'it is green' });
  });

  it('keeps a slash command as the prompt', () => {
    expect(parseLoopArgs('10m /recap', opts)).toMatchObject({ prompt: '/recap', intervalSeconds: 600 });
  });

  it.each([
    ['', 'status'],
    ['status', 'status'],
    ['pause', 'pause'],
    ['RESUME', 'resume'],
    ['stop', 'stop'],
    ['clear', 'stop'],
    ['cancel', 'stop'],
    ['help', 'help'],
  ])('control word %j → %s', (arg, action) => {
    expect(parseLoopArgs(arg, opts)).toEqual({ action });
  });

  it('a control word inside a longer prompt is a prompt', () => {
    expect(parseLoopArgs('5m pause the deploy if red', opts)).toMatchObject({ action: 'set', prompt: 'pause the deploy if red' });
  });

  it.each([
    ['5m check --times 0', /positive whole number up to 1000000, got "0"/],
    ['5m check --times -2', /positive whole number/],
    ['5m check --times x', /positive whole number/],
    ['5m check --times', /positive whole number/],
    ['5m', /needs a prompt/],
    ['every soon check', /must be followed by an interval/],
    ['5m check --until', /--until needs a condition/],
    ['--bogus 5m check', /Unknown option --bogus/],
    ['0s hi', /interval "0s" must be greater than zero/],
    ['every 0m hi', /interval "0m" must be greater than zero/],
  ])('rejects %j', (arg, message) => {
    expect(() => parseLoopArgs(arg, opts)).toThrow(ScheduleInputError);
    expect(() => parseLoopArgs(arg, opts)).toThrow(message);
  });

  it('intervals and --times have upper bounds', () => {
    const o = { minIntervalSeconds: 30, maxPromptChars: 1000 };
    expect(() => parseLoopArgs('99999999999999d hi', o)).toThrow(/too long; the most is 366d/);
    expect(() => parseLoopArgs('5m hi --times 99999999999999999999999', o)).toThrow(/up to 1000000/);
    expect(parseLoopArgs('366d hi', o)).toMatchObject({ intervalSeconds: 366 * 86400 });
  });

  it('rejects a prompt over the size limit', () => {
    expect(() => parseLoopArgs(`5m ${'x'.repeat(1001)}`, opts)).toThrow(/limit is 1000/);
  });
});

describe('interval tokens', () => {
  it.each([
    ['30s', 30],
    ['5m', 300],
    ['2h', 7200],
    ['1h30m', 5400],
    ['1.5h', 5400],
    ['10min', 600],
    ['1d', 86400],
    ['45sec', 45],
  ])('%s = %d s', (tok, s) => expect(parseIntervalToken(tok)).toBe(s));

  it.each(['5', 'm', '5x', 'five', '0s'])('%s is not an interval', (tok) => expect(parseIntervalToken(tok)).toBeUndefined());

  it('formats durations', () => {
    expect(formatSeconds(45)).toBe('45s');
    expect(formatSeconds(5400)).toBe('1h30m');
    expect(formatSeconds(600)).toBe('10m');
  });
});

describe('hermes loop from the shell', () => {
  it('F22: hermes loop 10s x exits 2 naming the minimum; hermes loop 1x check names the unit', async () => {
    const { execFile } = await import('node:child_process');
    const { promisify } = await import('node:util');
    const root = new URL('..', import.meta.url).pathname;
    // Bad input is refused before Redis is touched: an unreachable Redis is never asked.
    const env = {
      ...process.env,
      REDIS_URL: `redis://127.0.0.1:${await refusedPort()}`,
      HERMES_HOME: '/nonexistent-hermes-home',
      HERMES_LOG_LEVEL: 'silent',
    };
    const run = (...args: string[]) =>
      promisify(execFile)(process.execPath, ['cli/hermes.mjs', 'loop', ...args, '--session', 's'], { cwd: root, env }).then(
        (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
        (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
      );
    // Three independent runs, at the same time.
    const [short, typo, signed] = await Promise.all([run('10s', 'x'), run('1x', 'check'), run('-5m', 'check')]);
    expect(short).toEqual({
      code: 2,
      stdout: '',
      stderr: 'hermes: The interval 10s is below the minimum of 30s (loops.min_interval_seconds).\n',
    });
    expect(typo).toMatchObject({ code: 2, stdout: '' });
    expect(typo.stderr).toMatch(/^hermes: "1x" is not an interval: unknown unit "x"/);
    expect(signed).toMatchObject({ code: 2, stdout: '' });
    expect(signed.stderr).toMatch(/^hermes: "-5m" is not an interval: an interval has no sign/);
  });
});

describe('an interval given on its own, as a field (the schedules tool)', () => {
  it('reads what /loop and /heartbeat read, with their bounds and their words', () => {
    expect(parseLoopInterval('10m', opts)).toBe(600);
    expect(parseLoopInterval('every 10 minutes', opts)).toBe(600);
    expect(parseLoopInterval('1h30m', opts)).toBe(5400);
    expect(() => parseLoopInterval('5s', opts)).toThrow('The interval 5s is below the minimum of 30s (loops.min_interval_seconds).');
    expect(() => parseLoopInterval('400d', opts)).toThrow('The interval 400d is too long; the most is 366d.');
    expect(() => parseLoopInterval('1x', opts)).toThrow('"1x" is not an interval: unknown unit "x"; use s, m, h or d');
    expect(() => parseLoopInterval('-5m', opts)).toThrow('"-5m" is not an interval: an interval has no sign');
    expect(() => parseLoopInterval('0s', opts)).toThrow('The interval "0s" must be greater than zero.');
    expect(() => parseLoopInterval('10m check it', opts)).toThrow('"10m check it" is not an interval; use s, m, h or d');
    expect(parseHeartbeatInterval('every 1.5 hours', { minIntervalSeconds: 60 })).toBe(5400);
    expect(() => parseHeartbeatInterval('30s', { minIntervalSeconds: 60 })).toThrow(
      'The interval 30s is below the heartbeat minimum of 1m (heartbeat.min_interval_seconds).',
    );
  });
});
