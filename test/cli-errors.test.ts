/**
 * One service error, two readers: the `/api` caller reads the field as its
 * JSON body spells it, the user at a terminal reads the CLI flag; and every
 * command exits 2 for bad input, 1 for any other failure.
 */
import { CommanderError } from 'commander';
import { describe, expect, it } from 'vitest';
import { exitCodeOf, reportError, withFlags, EXIT_BAD_INPUT, EXIT_FAILURE } from '../cli/run-command.ts';
import { toHttpError } from '../gateway/http/errors.ts';
import { ConfigError, ScheduleInputError, StoreUnavailableError, UnknownJobError } from '../scheduler/errors/index.ts';
import { withJitter } from '../scheduler/cron/jitter.ts';
import { parseSchedule } from '../scheduler/cron/schedule-grammar.ts';

function reported(err: unknown): { lines: string[]; code: number } {
  const lines: string[] = [];
  const code = reportError(err, (l) => lines.push(l));
  return { lines, code };
}

describe('service input errors', () => {
  const notify = new ScheduleInputError('`notify` must be always, failure or never, got "sometimes".', { field: 'notify' });

  it('name the field for an /api caller, with the field as the error param', () => {
    const http = toHttpError(notify);
    expect(http.status).toBe(400);
    expect(http.message).toBe('`notify` must be always, failure or never, got "sometimes".');
    expect(http.param).toBe('notify');
  });

  it('name the flag at a terminal, and exit 2', () => {
    expect(reported(notify)).toEqual({
      lines: ['hermes: --notify must be always, failure or never, got "sometimes".'],
      code: EXIT_BAD_INPUT,
    });
  });

  it('a real service error reads the same way on both surfaces', () => {
    const every10m = parseSchedule('every 10m', { tz: 'UTC', now: Date.UTC(2026, 0, 1), minIntervalSeconds: 60 });
    let err: unknown;
    try {
      withJitter(every10m, 'c0ffee000001', 600);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ScheduleInputError);
    expect((err as ScheduleInputError).field).toBe('jitter');
    expect(toHttpError(err).message).toMatch(/^`jitter` 10m must be less than 10m/);
    expect(reported(err).lines[0]).toMatch(/^hermes: --jitter 10m must be less than 10m/);
  });

  it('every field with a flag in one message becomes its flag; other back-quoted text stays', () => {
    expect(withFlags('Nothing to change: give at least one of `schedule`, `prompt`, `script`.')).toBe(
      'Nothing to change: give at least one of --schedule, --prompt, --script.',
    );
    expect(withFlags('`n` must be a whole number from 1 to 100, got 0.')).toBe('-n must be a whole number from 1 to 100, got 0.');
    expect(withFlags('No cron job with id or name "x". `hermes cron list --all` shows every job.')).toBe(
      'No cron job with id or name "x". `hermes cron list --all` shows every job.',
    );
    expect(withFlags('`session` is not a flag here.')).toBe('`session` is not a flag here.');
  });

  it('only input errors are rewritten', () => {
    const store = new StoreUnavailableError('Redis at 127.0.0.1:1 (`notify`) is unreachable.');
    expect(reported(store)).toEqual({ lines: ['hermes: Redis at 127.0.0.1:1 (`notify`) is unreachable.'], code: EXIT_FAILURE });
  });
});

describe('exit codes', () => {
  it.each([
    ['schedule input', new ScheduleInputError('bad'), 2],
    ['an unknown job', new UnknownJobError('No cron job with id or name "x".'), 2],
    ['config', new ConfigError('bad config'), 2],
    ['an unknown flag', new CommanderError(1, 'commander.unknownOption', "error: unknown option '--nope'"), 2],
    ['help shown', new CommanderError(0, 'commander.helpDisplayed', '(outputHelp)'), 0],
    ['version shown', new CommanderError(0, 'commander.version', '0.1.0'), 0],
    ['an unreachable store', new StoreUnavailableError('Redis is unreachable.'), 1],
    ['anything else', new Error('boom'), 1],
  ])('%s exits %i', (_name, err, code) => {
    expect(exitCodeOf(err)).toBe(code);
    if (!(err instanceof CommanderError)) expect(reported(err).code).toBe(code);
  });
});
